"""``tf.contrib.layers`` as slim-era TF1 scripts write models: conv2d, pools, batch_norm,
dropout, layer_norm and embed_sequence, with TF's defaults and variable names."""

from __future__ import annotations

import numpy as np

import trainer as tf

layers = tf.contrib.layers


def test_a_slim_style_cnn_builds_trains_and_names_its_variables():
    rng = np.random.default_rng(0)
    tf.set_random_seed(0)
    images = tf.placeholder(tf.float32, [None, 8, 8, 1])
    labels = tf.placeholder(tf.int64, [None])
    training = tf.placeholder(tf.bool, [])
    net = layers.conv2d(images, 4, 3)  # SAME, relu, Conv/weights, Conv/biases
    net = layers.max_pool2d(net, 2)
    net = layers.conv2d(net, 6, [3, 3], normalizer_fn=layers.batch_norm,
                        normalizer_params={"is_training": training, "scale": True, "decay": 0.5})
    net = layers.avg_pool2d(net, 2)
    net = layers.dropout(layers.flatten(net), keep_prob=0.8, is_training=training)
    logits = layers.fully_connected(net, 3, activation_fn=None)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train = tf.train.AdamOptimizer(0.05).minimize(loss)
    names = sorted(v.op.name for v in tf.global_variables() if "Adam" not in v.op.name and "power" not in v.op.name)
    assert names == ["Conv/biases", "Conv/weights", "Conv_1/BatchNorm/beta", "Conv_1/BatchNorm/gamma",
                     "Conv_1/BatchNorm/moving_mean", "Conv_1/BatchNorm/moving_variance", "Conv_1/weights",
                     "fully_connected/biases", "fully_connected/weights"]
    xs = rng.standard_normal((30, 8, 8, 1)).astype(np.float32)
    ys = (xs.mean(axis=(1, 2, 3)) > 0).astype(np.int64) + (xs[:, :4].mean(axis=(1, 2, 3)) > 0.2)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {images: xs, labels: ys, training: False})
        for _ in range(60):
            sess.run(train, {images: xs, labels: ys, training: True})
        last = sess.run(loss, {images: xs, labels: ys, training: False})
    assert logits.shape == (None, 3) and last < first * 0.5


def test_layer_norm_and_embed_sequence():
    x = tf.placeholder(tf.float32, [None, 3, 4])
    normalized = layers.layer_norm(x, begin_norm_axis=-1)
    ids = tf.constant([[0, 2], [1, 1]], tf.int64)
    embedded = layers.embed_sequence(ids, vocab_size=3, embed_dim=5)
    xs = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, emb, table = sess.run([normalized, embedded, tf.global_variables()[-1]], {x: xs})
    want = (xs - xs.mean(-1, keepdims=True)) / np.sqrt(xs.var(-1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert [v.op.name for v in tf.global_variables()] == ["LayerNorm/beta", "LayerNorm/gamma", "EmbedSequence/embeddings"]
    np.testing.assert_array_equal(emb, table[[[0, 2], [1, 1]]])
