"""tf.math's special functions and composites (trainer/special_math.py) against SciPy and NumPy
formulas, their gradients against finite differences, and their errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import trainer as tf
from tests.trainer.gradient_check import central_difference
from trainer import special_functions as sf

R = np.random.default_rng(7)


def run(t, feed=None):
    return tf.Session().run(t, feed)


# -- the NumPy numerics, wide ranges, float64 ------------------------------------------------------
def _close(got, want, rtol):
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=rtol)


def test_lgamma_and_digamma_match_scipy_over_wide_ranges():
    x = np.concatenate([R.uniform(-30, 30, 3000), np.logspace(-9, 9, 400), [0.5, 1.0, 2.0, -2.5]])
    _close(sf.lgamma(x), sp.gammaln(x), 1e-12)  # measured 1.2e-13
    _close(sf.digamma(x), sp.digamma(x), 1e-12)  # measured 1.2e-13
    assert np.all(np.isposinf(sf.lgamma(np.array([0.0, -1.0, -7.0, np.inf, -np.inf]))))
    assert np.all(np.isnan(sf.digamma(np.array([0.0, -3.0]))))


def test_zeta_and_polygamma_match_scipy():
    s, q = R.uniform(1.05, 15, 800), R.uniform(0.05, 30, 800)
    _close(sf.zeta(s, q), sp.zeta(s, q), 1e-12)  # measured 4e-16
    assert sf.zeta(2.0, 1.0) == pytest.approx(np.pi ** 2 / 6, rel=1e-15)
    assert np.isposinf(sf.zeta(1.0, 2.0)) and np.isnan(sf.zeta(0.5, 2.0))
    n, x = R.integers(0, 6, 800), R.uniform(0.05, 20, 800)
    _close(sf.polygamma(n.astype(float), x), sp.polygamma(n, x), 1e-12)  # measured 4e-14
    assert np.isnan(sf.polygamma(1.5, 2.0)) and np.isnan(sf.polygamma(-1.0, 2.0))


def test_incomplete_gamma_and_beta_match_scipy():
    a, x = R.uniform(0.05, 60, 1500), R.uniform(0, 100, 1500)
    _close(sf.igamma(a, x), sp.gammainc(a, x), 1e-11)  # measured 1e-13 at a <= 60
    _close(sf.igammac(a, x), sp.gammaincc(a, x), 1e-11)
    h = 1e-5
    slope = (sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h)
    np.testing.assert_allclose(sf.igamma_grad_a(a, x), slope, atol=1e-7)  # measured 8e-10
    assert np.isnan(sf.igamma(0.0, 1.0)) and np.isnan(sf.igamma(1.0, -1.0)) and sf.igamma(1.0, 0.0) == 0.0
    ab, b, xb = R.uniform(0.05, 40, 1500), R.uniform(0.05, 40, 1500), R.uniform(0, 1, 1500)
    _close(sf.betainc(ab, b, xb), sp.betainc(ab, b, xb), 1e-12)  # measured 1.5e-14
    assert np.isnan(sf.betainc(1.0, 1.0, 1.5)) and np.isnan(sf.betainc(-1.0, 1.0, 0.5))


def test_scaled_bessel_functions_match_scipy_across_the_series_switch():
    x = np.concatenate([R.uniform(-80, 80, 3000), [0.0, 29.999, 30.0, 30.001, 700.0, -1e6]])
    _close(sf.bessel_i0e(x), sp.i0e(x), 1e-13)  # measured 6e-16
    _close(sf.bessel_i1e(x), sp.i1e(x), 1e-13)


# -- the graph ops, float32 and float64 ------------------------------------------------------------
UNARY = {
    "lgamma": (tf.lgamma, sp.gammaln, (0.1, 8.0)),
    "digamma": (tf.digamma, sp.digamma, (0.1, 8.0)),
    "bessel_i0": (tf.math.bessel_i0, sp.i0, (-5.0, 5.0)),
    "bessel_i0e": (tf.math.bessel_i0e, sp.i0e, (-5.0, 5.0)),
    "bessel_i1": (tf.math.bessel_i1, sp.i1, (-5.0, 5.0)),
    "bessel_i1e": (tf.math.bessel_i1e, sp.i1e, (-5.0, 5.0)),
}


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_special_ops_in_a_session(name, dtype):
    fn, ref, (lo, hi) = UNARY[name]
    x = R.uniform(lo, hi, (3, 5)).astype(dtype)
    ph = tf.placeholder(dtype, [None, 5])
    y = fn(ph)
    assert y.dtype == dtype and y.shape == (None, 5)
    got = run(y, {ph: x})
    assert got.dtype == dtype
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=1e-5 if dtype == np.float32 else 1e-12)


def test_binary_special_ops_broadcast_and_match_scipy():
    a = np.array([[0.5], [2.0], [7.0]])
    x = np.array([0.3, 1.0, 4.0, 9.0])
    got = run({"igamma": tf.math.igamma(a, x), "igammac": tf.math.igammac(a, x), "zeta": tf.zeta(a + 1.0, x),
               "polygamma": tf.polygamma(np.array([[0.0], [1.0], [3.0]]), x), "atan2": tf.atan2(a - 2.0, x - 1.0),
               "betainc": tf.math.betainc(a, 2.5, x / 10.0)})
    np.testing.assert_allclose(got["igamma"], sp.gammainc(a, x), rtol=1e-12)
    np.testing.assert_allclose(got["igammac"], sp.gammaincc(a, x), rtol=1e-12)
    np.testing.assert_allclose(got["zeta"], sp.zeta(a + 1.0, x), rtol=1e-12)
    np.testing.assert_allclose(got["polygamma"], sp.polygamma(np.array([[0], [1], [3]]), x), rtol=1e-12)
    np.testing.assert_allclose(got["atan2"], np.arctan2(a - 2.0, x - 1.0), rtol=1e-12)
    np.testing.assert_allclose(got["betainc"], sp.betainc(a, 2.5, x / 10.0), rtol=1e-12)
    assert tf.math.igamma(tf.placeholder(tf.float32, [3, 1]), tf.placeholder(tf.float32, [4])).shape == (3, 4)


def test_lbeta_is_the_log_of_the_multivariate_beta():
    x = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, 4.0]])
    want = np.sum(sp.gammaln(x), -1) - sp.gammaln(np.sum(x, -1))
    np.testing.assert_allclose(run(tf.lbeta(x)), want, rtol=1e-12)
    assert tf.lbeta(tf.placeholder(tf.float32, [None, 4, 3])).shape == (None, 4)


def test_no_nan_products_and_quotients():
    x = tf.constant([0.0, 0.0, 2.0, 3.0], tf.float64)
    y = tf.constant([0.0, -1.0, 0.5, 4.0], tf.float64)
    poison = tf.constant([np.inf, np.nan, 1.0, 2.0], tf.float64)
    got = run([tf.math.xlogy(x, y), tf.math.xdivy(x, y), tf.math.multiply_no_nan(poison, x),
               tf.math.reciprocal_no_nan(x)])
    np.testing.assert_array_equal(got[0], [0.0, 0.0, 2.0 * np.log(0.5), 3.0 * np.log(4.0)])
    np.testing.assert_array_equal(got[1], [0.0, 0.0, 4.0, 0.75])
    np.testing.assert_array_equal(got[2], [0.0, 0.0, 2.0, 6.0])
    np.testing.assert_array_equal(got[3], [0.0, 0.0, 0.5, 1.0 / 3.0])


def test_xlogy_gradients_are_zero_where_x_is_zero():
    x = tf.placeholder(tf.float64, [3])
    y = tf.placeholder(tf.float64, [3])
    dx, dy = tf.gradients(tf.reduce_sum(tf.math.xlogy(x, y)), [x, y])
    xv, yv = np.array([0.0, 2.0, 0.5]), np.array([0.0, 3.0, 2.0])
    gx, gy = run([dx, dy], {x: xv, y: yv})
    np.testing.assert_allclose(gx, [0.0, np.log(3.0), np.log(2.0)])
    np.testing.assert_allclose(gy, [0.0, 2.0 / 3.0, 0.25])


def test_reductions_variance_std_and_euclidean_norm():
    v = R.normal(size=(4, 6))
    got = run([tf.math.reduce_variance(v), tf.math.reduce_variance(v, axis=1, keepdims=True),
               tf.math.reduce_std(v, axis=[0]), tf.math.reduce_euclidean_norm(v, axis=-1)])
    np.testing.assert_allclose(got[0], np.var(v), rtol=1e-12)
    np.testing.assert_allclose(got[1], np.var(v, axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(got[2], np.std(v, axis=0), rtol=1e-12)
    np.testing.assert_allclose(got[3], np.linalg.norm(v, axis=-1), rtol=1e-12)
    # TensorFlow's documented example: integer input, integer (truncated) root.
    assert run(tf.math.reduce_euclidean_norm(tf.constant([[1, 2, 3], [1, 1, 1]], tf.int32))) == 4
    with pytest.raises(TypeError, match="reduce_variance: input_tensor must be floating point"):
        tf.math.reduce_variance(tf.constant([1, 2]))


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_logsumexp_is_exact_where_exp_would_overflow(exclusive, reverse):
    x = np.array([[-1000.0, 0.0, 1.0, 800.0], [3.0, -2.0, 0.5, 0.0]])
    got = run(tf.math.cumulative_logsumexp(x, axis=1, exclusive=exclusive, reverse=reverse))
    v = x[:, ::-1] if reverse else x
    ends = [k + (0 if exclusive else 1) for k in range(4)]
    want = np.stack([[np.logaddexp.reduce(row[:end]) if end else -np.inf for end in ends] for row in v])
    want = want[:, ::-1] if reverse else want
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_cumulative_logsumexp_gradient_matches_finite_differences():
    xv = R.uniform(-2, 2, (2, 5))
    w = R.uniform(-1, 1, (2, 5))  # mixed-sign upstream gradient exercises both log-space halves
    x = tf.placeholder(tf.float64, [2, 5])
    # exclusive: the first column is log(0) = -inf, so the loss reads the rest
    loss = tf.reduce_sum(tf.math.cumulative_logsumexp(x, axis=1, exclusive=True)[:, 1:] * w[:, 1:])
    sess = tf.Session()
    (got,) = sess.run(tf.gradients(loss, [x]), {x: xv})
    np.testing.assert_allclose(got, central_difference(lambda v: sess.run(loss, {x: v}), xv), rtol=1e-6, atol=1e-8)


def test_polyval_horner():
    x = np.array([0.5, -2.0, 3.0])
    np.testing.assert_allclose(run(tf.math.polyval([2.0, -1.0, 0.5, 3.0], tf.constant(x))),
                               np.polyval([2.0, -1.0, 0.5, 3.0], x))
    np.testing.assert_array_equal(run(tf.math.polyval([], tf.constant(x))), np.zeros(3))
    with pytest.raises(ValueError, match="polyval: coeffs must be a list"):
        tf.math.polyval(np.array([1.0, 2.0]), x)


def test_invert_permutation_and_its_errors():
    assert run(tf.invert_permutation(tf.constant([3, 4, 0, 2, 1], tf.int32))).tolist() == [2, 4, 3, 0, 1]
    ph = tf.placeholder(tf.int32, [None])
    inv = tf.invert_permutation(ph)
    with pytest.raises(Exception, match=r"InvertPermutation: x\[1\] = 5 is not in \[0, 3\)"):
        run(inv, {ph: [0, 5, 1]})
    with pytest.raises(Exception, match="not a permutation"):
        run(inv, {ph: [0, 0, 1]})
    with pytest.raises(ValueError, match="InvertPermutation.*x must be int32 or int64"):
        tf.invert_permutation(tf.constant([0.0, 1.0]))
    with pytest.raises(ValueError, match="InvertPermutation.*must be a vector"):
        tf.invert_permutation(tf.constant([[0, 1]], tf.int32))


def test_monotonicity_checks():
    got = run([tf.is_non_decreasing([1, 1, 2]), tf.is_strictly_increasing([1, 1, 2]),
               tf.is_strictly_increasing([[1, 2], [3, 4]]), tf.is_non_decreasing(tf.constant([], tf.float32)),
               tf.is_strictly_increasing([3.0, 1.0])])
    assert [bool(v) for v in got] == [True, False, True, True, False]
    with pytest.raises(TypeError, match="is_non_decreasing: x must be a numeric tensor"):
        tf.is_non_decreasing(tf.constant([True, False]))


def test_nextafter_and_accumulate_n():
    got = run(tf.math.nextafter(tf.constant([1.0, 1.0], tf.float32), tf.constant([2.0, 0.0], tf.float32)))
    np.testing.assert_array_equal(got, np.nextafter(np.float32([1.0, 1.0]), np.float32([2.0, 0.0])))
    a, b = tf.constant([1.0, 2.0]), tf.constant([10.0, 20.0])
    np.testing.assert_array_equal(run(tf.accumulate_n([a, b, a], shape=[2], tensor_dtype=tf.float32)), [12.0, 24.0])
    with pytest.raises(ValueError, match="accumulate_n: inputs must be a list"):
        tf.accumulate_n([])
    with pytest.raises(ValueError, match="not compatible"):
        tf.accumulate_n([a, tf.constant([1.0, 2.0, 3.0])])
    with pytest.raises(TypeError, match="tensor_dtype is float64"):
        tf.accumulate_n([a, b], tensor_dtype=tf.float64)


def test_integer_input_to_a_float_only_op_names_op_and_argument():
    with pytest.raises(ValueError, match="Lgamma.*x must be floating point"):
        tf.lgamma(tf.constant([1, 2], tf.int32))
    with pytest.raises(ValueError, match="Betainc.*a, b, x must be floating point"):
        tf.math.betainc(tf.constant([1], tf.int32), tf.constant([1], tf.int32), tf.constant([1], tf.int32))


def test_special_gradients_follow_tensorflows_rules():
    """lgamma -> digamma, igamma's x -> the gamma density, betainc's x -> the beta density, none for betainc's a."""
    x = tf.placeholder(tf.float64, [3])
    a = tf.placeholder(tf.float64, [3])
    xv, av = np.array([0.7, 2.0, 5.5]), np.array([1.5, 0.8, 3.0])
    grads = tf.gradients(tf.reduce_sum(tf.lgamma(x)), x) + tf.gradients(tf.reduce_sum(tf.math.igamma(a, x)), [a, x])
    grads += tf.gradients(tf.reduce_sum(tf.math.betainc(a, 2.0, x / 10.0)), [a, x])
    assert grads[-2] is None
    got = run(grads[:3] + grads[4:], {x: xv, a: av})
    np.testing.assert_allclose(got[0], sp.digamma(xv), rtol=1e-12)
    h = 1e-6
    np.testing.assert_allclose(got[1], (sp.gammainc(av + h, xv) - sp.gammainc(av - h, xv)) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(got[2], np.exp(-xv + (av - 1) * np.log(xv) - sp.gammaln(av)), rtol=1e-12)
    density = (xv / 10) ** (av - 1) * (1 - xv / 10) / sp.beta(av, 2.0) / 10.0
    np.testing.assert_allclose(got[3], density, rtol=1e-10)


def test_a_tf1_script_fits_a_gamma_shape_by_maximum_likelihood():
    """A TF1 user's script: fit a gamma distribution's shape with tf.lgamma in the log-likelihood."""
    rng = np.random.default_rng(3)
    data = rng.gamma(shape=3.0, scale=1.0, size=4000).astype(np.float32)
    samples = tf.placeholder(tf.float32, [None], name="samples")
    log_shape = tf.Variable(0.0, name="log_shape")
    shape = tf.exp(log_shape)
    log_lik = tf.reduce_mean((shape - 1.0) * tf.log(samples) - samples - tf.lgamma(shape))
    train_op = tf.train.AdamOptimizer(0.05).minimize(-log_lik)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(300):
            sess.run(train_op, {samples: data})
        fitted = sess.run(shape)
    # The maximum-likelihood shape solves digamma(k) = mean(log x) (scale 1): 3.016 here, fitted to 1e-6.
    mle = 3.0
    for _ in range(50):
        mle -= (sp.digamma(mle) - np.mean(np.log(data))) / sp.polygamma(1, mle)
    assert abs(fitted - mle) < 0.05
