"""What a TF1 script assumes of ``tf.layers`` and ``tf.nn`` without saying it: channels-last batch
norm in inference mode by default, filters stored [h, w, in, out] with glorot_uniform values,
arguments in TF1's positional order, and dropout masks fixed by the graph and op seeds."""

from __future__ import annotations

import math

import numpy as np

import trainer as tf


def correlate_nhwc(x, w):
    """A NumPy reference of TF1's conv2d, "VALID", stride 1: x [n, h, w, c], w [kh, kw, c, out]."""
    kh, kw = w.shape[:2]
    out = np.zeros((x.shape[0], x.shape[1] - kh + 1, x.shape[2] - kw + 1, w.shape[3]), np.float64)
    for i in range(out.shape[1]):
        for j in range(out.shape[2]):
            out[:, i, j, :] = np.tensordot(x[:, i:i + kh, j:j + kw, :], w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def test_batch_normalization_defaults_to_the_last_axis_and_inference(digits):
    images = tf.placeholder(tf.float32, [None, 8, 8, 3])
    inference = tf.layers.batch_normalization(images)  # TF1: axis=-1, training=False
    training = tf.layers.batch_normalization(images, training=True, momentum=0.5, name="bn_train")
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    shapes = {v.op.name: v.get_shape().as_list() for v in tf.global_variables()}
    assert shapes["batch_normalization/gamma"] == [3] and shapes["bn_train/moving_mean"] == [3]
    batch = np.stack([digits["x_train"][:16].reshape(16, 8, 8) * k for k in (1.0, 2.0, 3.0)], axis=-1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(inference, {images: batch})
        np.testing.assert_allclose(out, batch / math.sqrt(1 + 1e-3), rtol=1e-5)  # moving stats 0 and 1
        normalized, _ = sess.run([training, update_ops], {images: batch})
        np.testing.assert_allclose(normalized.mean(axis=(0, 1, 2)), 0, atol=1e-5)
        np.testing.assert_allclose(normalized.std(axis=(0, 1, 2)), 1, atol=1e-2)
        moving_mean = sess.run(tf.get_default_graph().get_tensor_by_name("bn_train/moving_mean:0"))
    np.testing.assert_allclose(moving_mean, 0.5 * batch.mean(axis=(0, 1, 2)), rtol=1e-5)


def test_conv2d_filters_are_hwio_with_glorot_uniform_values(digits):
    images = tf.placeholder(tf.float32, [None, 8, 8, 1])
    conv = tf.layers.conv2d(images, 32, 5, use_bias=False)
    kernel = tf.trainable_variables()[0]
    assert kernel.get_shape().as_list() == [5, 5, 1, 32]  # TF1's filter layout
    w_conv1 = tf.Variable(tf.truncated_normal([5, 5, 1, 32], stddev=0.1))  # the Deep MNIST tutorial's filter
    by_hand = tf.nn.conv2d(images, w_conv1, strides=[1, 1, 1, 1], padding="VALID")
    batch = digits["x_train"][:4].reshape(4, 8, 8, 1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        k, w, layer_out, hand_out = sess.run([kernel, w_conv1, conv, by_hand], {images: batch})
    np.testing.assert_allclose(layer_out, correlate_nhwc(batch, k), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(hand_out, correlate_nhwc(batch, w), rtol=1e-4, atol=1e-5)
    limit = math.sqrt(6.0 / (5 * 5 * 1 + 5 * 5 * 32))  # glorot_uniform, TF1's default
    assert np.abs(k).max() <= limit and abs(k.std() - limit / math.sqrt(3)) < 0.1 * limit


def test_layer_arguments_bind_in_tf1_positional_order():
    x = tf.placeholder(tf.float32, [None, 8, 8, 1])
    conv = tf.layers.conv2d(x, 4, 3, 2, "same", "channels_last", 1, tf.nn.relu)  # strides, padding, format, ...
    assert conv.get_shape().as_list() == [None, 4, 4, 4]
    assert tf.layers.max_pooling2d(conv, 2, 2, "same").get_shape().as_list() == [None, 2, 2, 4]
    flat = tf.layers.flatten(conv)
    dense = tf.layers.dense(flat, 3, tf.nn.relu, False, tf.zeros_initializer())  # no bias, zero kernel
    assert [v.op.name for v in tf.trainable_variables()] == ["conv2d/kernel", "conv2d/bias", "dense/kernel"]
    kept = tf.layers.dropout(flat, 0.5)  # training=False by default: the identity
    dropped = tf.layers.dropout(flat, 0.5, None, 7, True)  # noise_shape, seed, training
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        feed = {x: np.ones((2, 8, 8, 1), np.float32)}
        d, f, k, dr = sess.run([dense, flat, kept, dropped], feed)
    assert not d.any() and np.array_equal(k, f)
    assert set(np.unique(dr[f > 0] / f[f > 0]).round(4)) <= {0.0, 2.0}


def dropout_masks(graph_seed, op_seed, sessions=2, steps=2):
    tf.reset_default_graph()
    if graph_seed is not None:
        tf.set_random_seed(graph_seed)
    ones = tf.ones([8, 16])
    keep_prob = tf.placeholder(tf.float32)
    dropped = tf.nn.dropout(ones, keep_prob, seed=op_seed)
    runs = []
    for _ in range(sessions):
        with tf.Session() as sess:
            runs.append([sess.run(dropped, {keep_prob: 0.5}) for _ in range(steps)])
    return runs


def test_nn_dropout_masks_follow_graph_and_op_seeds():
    first, second = dropout_masks(1, 2)  # two sessions, two steps each
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])  # a new session replays
    assert not np.array_equal(first[0], first[1])  # a fresh mask each step
    assert np.array_equal(dropout_masks(1, 2)[0][0], first[0])  # so does a rebuilt graph
    assert not np.array_equal(dropout_masks(1, 3)[0][0], first[0])  # another op seed, another mask
    graph_only = dropout_masks(5, None)
    assert np.array_equal(graph_only[0][0], graph_only[1][0])  # the graph seed alone fixes it too
    unseeded = dropout_masks(None, None)
    assert not np.array_equal(unseeded[0][0], unseeded[1][0])


def test_tensor_dtypes_are_tf_dtypes_that_still_equal_numpy_dtypes():
    x = tf.placeholder(tf.float32, [None, 3])
    labels = tf.placeholder(tf.int64, [None])
    w = tf.Variable(tf.zeros([3, 2], dtype=tf.float64))
    assert x.dtype == tf.float32 and x.dtype == np.float32 and x.dtype == np.dtype("float32")
    assert x.dtype.as_numpy_dtype is np.float32 and x.dtype.name == "float32" and x.dtype.base_dtype == tf.float32
    assert x.dtype.is_floating and not labels.dtype.is_floating and labels.dtype.is_integer
    assert w.dtype.base_dtype == tf.float64 and tf.string.name == "string"
    halved = tf.cast(labels, x.dtype.base_dtype) / 2  # a common TF1 idiom
    ones = np.ones(2, dtype=x.dtype.as_numpy_dtype)
    with tf.Session() as sess:
        out = sess.run(halved, {labels: np.array([1, 3])})
    assert out.dtype == np.float32 and out.tolist() == [0.5, 1.5] and ones.dtype == np.float32


def test_batch_normalization_with_an_is_training_placeholder(digits):
    is_training = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float32, [None, 64])
    h = tf.layers.batch_normalization(x, training=is_training, momentum=0.5)
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    moving_mean = tf.get_default_graph().get_tensor_by_name("batch_normalization/moving_mean:0")
    batch = digits["x_train"][:50] * 4
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out, _ = sess.run([h, update_ops], {x: batch, is_training: True})
        np.testing.assert_allclose(out.mean(axis=0), 0, atol=1e-5)
        after_training = sess.run(moving_mean)
        np.testing.assert_allclose(after_training, 0.5 * batch.mean(axis=0), rtol=1e-5)
        out, _ = sess.run([h, update_ops], {x: batch, is_training: False})
        np.testing.assert_array_equal(sess.run(moving_mean), after_training)  # no update in inference runs
    variance = 0.5 + 0.5 * batch.var(axis=0, ddof=1)  # the moving variance after one (unbiased) update
    np.testing.assert_allclose(out, (batch - after_training) / np.sqrt(variance + 1e-3), rtol=1e-4, atol=1e-5)


def seeded_dense_outputs(graph_seed: int | None) -> np.ndarray:
    """tf.layers.dense + conv2d built in a fresh graph, run once from their initial values."""
    g = tf.Graph()
    with g.as_default():
        if graph_seed is not None:
            tf.set_random_seed(graph_seed)
        images = tf.placeholder(tf.float32, [None, 6, 6, 2])
        h = tf.layers.conv2d(images, 3, 3, activation=tf.nn.relu)
        out = tf.layers.dense(tf.layers.flatten(h), 4)
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            return sess.run(out, {images: np.linspace(-1, 1, 72, dtype=np.float32).reshape(1, 6, 6, 2)})


def test_a_graph_seed_fixes_layer_initial_values_whatever_ran_before():
    first = seeded_dense_outputs(7)
    tf.init.glorot_uniform((50, 50))  # other models built in between draw from the process's stream
    seeded_dense_outputs(None)
    assert np.array_equal(seeded_dense_outputs(7), first)
    assert not np.array_equal(seeded_dense_outputs(8), first)
    assert not np.array_equal(seeded_dense_outputs(None), seeded_dense_outputs(None))  # unseeded: fresh values
