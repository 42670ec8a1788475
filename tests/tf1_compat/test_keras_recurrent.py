"""Recurrent Keras classifiers on digits read row by row (8 timesteps of 8 pixels)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

layers = tf.keras.layers


@pytest.mark.parametrize("recurrent", [layers.LSTM, layers.GRU])
def test_a_recurrent_classifier_over_rows_learns_digits(digits, recurrent):
    tf.set_random_seed(0)
    np.random.seed(0)
    model = tf.keras.Sequential([recurrent(32, input_shape=(8, 8)), layers.Dense(10, activation="softmax")])
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    model.fit(digits["x_train"].reshape(-1, 8, 8), digits["y_train"], batch_size=32, epochs=8, verbose=0)
    accuracy = model.evaluate(digits["x_test"].reshape(-1, 8, 8), digits["y_test"], verbose=0)[1]
    assert accuracy >= 0.9, accuracy


def test_stacked_bidirectional_layers_over_rows(digits):
    tf.set_random_seed(0)
    np.random.seed(0)
    inp = tf.keras.Input(shape=(8, 8))
    h = layers.Bidirectional(layers.SimpleRNN(16, return_sequences=True), merge_mode="sum")(inp)
    h = layers.LSTM(16)(h)
    model = tf.keras.Model(inp, layers.Dense(10, activation="softmax")(h))
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    assert model.layers[1].output_shape == (None, 8, 16)
    model.fit(digits["x_train"].reshape(-1, 8, 8), digits["y_train"], epochs=8, verbose=0)
    assert model.evaluate(digits["x_test"].reshape(-1, 8, 8), digits["y_test"], verbose=0)[1] >= 0.8


def _encoder_decoder(steps):
    """Keras' character-level seq2seq example: an LSTM encoder's states start the decoder."""
    encoder_inputs = tf.keras.Input(shape=(steps, 6))
    _, h, c = layers.LSTM(8, return_state=True)(encoder_inputs)
    decoder_inputs = tf.keras.Input(shape=(steps, 5))
    decoded = layers.LSTM(8, return_sequences=True)(decoder_inputs, initial_state=[h, c])
    backwards = layers.GRU(4, go_backwards=True, return_sequences=True)(decoded)
    outputs = layers.Dense(5, activation="softmax")(backwards)
    return tf.keras.Model([encoder_inputs, decoder_inputs], outputs)


def test_recurrent_layers_run_over_inputs_of_unknown_length():
    rng = np.random.default_rng(0)
    source, target = rng.standard_normal((4, 7, 6)).astype(np.float32), rng.standard_normal((4, 7, 5)).astype(np.float32)
    looped, unrolled = _encoder_decoder(None), _encoder_decoder(7)
    unrolled.set_weights(looped.get_weights())
    np.testing.assert_allclose(looped.predict([source, target]), unrolled.predict([source, target]), rtol=1e-5,
                               atol=1e-6)
    shorter = looped.predict([source[:, :3], target[:, :5]])  # each batch its own lengths
    assert shorter.shape == (4, 5, 5)

    # masked steps of an unknown-length input hold the state, as in the unrolled layer
    tokens = np.array([[3, 1, 4, 0, 0], [2, 7, 1, 8, 2]])
    def masked(steps):
        inp = tf.keras.Input(shape=(steps,), dtype="int32")
        return tf.keras.Model(inp, layers.GRU(6)(layers.Embedding(10, 4, mask_zero=True)(inp)))
    loop_model, unrolled_model = masked(None), masked(5)
    unrolled_model.set_weights(loop_model.get_weights())
    np.testing.assert_allclose(loop_model.predict(tokens), unrolled_model.predict(tokens), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loop_model.predict(tokens[:1, :3]), loop_model.predict(tokens[:1]), rtol=1e-5,
                               atol=1e-6)

    looped.compile(tf.keras.optimizers.Adam(0.05), "categorical_crossentropy")
    onehot = np.eye(5, dtype=np.float32)[rng.integers(0, 5, (4, 7))]
    history = looped.fit([source, target], onehot, epochs=15, verbose=0)
    assert history.history["loss"][-1] < 0.7 * history.history["loss"][0]


@pytest.mark.parametrize("recurrent", [layers.LSTM, layers.GRU, layers.SimpleRNN])
def test_recurrent_dropout_drops_while_training_only(digits, recurrent):
    tf.set_random_seed(0)
    np.random.seed(0)
    model = tf.keras.Sequential([recurrent(32, dropout=0.2, recurrent_dropout=0.2, input_shape=(8, 8)),
                                 layers.Dense(10, activation="softmax")])
    model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy", ["accuracy"])
    rows = digits["x_train"].reshape(-1, 8, 8)
    model.fit(rows, digits["y_train"], batch_size=32, epochs=8, verbose=0)
    accuracy = model.evaluate(digits["x_test"].reshape(-1, 8, 8), digits["y_test"], verbose=0)[1]
    assert accuracy >= 0.85, accuracy
    np.testing.assert_array_equal(model.predict(rows[:16]), model.predict(rows[:16]))  # inference: no dropout
    training = tf.keras.backend.function([model.input, tf.keras.backend.learning_phase()], [model.output])
    first, second = training([rows[:16], True])[0], training([rows[:16], True])[0]
    assert not np.allclose(first, second)  # a fresh mask each training pass
    np.testing.assert_allclose(training([rows[:16], False])[0], model.predict(rows[:16]), rtol=1e-6)
