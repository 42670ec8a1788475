"""tf.nn.dilation2d / erosion2d (against a loop transcription of TF's definition, gradients by
finite differences), with_space_to_batch (TF's documented equivalence with a dilated convolution),
atrous_conv2d_transpose (the adjoint of atrous_conv2d), batch_norm_with_global_normalization,
compute_average_loss and all_candidate_sampler, with TF's errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(5)


def run(t, feed=None):
    with tf.Session() as sess:
        return sess.run(t, feed)


def dilation_reference(x, f, strides, rates, padding):
    n, h, w, c = x.shape
    fh, fw, _ = f.shape
    eh, ew = (fh - 1) * rates[0] + 1, (fw - 1) * rates[1] + 1
    if padding == "SAME":
        oh, ow = -(-h // strides[0]), -(-w // strides[1])
        top = max((oh - 1) * strides[0] + eh - h, 0) // 2
        left = max((ow - 1) * strides[1] + ew - w, 0) // 2
    else:
        oh, ow = -(-(h - eh + 1) // strides[0]), -(-(w - ew + 1) // strides[1])
        top = left = 0
    out = np.full((n, oh, ow, c), -np.inf)
    for y in range(oh):
        for x_ in range(ow):
            for i in range(fh):
                for j in range(fw):
                    yy, xx = y * strides[0] + i * rates[0] - top, x_ * strides[1] + j * rates[1] - left
                    if 0 <= yy < h and 0 <= xx < w:
                        out[:, y, x_] = np.maximum(out[:, y, x_], x[:, yy, xx] + f[i, j])
    return out


@pytest.mark.parametrize("strides, rates, padding", [
    ((1, 1), (1, 1), "SAME"), ((2, 1), (1, 2), "SAME"), ((2, 2), (2, 1), "VALID"), ((1, 3), (1, 1), "VALID")])
def test_dilation2d_and_erosion2d_match_the_definition(strides, rates, padding):
    x = RNG.standard_normal((2, 7, 6, 3))
    f = RNG.standard_normal((3, 2, 3))
    dil = tf.nn.dilation2d(x, f, [1, *strides, 1], [1, *rates, 1], padding)
    ero = tf.nn.erosion2d(x, f, [1, *strides, 1], [1, *rates, 1], padding)
    expected = dilation_reference(x, f, strides, rates, padding)
    assert dil.shape == expected.shape
    got_dil, got_ero = run([dil, ero])
    np.testing.assert_allclose(got_dil, expected, rtol=1e-12)
    np.testing.assert_allclose(got_ero, -dilation_reference(-x, f[::-1, ::-1], strides, rates, padding), rtol=1e-12)


def _check_gradients(build, values):
    phs = [tf.placeholder(tf.float64, v.shape) for v in values]
    y = build(*phs)
    weights = RNG.uniform(0.5, 1.5, y.shape)
    loss = tf.reduce_sum(y * weights)
    grads = tf.gradients(loss, phs)
    feed = dict(zip(phs, values))
    with tf.Session() as sess:
        analytic = sess.run(grads, feed)
        for k, v in enumerate(values):
            flat = v.reshape(-1)
            for i in range(flat.size):
                old = flat[i]
                flat[i] = old + 1e-6
                up = sess.run(loss, feed)
                flat[i] = old - 1e-6
                down = sess.run(loss, feed)
                flat[i] = old
                np.testing.assert_allclose(analytic[k].reshape(-1)[i], (up - down) / 2e-6, rtol=1e-5, atol=1e-6)


def test_dilation_and_erosion_gradients_match_finite_differences():
    x, f = RNG.standard_normal((1, 5, 4, 2)), RNG.standard_normal((2, 3, 2))
    _check_gradients(lambda a, b: tf.nn.dilation2d(a, b, [1, 2, 1, 1], [1, 1, 2, 1], "SAME"), [x, f])
    _check_gradients(lambda a, b: tf.nn.erosion2d(a, b, [1, 1, 1, 1], [1, 1, 1, 1], "VALID"), [x.copy(), f.copy()])


def test_dilation_errors():
    x = np.zeros((1, 5, 5, 2))
    with pytest.raises(ValueError, match=r"dilation2d: strides must be \[1, strides_height"):
        tf.nn.dilation2d(x, np.zeros((2, 2, 2)), [2, 2], [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="depth 2 and filter depth 3 differ"):
        tf.nn.dilation2d(x, np.zeros((2, 2, 3)), [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="padding must be 'SAME' or 'VALID'"):
        tf.nn.dilation2d(x, np.zeros((2, 2, 2)), [1, 1, 1, 1], [1, 1, 1, 1], "FULL")
    with pytest.raises(ValueError, match="larger than the input"):
        tf.nn.dilation2d(x, np.zeros((3, 3, 2)), [1, 1, 1, 1], [1, 3, 3, 1], "VALID")


@pytest.mark.parametrize("padding, rate", [("SAME", 2), ("VALID", 2), ("SAME", 3), ("VALID", 1)])
def test_with_space_to_batch_is_a_dilated_convolution(padding, rate):
    """TF's documented equivalence: with_space_to_batch(x, rate, p, conv VALID) == conv with dilation."""
    x = RNG.standard_normal((2, 9, 8, 3))
    w = RNG.standard_normal((3, 2, 3, 4))
    out = tf.nn.with_space_to_batch(
        x, [rate, rate], padding, lambda inp, num_spatial_dims, pad: tf.nn.convolution(inp, w, pad),
        filter_shape=w.shape)
    expected = tf.nn.convolution(x, w, padding, dilation_rate=[rate, rate])
    got, want = run([out, expected])
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_with_space_to_batch_errors():
    x = np.zeros((1, 4, 4, 1))
    with pytest.raises(ValueError, match="filter_shape must be specified for SAME padding"):
        tf.nn.with_space_to_batch(x, [2, 2], "SAME", lambda i, n, p: i)
    with pytest.raises(ValueError, match="dilation_rate must be"):
        tf.nn.with_space_to_batch(x, [0, 2], "VALID", lambda i, n, p: i)
    with pytest.raises(ValueError, match="spatial_dims must be"):
        tf.nn.with_space_to_batch(x, [2, 2], "VALID", lambda i, n, p: i, spatial_dims=[2, 3])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_atrous_conv2d_transpose_is_the_adjoint_of_atrous_conv2d(padding):
    """<atrous_conv2d(x, w), y> == <x, atrous_conv2d_transpose(y, w)> for every x and y."""
    x = RNG.standard_normal((2, 9, 8, 3))
    w = RNG.standard_normal((3, 3, 3, 4))
    forward = tf.nn.atrous_conv2d(x, w, 2, padding)
    y = RNG.standard_normal(forward.shape)
    back = tf.nn.atrous_conv2d_transpose(y, w, x.shape, 2, padding)
    assert back.shape == x.shape
    fwd, bwd = run([forward, back])
    np.testing.assert_allclose(np.sum(fwd * y), np.sum(x * bwd), rtol=1e-10)
    with pytest.raises(ValueError, match="rate must be >= 1"):
        tf.nn.atrous_conv2d_transpose(y, w, x.shape, 0, padding)


