"""tf.nn's N-D convolutions and pools as TF 1.15 scripts use them (convolution, atrous_conv2d, conv3d
and its transpose, the public conv2d gradient ops, pool, max/avg_pool1d/3d), checked against direct
NumPy loops, finite differences, and TF's errors for bad inputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(7)


def _same_pads(size, k, s, d):
    eff = (k - 1) * d + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def conv_reference(x, w, strides, dilations, padding):
    """A channels-last N-D convolution as TF defines it, one output element at a time."""
    n = x.ndim - 2
    ks = w.shape[:n]
    if padding == "SAME":
        pads = [_same_pads(x.shape[1 + i], ks[i], strides[i], dilations[i]) for i in range(n)]
    else:
        pads = [(0, 0)] * n
    xp = np.pad(x, [(0, 0), *pads, (0, 0)])
    outs = [(xp.shape[1 + i] - (ks[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(n)]
    y = np.zeros((x.shape[0], *outs, w.shape[-1]), np.float64)
    for pos in itertools.product(*(range(o) for o in outs)):
        for tap in itertools.product(*(range(k) for k in ks)):
            idx = tuple(p * s + t * d for p, s, t, d in zip(pos, strides, tap, dilations))
            y[(slice(None), *pos)] += xp[(slice(None), *idx)] @ w[tap]
    return y


def pool_reference(x, ks, strides, padding, kind):
    n = x.ndim - 2
    pads = [_same_pads(x.shape[1 + i], ks[i], strides[i], 1) for i in range(n)] if padding == "SAME" \
        else [(0, 0)] * n
    xp = np.pad(x.astype(np.float64), [(0, 0), *pads, (0, 0)], constant_values=np.nan)
    outs = [(xp.shape[1 + i] - ks[i]) // strides[i] + 1 for i in range(n)]
    y = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for pos in itertools.product(*(range(o) for o in outs)):
        win = xp[(slice(None), *(slice(p * s, p * s + k) for p, s, k in zip(pos, strides, ks)))]
        win = win.reshape(x.shape[0], -1, x.shape[-1])
        y[(slice(None), *pos)] = np.nanmax(win, 1) if kind == "MAX" else np.nanmean(win, 1)
    return y


def _run(*ts):
    return tf.Session().run(list(ts))


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv3d_matches_a_direct_loop_with_strides_and_dilations(padding):
    x = RNG.standard_normal((2, 5, 6, 7, 3)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 2, 3, 4)).astype(np.float32)
    strided = tf.nn.conv3d(x, w, strides=[1, 1, 2, 3, 1], padding=padding)
    dilated = tf.nn.conv3d(x, w, [1, 1, 1, 1, 1], padding, dilations=[1, 2, 1, 2, 1])
    first = tf.nn.conv3d(np.transpose(x, (0, 4, 1, 2, 3)), w, [1, 1, 1, 2, 3], padding, data_format="NCDHW")
    s, d, f = _run(strided, dilated, first)
    ref = conv_reference(x, w, [1, 2, 3], [1, 1, 1], padding)
    assert strided.shape == ref.shape and s.shape == ref.shape
    np.testing.assert_allclose(s, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(d, conv_reference(x, w, [1, 1, 1], [2, 1, 2], padding), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(f, np.transpose(ref, (0, 4, 1, 2, 3)), rtol=1e-4, atol=1e-4)


def test_convolution_is_n_d_and_atrous_conv2d_dilates():
    x1 = RNG.standard_normal((2, 9, 3)).astype(np.float32)
    w1 = RNG.standard_normal((3, 3, 2)).astype(np.float32)
    x2 = RNG.standard_normal((1, 8, 7, 2)).astype(np.float32)
    w2 = RNG.standard_normal((3, 2, 2, 5)).astype(np.float32)
    one = tf.nn.convolution(x1, w1, "SAME", strides=[2])
    two = tf.nn.convolution(x2, w2, "VALID", dilation_rate=[2, 3])
    atrous = tf.nn.atrous_conv2d(x2, w2, rate=2, padding="SAME")
    o, t, a = _run(one, two, atrous)
    np.testing.assert_allclose(o, conv_reference(x1, w1, [2], [1], "SAME"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(t, conv_reference(x2, w2, [1, 1], [2, 3], "VALID"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a, conv_reference(x2, w2, [1, 1], [2, 2], "SAME"), rtol=1e-4, atol=1e-4)
    assert two.shape == t.shape == (1, 4, 4, 5)


def test_depthwise_conv2d_native_is_depthwise_conv2d():
    x = RNG.standard_normal((2, 6, 6, 3)).astype(np.float32)
    w = RNG.standard_normal((3, 3, 3, 2)).astype(np.float32)
    native = tf.nn.depthwise_conv2d_native(x, w, [1, 2, 2, 1], "SAME")
    n, d = _run(native, tf.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME"))
    ref = np.concatenate([conv_reference(x[..., c:c + 1], w[:, :, c:c + 1, :], [2, 2], [1, 1], "SAME")
                          for c in range(3)], axis=-1)
    np.testing.assert_allclose(n, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(n, d)


def _input_and_filter_gradients(conv, x, w, dy):
    xt, wt = tf.constant(x), tf.constant(w)
    y = conv(xt, wt)
    return y, tf.gradients(tf.reduce_sum(y * dy), [xt, wt])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv2d_backprop_ops_are_conv2d_gradients(padding):
    x = RNG.standard_normal((2, 7, 6, 3)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 4)).astype(np.float32)
    dy = RNG.standard_normal(tf.nn.conv2d(x, w, [1, 2, 2, 1], padding).shape).astype(np.float32)
    _, (gx, gw) = _input_and_filter_gradients(lambda a, b: tf.nn.conv2d(a, b, [1, 2, 2, 1], padding), x, w, dy)
    bi = tf.nn.conv2d_backprop_input(tf.constant([2, 7, 6, 3]), w, dy, [1, 2, 2, 1], padding)
    bf = tf.nn.conv2d_backprop_filter(x, np.array([3, 2, 3, 4]), dy, [1, 2, 2, 1], padding)
    assert bi.shape == x.shape and bf.shape == w.shape
    ex, ew, ax, aw = _run(gx, gw, bi, bf)
    np.testing.assert_allclose(ax, ex, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(aw, ew, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv3d_and_conv1d_transpose_are_input_gradients(padding):
    x = RNG.standard_normal((2, 4, 5, 6, 2)).astype(np.float32)
    w = RNG.standard_normal((2, 3, 2, 2, 3)).astype(np.float32)
    conv = lambda a, b: tf.nn.conv3d(a, b, [1, 2, 1, 2, 1], padding)  # noqa: E731
    dy = RNG.standard_normal(conv(x, w).shape).astype(np.float32)
    _, (gx, _) = _input_and_filter_gradients(conv, x, w, dy)
    t3 = tf.nn.conv3d_transpose(dy, w, [2, 4, 5, 6, 2], [1, 2, 1, 2, 1], padding)
    x1 = RNG.standard_normal((2, 9, 2)).astype(np.float32)
    w1 = RNG.standard_normal((3, 2, 4)).astype(np.float32)
    conv1 = lambda a, b: tf.nn.conv1d(a, b, 2, padding)  # noqa: E731
    dy1 = RNG.standard_normal(conv1(x1, w1).shape).astype(np.float32)
    _, (gx1, _) = _input_and_filter_gradients(conv1, x1, w1, dy1)
    t1 = tf.nn.conv1d_transpose(dy1, w1, [2, 9, 2], 2, padding)
    assert t3.shape == x.shape and t1.shape == x1.shape
    e3, a3, e1, a1 = _run(gx, t3, gx1, t1)
    np.testing.assert_allclose(a3, e3, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(a1, e1, rtol=1e-4, atol=1e-4)


def _numeric_gradient_check(build, shapes):
    values = [RNG.standard_normal(s) for s in shapes]
    phs = [tf.placeholder(tf.float64, s) for s in shapes]
    y = build(*phs)
    weights = RNG.uniform(0.5, 1.5, y.shape)
    loss = tf.reduce_sum(y * weights)
    grads = tf.gradients(loss, phs)
    sess = tf.Session()
    feed = dict(zip(phs, values))
    analytic = sess.run(grads, feed)
    eps = 1e-6
    for k, v in enumerate(values):
        flat = v.reshape(-1)
        for i in RNG.choice(flat.size, size=min(flat.size, 12), replace=False):
            old = flat[i]
            flat[i] = old + eps
            up = sess.run(loss, feed)
            flat[i] = old - eps
            down = sess.run(loss, feed)
            flat[i] = old
            np.testing.assert_allclose(analytic[k].reshape(-1)[i], (up - down) / (2 * eps), rtol=1e-5, atol=1e-6)


def test_gradients_of_conv3d_transposes_and_pools_match_finite_differences():
    _numeric_gradient_check(lambda x, w: tf.nn.conv3d(x, w, [1, 1, 2, 1, 1], "SAME", dilations=[1, 1, 1, 2, 1]),
                            [(1, 3, 4, 5, 2), (2, 2, 2, 2, 3)])
    _numeric_gradient_check(lambda x, w: tf.nn.conv3d_transpose(x, w, [1, 4, 4, 3, 2], [1, 2, 2, 1, 1], "SAME"),
                            [(1, 2, 2, 3, 3), (2, 3, 1, 2, 3)])
    _numeric_gradient_check(lambda x: tf.nn.max_pool3d(x, [1, 2, 2, 2, 1], [1, 1, 2, 2, 1], "SAME"),
                            [(1, 3, 4, 4, 2)])
    _numeric_gradient_check(lambda x: tf.nn.pool(x, [3], "AVG", "SAME", strides=[2]), [(2, 7, 3)])
    _numeric_gradient_check(lambda x, w: tf.nn.atrous_conv2d(x, w, 2, "SAME"), [(1, 5, 5, 2), (2, 2, 2, 2)])
    _numeric_gradient_check(lambda x: tf.nn.max_pool_with_argmax(x, 2, 2, "SAME")[0], [(2, 5, 4, 2)])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pools_match_direct_loops(padding):
    x3 = RNG.standard_normal((2, 5, 4, 6, 3)).astype(np.float32)
    x1 = RNG.standard_normal((2, 9, 3)).astype(np.float32)
    x2 = RNG.standard_normal((2, 7, 5, 3)).astype(np.float32)
    outs = _run(tf.nn.max_pool3d(x3, [1, 2, 3, 2, 1], [1, 2, 1, 2, 1], padding),
                tf.nn.avg_pool3d(x3, [1, 2, 3, 2, 1], [1, 2, 1, 2, 1], padding),
                tf.nn.max_pool1d(x1, 3, 2, padding), tf.nn.avg_pool1d(x1, [1, 3, 1], [1, 2, 1], padding),
                tf.nn.pool(x2, [3, 2], "MAX", padding, strides=[2, 1]),
                tf.nn.pool(x2, [3, 2], "AVG", padding, strides=[2, 1]),
                tf.nn.max_pool2d(x2, [1, 3, 2, 1], [1, 2, 1, 1], padding),
                tf.nn.avg_pool2d(x2, [1, 3, 2, 1], [1, 2, 1, 1], padding))
    refs = [pool_reference(x3, [2, 3, 2], [2, 1, 2], padding, "MAX"),
            pool_reference(x3, [2, 3, 2], [2, 1, 2], padding, "AVG"),
            pool_reference(x1, [3], [2], padding, "MAX"), pool_reference(x1, [3], [2], padding, "AVG"),
            pool_reference(x2, [3, 2], [2, 1], padding, "MAX"), pool_reference(x2, [3, 2], [2, 1], padding, "AVG")]
    refs += refs[-2:]
    for got, ref in zip(outs, refs):
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_dilated_pool_and_channels_first_pool():
    x = RNG.standard_normal((1, 9, 8, 2)).astype(np.float32)
    dilated = tf.nn.pool(x, [2, 2], "MAX", "VALID", dilation_rate=[2, 3])
    first = tf.nn.pool(np.transpose(x, (0, 3, 1, 2)), [2, 2], "AVG", "VALID", strides=[2, 2], data_format="NCHW")
    d, f = _run(dilated, first)
    ref = np.maximum.reduce([x[:, i:i + 7, j:j + 5] for i in (0, 2) for j in (0, 3)])
    np.testing.assert_allclose(d, ref)
    np.testing.assert_allclose(f, np.transpose(pool_reference(x, [2, 2], [2, 2], "VALID", "AVG"), (0, 3, 1, 2)),
                               rtol=1e-5, atol=1e-6)


def test_bad_inputs_raise_value_errors_naming_the_op():
    x5 = tf.placeholder(tf.float32, [2, 4, 4, 4, 3])
    w = tf.zeros([2, 2, 2, 3, 4])
    with pytest.raises(ValueError, match="conv3d: input must be rank 5"):
        tf.nn.conv3d(tf.zeros([2, 4, 4, 3]), w, [1, 1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="conv3d: padding must be 'SAME' or 'VALID', got 'FULL'"):
        tf.nn.conv3d(x5, w, [1, 1, 1, 1, 1], "FULL")
    with pytest.raises(ValueError, match="3 channels"):
        tf.nn.conv3d(x5, tf.zeros([2, 2, 2, 5, 4]), [1, 1, 1, 1, 1], "SAME", name="c3")
    with pytest.raises(ValueError, match="conv3d: strides .* must be 1 in the batch and channel"):
        tf.nn.conv3d(x5, w, [2, 1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="conv3d: data_format must be one of"):
        tf.nn.conv3d(x5, w, [1, 1, 1, 1, 1], "SAME", data_format="NHWC")
    with pytest.raises(ValueError, match="convolution: strides .* dilation_rate"):
        tf.nn.convolution(x5, w, "SAME", strides=[2, 2, 2], dilation_rate=[2, 1, 1])
    with pytest.raises(ValueError, match="atrous_conv2d: rate must be >= 1"):
        tf.nn.atrous_conv2d(tf.zeros([1, 4, 4, 1]), tf.zeros([2, 2, 1, 1]), 0, "SAME")
    with pytest.raises(ValueError, match="pool: pooling_type must be 'MAX' or 'AVG'"):
        tf.nn.pool(x5, [2, 2, 2], "MIN", "SAME")
    with pytest.raises(ValueError, match="max_pool3d: input must be rank 5"):
        tf.nn.max_pool3d(tf.zeros([2, 4, 4, 3]), 2, 2, "VALID")
    with pytest.raises(ValueError, match="conv2d_backprop_input: input_sizes must be known when the graph is built"):
        tf.nn.conv2d_backprop_input(tf.shape(tf.placeholder(tf.float32, [None, 4, 4, 1])), tf.zeros([2, 2, 1, 1]),
                                    tf.zeros([1, 4, 4, 1]), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="conv3d_transpose: output_shape has 5 channels"):
        tf.nn.conv3d_transpose(tf.zeros([2, 2, 2, 2, 4]), w, [2, 4, 4, 4, 5], [1, 2, 2, 2, 1])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_max_pool_with_argmax_flattens_indices_as_tf_does(padding):
    x = RNG.standard_normal((2, 5, 6, 3)).astype(np.float32)
    out, argmax = tf.nn.max_pool_with_argmax(x, [1, 2, 3, 1], [1, 2, 2, 1], padding)
    _, with_batch = tf.nn.max_pool_with_argmax(x, [1, 2, 3, 1], [1, 2, 2, 1], padding, include_batch_in_index=True,
                                               output_dtype=tf.int32)
    o, a, b = _run(out, argmax, with_batch)
    np.testing.assert_allclose(o, pool_reference(x, [2, 3], [2, 2], padding, "MAX"))
    assert a.dtype == np.int64 and b.dtype == np.int32 and a.shape == o.shape
    per_image = x.reshape(2, -1)
    np.testing.assert_array_equal(np.take_along_axis(per_image, a.reshape(2, -1), 1), o.reshape(2, -1))
    np.testing.assert_array_equal(x.reshape(-1)[b.reshape(-1)], o.reshape(-1))
    np.testing.assert_array_equal(b - a, np.broadcast_to(np.arange(2).reshape(2, 1, 1, 1) * x[0].size, a.shape))
    with pytest.raises(ValueError, match="max_pool_with_argmax: only data_format='NHWC'"):
        tf.nn.max_pool_with_argmax(np.transpose(x, (0, 3, 1, 2)), 2, 2, "VALID", data_format="NCHW")
