"""tf.nn.fractional_max_pool / fractional_avg_pool: outputs against the regions the returned
sequences describe (NumPy), the sequences' TF invariants (regions of k or k+1, from 0 to the size),
determinism, gradients by finite differences, and TF's errors for bad pooling ratios."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(8)
VALUE = RNG.standard_normal((2, 7, 9, 3))
RATIO = [1.0, 1.44, 1.73, 1.0]


def regions(seq, size, overlapping):
    return [(int(a), int(min(b if overlapping else b - 1, size - 1))) for a, b in zip(seq[:-1], seq[1:])]


def pooled(value, rows, cols, overlapping, reduce):
    out = np.zeros((value.shape[0], len(rows) - 1, len(cols) - 1, value.shape[3]))
    for r, (r0, r1) in enumerate(regions(rows, value.shape[1], overlapping)):
        for c, (c0, c1) in enumerate(regions(cols, value.shape[2], overlapping)):
            out[:, r, c] = reduce(value[:, r0:r1 + 1, c0:c1 + 1], axis=(1, 2))
    return out


@pytest.mark.parametrize("pseudo_random", [False, True])
@pytest.mark.parametrize("overlapping", [False, True])
def test_outputs_are_the_regions_of_the_returned_sequences(pseudo_random, overlapping):
    x = tf.placeholder(tf.float64, VALUE.shape)
    max_out = tf.nn.fractional_max_pool(x, RATIO, pseudo_random, overlapping, seed=5)
    avg_out = tf.nn.fractional_avg_pool(x, RATIO, pseudo_random, overlapping, seed=6)
    assert max_out[0].shape == (2, 4, 5, 3) and max_out[1].shape == (5,) and max_out[2].shape == (6,)
    with tf.Session() as sess:
        for _ in range(5):
            (m, m_rows, m_cols), (a, a_rows, a_cols) = sess.run([max_out, avg_out], {x: VALUE})
            for seq, size, k in ((m_rows, 7, 1), (m_cols, 9, 1), (a_rows, 7, 1), (a_cols, 9, 1)):
                assert seq[0] == 0 and seq[-1] == size and set(np.diff(seq)) <= {k, k + 1}
            np.testing.assert_allclose(m, pooled(VALUE, m_rows, m_cols, overlapping, np.max))
            np.testing.assert_allclose(a, pooled(VALUE, a_rows, a_cols, overlapping, np.mean))


def test_deterministic_pools_draw_the_same_regions_every_run():
    x = tf.constant(VALUE)
    fixed = tf.nn.fractional_max_pool(x, RATIO, deterministic=True, seed=1, seed2=2)
    free = tf.nn.fractional_max_pool(x, RATIO, seed=9)
    with tf.Session() as sess:
        fixed_runs = {tuple(sess.run(fixed[1])) + tuple(sess.run(fixed[2])) for _ in range(10)}
        free_runs = {tuple(sess.run(free[1])) + tuple(sess.run(free[2])) for _ in range(30)}
    assert len(fixed_runs) == 1
    assert len(free_runs) > 1  # 4 x 5 orderings of the widths; 30 seeded draws give several


def test_integer_ratios_are_plain_pooling():
    x = tf.constant(VALUE[:, :6, :8])
    out, rows, cols = tf.nn.fractional_max_pool(x, [1.0, 2.0, 2.0, 1.0])
    got, r, c = tf.Session().run([out, rows, cols])
    np.testing.assert_array_equal(r, [0, 2, 4, 6])
    np.testing.assert_array_equal(c, [0, 2, 4, 6, 8])
    np.testing.assert_allclose(got, VALUE[:, :6, :8].reshape(2, 3, 2, 4, 2, 3).max(axis=(2, 4)))


@pytest.mark.parametrize("pool", ["fractional_max_pool", "fractional_avg_pool"])
@pytest.mark.parametrize("overlapping", [False, True])
def test_gradients_match_finite_differences(pool, overlapping):
    x = tf.placeholder(tf.float64, (1, 5, 6, 2))
    out = getattr(tf.nn, pool)(x, [1.0, 1.6, 1.9, 1.0], pseudo_random=True, overlapping=overlapping,
                               deterministic=True, seed=4)[0]
    weights = RNG.uniform(0.5, 1.5, out.shape)
    loss = tf.reduce_sum(out * weights)
    grad = tf.gradients(loss, x)[0]
    value = RNG.standard_normal((1, 5, 6, 2))
    with tf.Session() as sess:
        analytic = sess.run(grad, {x: value})
        flat = value.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + 1e-6
            up = sess.run(loss, {x: value})
            flat[i] = old - 1e-6
            down = sess.run(loss, {x: value})
            flat[i] = old
            np.testing.assert_allclose(analytic.reshape(-1)[i], (up - down) / 2e-6, rtol=1e-5, atol=1e-6)


def test_bad_pooling_ratios():
    x = tf.constant(VALUE)
    with pytest.raises(Exception, match=r"pooling_ratio must be \[1.0, row_ratio, col_ratio, 1.0\]"):
        tf.nn.fractional_max_pool(x, [2.0, 1.5, 1.5, 1.0])
    with pytest.raises(Exception, match="ratios >= 1"):
        tf.nn.fractional_avg_pool(x, [1.0, 0.5, 1.5, 1.0])
    with pytest.raises(Exception, match="leaves no output"):
        tf.nn.fractional_max_pool(x, [1.0, 8.0, 1.5, 1.0])
