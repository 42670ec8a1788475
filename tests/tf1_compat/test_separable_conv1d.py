"""tf.layers.separable_conv1d / SeparableConv1D: TF 1.15's variable names and shapes, values against
a direct NumPy depthwise-then-pointwise loop (valid, same, strides, dilation, channels_first), one
set of variables per layer object, and bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(13)


def reference(x, depthwise, pointwise, bias, stride, rate, padding):
    n, width, cin = x.shape
    k, _, mult = depthwise.shape
    span = (k - 1) * rate + 1
    if padding == "same":
        out = -(-width // stride)
        total = max((out - 1) * stride + span - width, 0)
        x = np.pad(x, [(0, 0), (total // 2, total - total // 2), (0, 0)])
    else:
        out = (width - span) // stride + 1
    mid = np.zeros((n, out, cin, mult))
    for o in range(out):
        for t in range(k):
            mid[:, o] += x[:, o * stride + t * rate, :, None] * depthwise[t]
    return mid.reshape(n, out, cin * mult) @ pointwise[0] + bias


@pytest.mark.parametrize("padding, stride, rate, mult", [("valid", 1, 1, 1), ("same", 2, 1, 2), ("same", 1, 2, 3),
                                                          ("valid", 3, 1, 2)])
def test_separable_conv1d_matches_a_direct_loop(padding, stride, rate, mult):
    x = RNG.standard_normal((2, 11, 3))
    out = tf.layers.separable_conv1d(tf.constant(x), 4, 3, strides=stride, padding=padding, dilation_rate=rate,
                                     depth_multiplier=mult, bias_initializer=tf.random_normal_initializer())
    names = {v.op.name: v.shape for v in tf.global_variables()}
    assert names == {"separable_conv1d/depthwise_kernel": (3, 3, mult),
                     "separable_conv1d/pointwise_kernel": (1, 3 * mult, 4), "separable_conv1d/bias": (4,)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        dw, pw, b = sess.run(tf.global_variables())
        got = sess.run(out)
    np.testing.assert_allclose(got, reference(x, dw, pw, b, stride, rate, padding), rtol=1e-10, atol=1e-12)


def test_the_layer_object_reuses_its_variables_and_channels_first_works():
    x = tf.placeholder(tf.float32, [None, 3, 9])  # channels_first
    layer = tf.layers.SeparableConv1D(5, 2, data_format="channels_first", activation=tf.nn.relu, name="sep")
    y1, y2 = layer(x), layer(x)
    assert y1.shape == (None, 5, 8) and len(tf.global_variables()) == 3
    assert [v.op.name for v in tf.global_variables()][0] == "sep/depthwise_kernel"
    value = RNG.standard_normal((2, 3, 9)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        dw, pw, b = sess.run(tf.global_variables())
        a, c = sess.run([y1, y2], {x: value})
    expected = np.maximum(reference(value.transpose(0, 2, 1), dw, pw, b, 1, 1, "valid"), 0).transpose(0, 2, 1)
    np.testing.assert_allclose(a, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(a, c)


def test_separable_conv1d_errors():
    x = tf.placeholder(tf.float32, [2, 8, 3])
    with pytest.raises(ValueError, match="strides > 1 and dilation_rate > 1"):
        tf.layers.separable_conv1d(x, 4, 3, strides=2, dilation_rate=2)
    with pytest.raises(ValueError, match="padding must be 'same' or 'valid'"):
        tf.layers.separable_conv1d(x, 4, 3, padding="full")
    with pytest.raises(ValueError, match="inputs must be 3-D"):
        tf.layers.separable_conv1d(tf.placeholder(tf.float32, [2, 8]), 4, 3)
    with pytest.raises(ValueError, match="kernel_size must be one positive integer"):
        tf.layers.separable_conv1d(x, 4, (3, 3))
