"""tf.random.gamma / poisson (seeded, with the gamma's reparameterization gradient), the
stateless ops on TensorFlow's Philox4x32-10 stream, and tf.random's candidate samplers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as st

import trainer as tf
from trainer import philox


def test_philox_matches_the_random123_known_answers():
    cases = [((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
             ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
             ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
              (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1))]
    for counter, key, want in cases:
        assert tuple(int(v) for v in philox.philox(np.array([counter], np.uint32), key)[0]) == want


def test_stateless_draws_are_a_function_of_the_seed_alone():
    u = tf.random.stateless_uniform([6], seed=[1, 2])
    u_again = tf.random.stateless_uniform([6], seed=tf.constant([1, 2], tf.int64))
    u_other = tf.random.stateless_uniform([6], seed=[2, 1])
    first = tf.Session().run([u, u_again, u_other])
    second = tf.Session().run(u)
    np.testing.assert_array_equal(first[0], first[1])
    np.testing.assert_array_equal(first[0], second)
    assert not np.array_equal(first[0], first[2])
    # The first group of four comes from one Philox block of the scrambled seed (TensorFlow's layout).
    key, counter = philox.seed_to_key_counter([1, 2])
    words = philox.philox(counter[None], key)[0]
    want = ((words & 0x7FFFFF) | 0x3F800000).view(np.float32) - np.float32(1.0)
    np.testing.assert_array_equal(first[0][:4], want)


def test_stateless_distributions_have_the_right_moments_and_ranges():
    seed = [11, 7]
    got = tf.Session().run({
        "uniform": tf.random.stateless_uniform([20000], seed, minval=-2.0, maxval=3.0),
        "uniform64": tf.random.stateless_uniform([20000], seed, dtype=tf.float64),
        "ints": tf.random.stateless_uniform([20000], seed, minval=5, maxval=12, dtype=tf.int64),
        "normal": tf.random.stateless_normal([20000], seed, mean=1.0, stddev=2.0),
        "normal64": tf.random.stateless_normal([20001], seed, dtype=tf.float64),
        "truncated": tf.random.stateless_truncated_normal([20001], seed, stddev=3.0),
    })
    assert got["uniform"].dtype == np.float32 and -2.0 <= got["uniform"].min() and got["uniform"].max() < 3.0
    # KS p-values below: measured 0.14-0.97 over three seeds
    assert st.kstest(got["uniform"], "uniform", args=(-2.0, 5.0)).pvalue > 1e-4
    assert st.kstest(got["uniform64"], "uniform").pvalue > 1e-4
    assert set(np.unique(got["ints"])) == set(range(5, 12))
    assert st.kstest(got["normal"], "norm", args=(1.0, 2.0)).pvalue > 1e-4
    assert got["normal64"].dtype == np.float64 and st.kstest(got["normal64"], "norm").pvalue > 1e-4
    assert np.abs(got["truncated"]).max() < 6.0
    assert st.kstest(got["truncated"] / 3.0, st.truncnorm(-2, 2).cdf).pvalue > 1e-4


def test_stateless_categorical_follows_the_logits():
    logits = np.log(np.array([[0.2, 0.3, 0.5], [0.9, 0.05, 0.05]]))
    draws = tf.Session().run(tf.random.stateless_categorical(logits, 20000, seed=[3, 4]))
    assert draws.shape == (2, 20000) and draws.dtype == np.int64
    for row, p in zip(draws, np.exp(logits)):
        # measured deviations <= 0.0053 (sigma 0.0035)
        np.testing.assert_allclose(np.bincount(row, minlength=3) / 20000, p, atol=0.015)
    again = tf.Session().run(tf.random.stateless_multinomial(logits, 20000, seed=[3, 4], output_dtype=tf.int32))
    np.testing.assert_array_equal(again, draws)


def test_stateless_bad_inputs():
    with pytest.raises(ValueError, match="StatelessRandomUniform.*seed must have shape \\[2\\]"):
        tf.random.stateless_uniform([2], seed=[1, 2, 3])
    with pytest.raises(TypeError, match="seed must be int32 or int64"):
        tf.random.stateless_normal([2], seed=[1.0, 2.0])
    with pytest.raises(ValueError, match="Must specify maxval for integer dtype"):
        tf.random.stateless_uniform([2], seed=[1, 2], dtype=tf.int32)
    with pytest.raises(TypeError, match="stateless_normal: dtype must be float32 or float64"):
        tf.random.stateless_normal([2], seed=[1, 2], dtype=tf.int32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Need minval < maxval"):
        tf.Session().run(tf.random.stateless_uniform([2], seed=[1, 2], minval=3, maxval=3, dtype=tf.int32))


def test_gamma_and_poisson_samples_are_seeded_and_shaped_like_tensorflows():
    tf.set_random_seed(5)
    alpha = tf.constant([0.5, 2.0, 9.0], tf.float64)
    g = tf.random.gamma([4000], alpha, beta=tf.constant([[1.0], [4.0]], tf.float64), dtype=tf.float64)
    p = tf.random_poisson([0.5, 20.0], [3000], dtype=tf.int32, seed=4)
    assert g.shape == (4000, 2, 3) and p.shape == (3000, 2) and p.dtype == np.int32
    sess = tf.Session()
    gv, pv = sess.run([g, p])
    for i, rate in enumerate([1.0, 4.0]):
        for j, a in enumerate([0.5, 2.0, 9.0]):
            assert st.kstest(gv[:, i, j], st.gamma(a, scale=1.0 / rate).cdf).pvalue > 1e-4
    np.testing.assert_allclose(pv.mean(0), [0.5, 20.0], rtol=0.1)  # measured 0.487 and 20.01
    assert not np.array_equal(sess.run(g), gv)  # fresh draws every run
    tf.reset_default_graph()
    tf.set_random_seed(5)
    alpha = tf.constant([0.5, 2.0, 9.0], tf.float64)
    g2 = tf.random.gamma([4000], alpha, beta=tf.constant([[1.0], [4.0]], tf.float64), dtype=tf.float64)
    np.testing.assert_array_equal(tf.Session().run(g2), gv)  # the same seeds replay the same values


def test_gamma_reparameterization_gradient_is_the_implicit_derivative():
    alpha = tf.placeholder(tf.float64, [3])
    x = tf.random_gamma([2000], alpha, dtype=tf.float64, seed=1)
    (grad,) = tf.gradients(tf.reduce_sum(x), [alpha])
    av = np.array([0.7, 2.0, 6.0])
    xs, gv = tf.Session().run([x, grad], {alpha: av})
    # d x / d a at a fixed CDF level u = P(a, x): from SciPy's inverse, by central differences.
    u = sp.gammainc(av, xs)
    h = 1e-6
    dx = (sp.gammaincinv(av + h, u) - sp.gammaincinv(av - h, u)) / (2 * h)
    np.testing.assert_allclose(gv, dx.sum(0), rtol=1e-5)
    # E[x] = a, so the mean's gradient is near 1 (measured 0.985-1.003).
    np.testing.assert_allclose(gv / 2000, 1.0, atol=0.1)


def test_gamma_and_poisson_bad_inputs():
    with pytest.raises(TypeError, match="random_gamma: dtype must be float16, float32 or float64"):
        tf.random.gamma([2], 1.0, dtype=tf.int32)
    with pytest.raises(TypeError, match="random_poisson: dtype must be a float or signed integer type"):
        tf.random.poisson(1.0, [2], dtype=tf.bool)
    with pytest.raises(tf.errors.InvalidArgumentError, match="RandomGamma: alpha must be positive"):
        tf.Session().run(tf.random.gamma([2], [1.0, -1.0]))


def test_candidate_samplers_are_under_tf_random():
    assert tf.random.uniform_candidate_sampler is tf.nn.uniform_candidate_sampler
    assert tf.random.log_uniform_candidate_sampler is tf.nn.log_uniform_candidate_sampler
    assert tf.random.fixed_unigram_candidate_sampler is tf.nn.fixed_unigram_candidate_sampler


def test_a_tf1_script_fits_a_gamma_rate_through_reparameterized_samples():
    """A TF1 script: learn Gamma(alpha) so that samples' mean matches a target, through tf.random.gamma."""
    tf.set_random_seed(0)
    log_alpha = tf.Variable(0.0, dtype=tf.float32)
    samples = tf.random.gamma([256], tf.exp(log_alpha))
    loss = tf.square(tf.reduce_mean(samples) - 4.0)
    train = tf.train.AdamOptimizer(0.05).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(300):
            sess.run(train)
        alpha = float(sess.run(tf.exp(log_alpha)))
    assert abs(alpha - 4.0) < 0.8  # E[Gamma(alpha)] = alpha; measured 4.09
