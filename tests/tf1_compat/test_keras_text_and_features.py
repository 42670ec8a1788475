"""Text through Tokenizer, pad_sequences and a masked Embedding; feature columns through DenseFeatures."""

from __future__ import annotations

import numpy as np

import trainer as tf

layers = tf.keras.layers


def test_a_tokenized_padded_text_classifier_learns_word_cues():
    tf.set_random_seed(0)
    np.random.seed(0)
    rng = np.random.default_rng(0)
    filler = ["the", "a", "movie", "film", "was", "plot", "acting", "and", "it", "very"]
    texts, labels = [], []
    for _ in range(300):
        cue, label = ("great", 1) if rng.random() < 0.5 else ("awful", 0)
        words = list(rng.choice(filler, size=rng.integers(2, 7))) + [cue]
        rng.shuffle(words)
        texts.append(" ".join(words))
        labels.append(label)
    tokenizer = tf.keras.preprocessing.text.Tokenizer(num_words=50, oov_token="<unk>")
    tokenizer.fit_on_texts(texts)
    x = tf.keras.preprocessing.sequence.pad_sequences(tokenizer.texts_to_sequences(texts), maxlen=8,
                                                      padding="post")
    assert x.shape == (300, 8) and tokenizer.word_index["<unk>"] == 1
    model = tf.keras.Sequential([layers.Embedding(50, 8, mask_zero=True, input_length=8), layers.LSTM(8),
                                 layers.Dense(1, activation="sigmoid")])
    model.compile(tf.keras.optimizers.Adam(0.02), "binary_crossentropy", ["accuracy"])
    model.fit(x[:240], np.array(labels[:240]), epochs=10, batch_size=32, verbose=0)
    assert model.evaluate(x[240:], np.array(labels[240:]), verbose=0)[1] >= 0.9
    index = tokenizer.word_index
    assert tokenizer.texts_to_sequences(["what a great zzz film"]) == [[1, index["a"], index["great"], 1,
                                                                        index["film"]]]


def test_dense_features_feed_feature_columns_into_keras_layers():
    tf.set_random_seed(0)
    columns = [tf.feature_column.numeric_column("size", shape=(2,)),
               tf.feature_column.embedding_column(tf.feature_column.categorical_column_with_identity("kind", 4), 3)]
    features = {"size": tf.placeholder(tf.float32, [None, 2]), "kind": tf.placeholder(tf.int64, [None, 1])}
    dense_features = layers.DenseFeatures(columns)
    hidden = dense_features(features)
    out = layers.Dense(1)(hidden)
    assert hidden.shape[1] == 5 and len(dense_features.trainable_weights) == 1
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(out, {features["size"]: np.ones((2, 2)), features["kind"]: [[1], [3]]}).shape == (2, 1)