def test_batch_norm_with_global_normalization():
    t = RNG.standard_normal((4, 3))
    m, v = RNG.standard_normal(3), RNG.uniform(0.5, 2.0, 3)
    beta, gamma = RNG.standard_normal(3), RNG.standard_normal(3)
    scaled = tf.nn.batch_norm_with_global_normalization(t, m, v, beta, gamma, 1e-3, True)
    plain = tf.nn.batch_norm_with_global_normalization(input=t, mean=m, variance=v, beta=beta, gamma=gamma,
                                                       variance_epsilon=1e-3, scale_after_normalization=False)
    got_scaled, got_plain = run([scaled, plain])
    np.testing.assert_allclose(got_scaled, (t - m) / np.sqrt(v + 1e-3) * gamma + beta, rtol=1e-10)
    np.testing.assert_allclose(got_plain, (t - m) / np.sqrt(v + 1e-3) + beta, rtol=1e-10)
    with pytest.raises(ValueError, match="missing scale_after_normalization"):
        tf.nn.batch_norm_with_global_normalization(t, m, v, beta, gamma, 1e-3)


def test_compute_average_loss_in_a_tf1_training_step():
    per_example = tf.placeholder(tf.float32, [None])
    weights = tf.placeholder(tf.float32, [None])
    mean_loss = tf.nn.compute_average_loss(per_example)
    weighted = tf.nn.compute_average_loss(per_example, sample_weight=weights, global_batch_size=8)
    feed = {per_example: [1.0, 2.0, 3.0, 6.0], weights: [1.0, 0.0, 2.0, 0.5]}
    got_mean, got_weighted = run([mean_loss, weighted], feed)
    assert got_mean == pytest.approx(3.0) and got_weighted == pytest.approx((1 + 6 + 3) / 8)
    with pytest.raises(ValueError, match="at least rank 1"):
        tf.nn.compute_average_loss(tf.constant(1.0))
    with pytest.raises(ValueError, match="global_batch_size must be positive"):
        tf.nn.compute_average_loss(per_example, global_batch_size=0)


def test_all_candidate_sampler():
    true = tf.constant(np.array([[1, 3], [0, 2], [4, 4]], np.int64))
    sampled, true_expected, sampled_expected = tf.nn.all_candidate_sampler(true, 2, 5, True)
    s, te, se = run([sampled, true_expected, sampled_expected])
    np.testing.assert_array_equal(s, np.arange(5))
    assert s.dtype == np.int64 and te.shape == (3, 2) and np.all(te == 1) and np.all(se == 1)
    with pytest.raises(ValueError, match="num_true=3"):
        tf.nn.all_candidate_sampler(true, 3, 5, True)
