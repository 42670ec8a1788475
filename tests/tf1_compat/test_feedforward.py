"""TF1 tutorial scripts, unchanged but for ``import trainer as tf``: an MLP from raw Variables,
a CNN from tf.nn.conv2d / max_pool, and an autoencoder, on scikit-learn's digits."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_mlp_from_raw_variables_reaches_95_percent(digits):
    tf.set_random_seed(1)
    n_input, n_hidden, n_classes = 64, 64, 10
    x = tf.placeholder("float", [None, n_input])
    y = tf.placeholder("float", [None, n_classes])
    weights = {"h1": tf.Variable(tf.random_normal([n_input, n_hidden], stddev=0.1)),
               "out": tf.Variable(tf.random_normal([n_hidden, n_classes], stddev=0.1))}
    biases = {"b1": tf.Variable(tf.zeros([n_hidden])), "out": tf.Variable(tf.zeros([n_classes]))}
    layer_1 = tf.nn.relu(tf.add(tf.matmul(x, weights["h1"]), biases["b1"]))
    logits = tf.matmul(layer_1, weights["out"]) + biases["out"]
    cost = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(logits=logits, labels=y))
    train_op = tf.train.AdamOptimizer(learning_rate=0.01).minimize(cost)
    correct = tf.equal(tf.argmax(logits, 1), tf.argmax(y, 1))
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(30):
            for i in range(0, 1400, 100):
                sess.run(train_op, feed_dict={x: digits["x_train"][i:i + 100], y: digits["y_train_1h"][i:i + 100]})
        acc = sess.run(accuracy, feed_dict={x: digits["x_test"], y: digits["y_test_1h"]})
    assert acc >= 0.95, acc


@pytest.mark.slow
def test_cnn_from_nn_conv2d_and_max_pool_reaches_95_percent(digits):
    tf.set_random_seed(2)
    x = tf.placeholder(tf.float32, [None, 64])
    y_ = tf.placeholder(tf.int64, [None])
    keep_prob = tf.placeholder(tf.float32)

    def weight_variable(shape):
        return tf.Variable(tf.truncated_normal(shape, stddev=0.1))

    def bias_variable(shape):
        return tf.Variable(tf.constant(0.1, shape=shape))

    x_image = tf.reshape(x, [-1, 8, 8, 1])
    h_conv1 = tf.nn.relu(tf.nn.conv2d(x_image, weight_variable([3, 3, 1, 16]), strides=[1, 1, 1, 1],
                                      padding="SAME") + bias_variable([16]))
    h_pool1 = tf.nn.max_pool(h_conv1, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    flat = tf.reshape(h_pool1, [-1, 4 * 4 * 16])
    h_fc1 = tf.nn.relu(tf.matmul(flat, weight_variable([256, 64])) + bias_variable([64]))
    h_drop = tf.nn.dropout(h_fc1, keep_prob)
    logits = tf.matmul(h_drop, weight_variable([64, 10])) + bias_variable([10])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_, logits=logits))
    train_step = tf.train.AdamOptimizer(1e-2).minimize(loss)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y_), tf.float32))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(8):
            for i in range(0, 1400, 100):
                sess.run(train_step, {x: digits["x_train"][i:i + 100], y_: digits["y_train"][i:i + 100],
                                      keep_prob: 0.8})
        acc = sess.run(accuracy, {x: digits["x_test"], y_: digits["y_test"], keep_prob: 1.0})
    assert acc >= 0.95, acc


def test_autoencoder_reconstruction_error_falls_below_a_third(digits):
    tf.set_random_seed(3)
    X = tf.placeholder("float", [None, 64])
    with tf.variable_scope("encoder"):
        h = tf.nn.sigmoid(tf.matmul(X, tf.get_variable("w", [64, 16])) + tf.get_variable("b", [16]))
    with tf.variable_scope("decoder"):
        out = tf.nn.sigmoid(tf.matmul(h, tf.get_variable("w", [16, 64])) + tf.get_variable("b", [64]))
    loss = tf.reduce_mean(tf.pow(X - out, 2))
    opt = tf.train.RMSPropOptimizer(0.01).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(loss, {X: digits["x_test"]})
        for epoch in range(20):
            for i in range(0, 1400, 100):
                sess.run(opt, {X: digits["x_train"][i:i + 100]})
        after = sess.run(loss, {X: digits["x_test"]})
    assert after < before / 3, (before, after)
    assert sorted(v.name for v in tf.trainable_variables()) == ["decoder/b:0", "decoder/w:0", "encoder/b:0", "encoder/w:0"]


def test_tf_layers_cnn_with_channels_last_reaches_95_percent(digits):
    """The tf.layers CNN tutorial, naming TF1's layout as some scripts do (it is also the default)."""
    tf.set_random_seed(8)
    features = tf.placeholder(tf.float32, [None, 64])
    labels = tf.placeholder(tf.int64, [None])
    training = tf.placeholder(tf.bool, [])
    input_layer = tf.reshape(features, [-1, 8, 8, 1])
    conv1 = tf.layers.conv2d(inputs=input_layer, filters=16, kernel_size=[3, 3], padding="same",
                             activation=tf.nn.relu, data_format="channels_last")
    pool1 = tf.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2, data_format="channels_last")
    flat = tf.reshape(pool1, [-1, 4 * 4 * 16])
    dense = tf.layers.dense(inputs=flat, units=64, activation=tf.nn.relu)
    dropout = tf.layers.dropout(inputs=dense, rate=0.2, training=training)
    logits = tf.layers.dense(inputs=dropout, units=10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss, global_step=tf.train.get_or_create_global_step())
    accuracy = tf.reduce_mean(tf.to_float(tf.equal(tf.argmax(logits, axis=1), labels)))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(4):
            for i in range(0, 1400, 100):
                sess.run(train_op, {features: digits["x_train"][i:i + 100], labels: digits["y_train"][i:i + 100],
                                    training: True})
        acc = sess.run(accuracy, {features: digits["x_test"], labels: digits["y_test"], training: False})
    assert acc >= 0.95, acc


def test_tf_layers_image_layers_default_to_nhwc_and_train(digits):
    """TF1's ``tf.layers`` default to channels_last and "valid" padding: a script that names neither
    feeds NHWC images and gets TF1's NHWC shapes back (not H read as 8 channels, not "same" padding)."""
    tf.set_random_seed(3)
    images = tf.placeholder(tf.float32, [None, 8, 8, 1])
    labels = tf.placeholder(tf.int64, [None])
    conv = tf.layers.conv2d(images, 32, 5, activation=tf.nn.relu)
    pool = tf.layers.max_pooling2d(conv, 2, 2)
    assert conv.get_shape().as_list() == [None, 4, 4, 32]  # TF1's default padding is "valid"
    assert pool.get_shape().as_list() == [None, 2, 2, 32]
    assert tf.layers.average_pooling2d(conv, 4, 4).get_shape().as_list() == [None, 1, 1, 32]
    logits = tf.layers.dense(tf.layers.flatten(pool), 10)
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    train_op = tf.train.AdamOptimizer(0.01).minimize(loss)
    feed = {images: digits["x_train"][:200].reshape(-1, 8, 8, 1), labels: digits["y_train"][:200]}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(loss, feed)
        for _ in range(30):
            sess.run(train_op, feed)
        after = sess.run(loss, feed)
    assert after < before / 2, (before, after)
