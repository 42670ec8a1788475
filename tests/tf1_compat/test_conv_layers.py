"""``tf.layers.conv2d_transpose``, ``separable_conv2d``, ``conv1d`` and the 1-D pools, against NumPy
loops written from TensorFlow 1.x's definitions (NHWC, TF1's variable shapes and names)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(0)


def values(fetches, feeds):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        return sess.run(fetches, feeds)


def variable(name):
    return next(v for v in tf.global_variables() if v.name == name)


def transposed_reference(x, w, stride, same):
    """Scatter each input pixel through the kernel [k, k, out, in]; "same" keeps in * stride, cropping
    total padding // 2 at the start as TF does."""
    n, h, wd, _ = x.shape
    k, out = w.shape[0], w.shape[2]
    full = np.zeros((n, (h - 1) * stride + k, (wd - 1) * stride + k, out), np.float64)
    for i in range(h):
        for j in range(wd):
            full[:, i * stride:i * stride + k, j * stride:j * stride + k] += np.einsum("nc,abOc->nabO", x[:, i, j], w)
    if not same:
        return full
    top = (full.shape[1] - h * stride) // 2
    left = (full.shape[2] - wd * stride) // 2
    return full[:, top:top + h * stride, left:left + wd * stride]


@pytest.mark.parametrize("padding,stride", [("same", 2), ("valid", 2), ("same", 1)])
def test_conv2d_transpose(padding, stride):
    xs = RNG.standard_normal((2, 4, 5, 3)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 4, 5, 3])
    y = tf.layers.conv2d_transpose(x, 6, 3, strides=stride, padding=padding, bias_initializer=tf.constant_initializer(0.5))
    kernel = variable("conv2d_transpose/kernel:0")
    assert kernel.shape == (3, 3, 6, 3)
    got, w = values([y, kernel], {x: xs})
    np.testing.assert_allclose(got, transposed_reference(xs, w, stride, padding == "same") + 0.5, rtol=1e-4, atol=1e-4)


def test_separable_conv2d():
    xs = RNG.standard_normal((2, 5, 5, 3)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 5, 5, 3])
    y = tf.layers.separable_conv2d(x, 4, 3, padding="valid", depth_multiplier=2, activation=tf.nn.relu)
    got, dw, pw, b = values([y, variable("separable_conv2d/depthwise_kernel:0"),
                             variable("separable_conv2d/pointwise_kernel:0"), variable("separable_conv2d/bias:0")], {x: xs})
    depth = np.zeros((2, 3, 3, 3, 2))
    for i in range(3):
        for j in range(3):
            depth[:, i, j] = np.einsum("nabc,abcm->ncm", xs[:, i:i + 3, j:j + 3], dw)
    want = np.maximum(depth.reshape(2, 3, 3, 6) @ pw[0, 0] + b, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv1d_and_the_1d_pools():
    xs = RNG.standard_normal((2, 7, 3)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 7, 3])
    y = tf.layers.conv1d(x, 4, 3, padding="valid")
    pooled_max, pooled_mean = tf.layers.max_pooling1d(x, 2, 2), tf.layers.average_pooling1d(x, 3, 2)
    got, w, m, a = values([y, variable("conv1d/kernel:0"), pooled_max, pooled_mean], {x: xs})
    want = np.stack([np.einsum("nkc,kco->no", xs[:, t:t + 3], w) for t in range(5)], axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m, np.maximum(xs[:, 0:6:2], xs[:, 1:7:2]))
    np.testing.assert_allclose(a, np.stack([xs[:, t:t + 3].mean(1) for t in (0, 2, 4)], axis=1), rtol=1e-6)
    with pytest.raises(ValueError, match="padding must be 'same' or 'valid'"):
        tf.layers.conv2d_transpose(tf.zeros([1, 2, 2, 1]), 1, 2, padding="full")


def test_layer_objects_build_once_and_reuse_their_variables():
    projection = tf.layers.Dense(3, activation=tf.nn.relu, name="projection")
    a, b = tf.placeholder(tf.float32, [None, 4]), tf.placeholder(tf.float32, [None, 4])
    with tf.variable_scope("decoder"):
        ya = projection(a)
    yb = projection(b)  # elsewhere: the same kernel and bias
    conv = tf.layers.Conv2D(2, 3, padding="same")
    pool, flat = tf.layers.MaxPooling2D(2, 2), tf.layers.Flatten()
    images = tf.placeholder(tf.float32, [None, 4, 4, 1])
    out = flat(pool(conv(images)))
    assert [v.name for v in projection.variables] == ["decoder/projection/kernel:0", "decoder/projection/bias:0"]
    assert projection.kernel is projection.variables[0] and len(tf.trainable_variables()) == 4
    assert conv.name == "conv2d" and out.shape == (None, 8)
    xs = RNG.standard_normal((2, 4)).astype(np.float32)
    got_a, got_b, w, bias = values([ya, yb, projection.kernel, projection.bias], {a: xs, b: xs})
    np.testing.assert_array_equal(got_a, got_b)
    np.testing.assert_allclose(got_a, np.maximum(xs @ w + bias, 0), rtol=1e-6)
    with pytest.raises(AttributeError, match="no variable 'kernel'"):
        tf.layers.Dense(2).kernel
