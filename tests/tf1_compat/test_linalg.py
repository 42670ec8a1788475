"""tf.linalg's decompositions and solvers (trainer/linalg_ops.py) against NumPy/SciPy, batched;
their gradients against finite differences; their errors for bad input; and a TF1-style
Gaussian-process script built on them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import trainer as tf
from tests.trainer.gradient_check import central_difference

R = np.random.default_rng(5)


def spd(*batch, n=4):
    a = R.normal(size=(*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def run(t, feed=None):
    return tf.Session().run(t, feed)


def check_gradient(build, *values, rtol=1e-6, atol=1e-8):
    """d(sum(build(*xs) * w))/dx for each x against central differences (float64 placeholders)."""
    phs = [tf.placeholder(tf.float64, np.shape(v)) for v in values]
    out = build(*phs)
    w = tf.constant(R.uniform(0.5, 1.5, size=out.shape))
    loss = tf.reduce_sum(out * w)
    sess = tf.Session()
    feed = dict(zip(phs, values))
    grads = sess.run(tf.gradients(loss, phs), feed)
    for i, (ph, v) in enumerate(zip(phs, values)):
        want = central_difference(lambda x: sess.run(loss, {**feed, ph: x}), v)
        np.testing.assert_allclose(grads[i], want, rtol=rtol, atol=atol, err_msg=f"input {i}")


# -- values -----------------------------------------------------------------------------------------
def test_cholesky_and_cholesky_solve_batched():
    a, b = spd(2, 3), R.normal(size=(2, 3, 4, 2))
    chol = tf.cholesky(a)
    assert chol.shape == (2, 3, 4, 4)
    got_l, got_x = run([chol, tf.linalg.cholesky_solve(chol, b)])
    np.testing.assert_allclose(got_l, np.linalg.cholesky(a), rtol=1e-12)
    np.testing.assert_allclose(got_x, np.linalg.solve(a, b), rtol=1e-10)
    # Only the lower triangle is read, as in TensorFlow.
    np.testing.assert_allclose(run(tf.cholesky(np.tril(a))), got_l, rtol=1e-12)


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("adjoint", [True, False])
def test_triangular_solve_reads_one_triangle(lower, adjoint):
    m = R.normal(size=(3, 4, 4)) + 4 * np.eye(4)
    rhs = R.normal(size=(3, 4, 2))
    got = run(tf.linalg.triangular_solve(m, rhs, lower=lower, adjoint=adjoint))
    tri = np.tril(m) if lower else np.triu(m)
    for i in range(3):
        want = sla.solve_triangular(tri[i], rhs[i], lower=lower, trans="T" if adjoint else "N")
        np.testing.assert_allclose(got[i], want, rtol=1e-10)
    assert tf.matrix_triangular_solve is tf.linalg.triangular_solve


def test_lstsq_fast_and_minimum_norm():
    over, rhs = R.normal(size=(2, 6, 3)), R.normal(size=(2, 6, 2))
    got = run(tf.linalg.lstsq(over, rhs))
    np.testing.assert_allclose(got, [np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(over, rhs)], rtol=1e-9)
    lam = 0.5
    ridge = [np.linalg.solve(a.T @ a + lam * np.eye(3), a.T @ b) for a, b in zip(over, rhs)]
    np.testing.assert_allclose(run(tf.linalg.lstsq(over, rhs, l2_regularizer=lam)), ridge, rtol=1e-10)
    under, urhs = R.normal(size=(3, 5)), R.normal(size=(3, 1))
    want = np.linalg.lstsq(under, urhs, rcond=None)[0]  # minimum norm
    np.testing.assert_allclose(run(tf.linalg.lstsq(under, urhs)), want, rtol=1e-9)
    np.testing.assert_allclose(run(tf.linalg.lstsq(under, urhs, fast=False)), want, rtol=1e-9)


def test_lu_reconstructs_the_row_permuted_input():
    x = R.normal(size=(3, 5, 5))
    packed, perm = run(tf.linalg.lu(x))
    assert perm.dtype == np.int32 and run(tf.linalg.lu(x, output_idx_type=tf.int64).p).dtype == np.int64
    for i in range(3):
        lower = np.tril(packed[i], -1) + np.eye(5)
        np.testing.assert_allclose(lower @ np.triu(packed[i]), x[i][perm[i]], atol=1e-12)
        _, l_ref, u_ref = sla.lu(x[i])  # LAPACK's partial pivoting picks the same pivots
        np.testing.assert_allclose(np.triu(packed[i]), u_ref, atol=1e-12)


def test_determinants_in_log_space():
    x = R.normal(size=(4, 3, 3)) * 100.0
    sign, logabs = run(tf.linalg.slogdet(x))
    want_sign, want_log = np.linalg.slogdet(x)
    np.testing.assert_allclose(sign, want_sign)
    np.testing.assert_allclose(logabs, want_log, rtol=1e-12)
    a = spd(2)
    np.testing.assert_allclose(run(tf.linalg.logdet(a)), np.linalg.slogdet(a)[1], rtol=1e-12)


def test_eigh_and_svd_in_tensorflows_conventions():
    a = spd(2, n=5)
    e, v = run(tf.self_adjoint_eig(a))
    np.testing.assert_allclose(e, np.linalg.eigvalsh(a), rtol=1e-12)
    np.testing.assert_allclose(v @ (e[..., None] * np.swapaxes(v, -1, -2)), a, atol=1e-10)
    np.testing.assert_allclose(run(tf.linalg.eigvalsh(a)), e, rtol=1e-12)
    x = R.normal(size=(2, 5, 3))
    s, u, v = run(tf.svd(x))  # TensorFlow's order: s first, v not transposed
    assert u.shape == (2, 5, 3) and v.shape == (2, 3, 3)
    np.testing.assert_allclose(s, np.linalg.svd(x, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose(u @ (s[..., None] * np.swapaxes(v, -1, -2)), x, atol=1e-12)
    s_full, u_full, v_full = run(tf.linalg.svd(x, full_matrices=True))
    assert u_full.shape == (2, 5, 5) and v_full.shape == (2, 3, 3)
    assert tf.svd(tf.placeholder(tf.float32, [None, 7, 4]), compute_uv=False).shape == (None, 4)


def test_diagonals_cross_matvec_normalize_adjoint():
    x = R.normal(size=(2, 3, 4))
    got = run(tf.matrix_set_diag(x, np.ones((2, 3))))
    want = x.copy()
    want[:, range(3), range(3)] = 1.0
    np.testing.assert_array_equal(got, want)
    d = np.array([[1.0, 2.0], [3.0, 4.0]])
    full = run(tf.linalg.tensor_diag(d))
    assert full.shape == (2, 2, 2, 2) and full[1, 0, 1, 0] == 3.0 and full[0, 1, 1, 0] == 0.0
    np.testing.assert_array_equal(run(tf.linalg.tensor_diag_part(full)), d)
    a, b = R.normal(size=(4, 3)), R.normal(size=(1, 3))
    np.testing.assert_allclose(run(tf.cross(a, b)), np.cross(a, b), rtol=1e-12)
    m, v = R.normal(size=(2, 3, 4)), R.normal(size=(2, 4))
    np.testing.assert_allclose(run(tf.linalg.matvec(m, v)), np.einsum("bij,bj->bi", m, v), rtol=1e-12)
    unit, norm = run(tf.linalg.normalize(v, axis=1))
    np.testing.assert_allclose(norm, np.linalg.norm(v, axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(unit, v / norm, rtol=1e-12)
    np.testing.assert_array_equal(run(tf.linalg.adjoint(m)), np.swapaxes(m, -1, -2))


def test_expm_matches_scipy_including_large_norms():
    x = R.normal(size=(3, 4, 4)) * np.array([0.01, 1.0, 8.0])[:, None, None]
    got = run(tf.linalg.expm(x))
    np.testing.assert_allclose(got, [sla.expm(m) for m in x], rtol=1e-10)


def _dense_tridiagonal(d):
    m = d.shape[-1]
    out = np.zeros(d.shape[:-2] + (m, m))
    i = np.arange(m)
    out[..., i, i] = d[..., 1, :]
    out[..., i[:-1], i[:-1] + 1] = d[..., 0, :-1]
    out[..., i[1:], i[1:] - 1] = d[..., 2, 1:]
    return out


def test_tridiagonal_solve_and_matmul_in_all_three_formats():
    d = R.normal(size=(2, 3, 6))
    d[:, 1, 2] = 1e-9  # a tiny pivot: right only with row swaps (partial pivoting, the default)
    a, b = _dense_tridiagonal(d), R.normal(size=(2, 6, 3))
    want = np.linalg.solve(a, b)
    got = run([tf.linalg.tridiagonal_solve(d, b),
               tf.linalg.tridiagonal_solve(a, b, diagonals_format="matrix"),
               tf.linalg.tridiagonal_solve((d[:, 0], d[:, 1], d[:, 2]), b[..., 0], diagonals_format="sequence"),
               tf.linalg.tridiagonal_solve(d, np.swapaxes(b, -1, -2), transpose_rhs=True),
               tf.linalg.tridiagonal_matmul(d, b)])
    for x in (got[0], got[1], got[3]):
        np.testing.assert_allclose(x, want, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got[2], want[..., 0], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(got[4], a @ b, rtol=1e-12)
    dominant = d.copy()
    dominant[:, 1, :] += 5.0
    np.testing.assert_allclose(run(tf.linalg.tridiagonal_solve(dominant, b, partial_pivoting=False)),
                               np.linalg.solve(_dense_tridiagonal(dominant), b), rtol=1e-10)


# -- gradients --------------------------------------------------------------------------------------
def test_gradients_of_composed_solvers():
    check_gradient(lambda a, b: tf.linalg.cholesky_solve(tf.cholesky(tf.matmul(a, a, transpose_b=True) + 3.0 *
                                                                      tf.eye(3, dtype=tf.float64)), b),
                   R.normal(size=(3, 3)), R.normal(size=(3, 2)))
    check_gradient(lambda a, b: tf.linalg.lstsq(a, b, l2_regularizer=0.1), R.normal(size=(5, 3)), R.normal(size=(5, 2)))
    check_gradient(lambda a, b: tf.linalg.lstsq(a, b), R.normal(size=(2, 4)), R.normal(size=(2, 1)))
    check_gradient(lambda a: tf.linalg.logdet(tf.matmul(a, a, transpose_b=True) + tf.eye(3, dtype=tf.float64)),
                   R.normal(size=(2, 3, 3)))
    check_gradient(tf.cross, R.normal(size=(2, 3)), R.normal(size=(2, 3)))


def test_gradients_of_decompositions_wide_and_symmetric():
    check_gradient(lambda x: tf.abs(tf.svd(x)[1]) + 0.0 * tf.reduce_sum(x), R.normal(size=(3, 3)))
    check_gradient(lambda x: tf.svd(x, compute_uv=False), R.normal(size=(2, 3, 5)))  # M < N
    check_gradient(lambda x: tf.abs(tf.svd(x)[2]), R.normal(size=(3, 5)))
    # Through a symmetric construction, the eigen and Cholesky gradients are TensorFlow's.
    check_gradient(lambda x: tf.linalg.eigvalsh(x + tf.matrix_transpose(x)), R.normal(size=(4, 4)))
    check_gradient(lambda x: tf.abs(tf.linalg.eigh(x + tf.matrix_transpose(x))[1]), R.normal(size=(3, 3)))
    check_gradient(lambda x: tf.cholesky(tf.matmul(x, x, transpose_b=True) + tf.eye(3, dtype=tf.float64)),
                   R.normal(size=(3, 3)))
    check_gradient(lambda x: tf.linalg.expm(x), R.normal(size=(3, 3)))
    check_gradient(lambda x: tf.linalg.tensor_diag_part(x), R.normal(size=(2, 3, 2, 3)))
    diagonals = R.normal(size=(3, 5)) + np.array([0.0, 4.0, 0.0])[:, None]
    check_gradient(lambda d, b: tf.linalg.tridiagonal_solve(d, b), diagonals, R.normal(size=(5, 2)))
    check_gradient(lambda d, b: tf.linalg.tridiagonal_matmul(d, b), diagonals, R.normal(size=(5, 2)))


# -- errors -----------------------------------------------------------------------------------------
def test_bad_inputs_name_the_op_and_argument():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Cholesky decomposition was not successful"):
        run(tf.cholesky(-np.eye(3)))
    with pytest.raises(ValueError, match="Cholesky.*input must be square"):
        tf.cholesky(tf.zeros([3, 4]))
    with pytest.raises(ValueError, match="Cholesky.*input must have rank >= 2"):
        tf.cholesky(tf.zeros([3]))
    with pytest.raises(ValueError, match="Cholesky.*input must be floating point"):
        tf.cholesky(tf.zeros([2, 2], tf.int32))
    with pytest.raises(ValueError, match="MatrixTriangularSolve.*disagree on the number of rows"):
        tf.matrix_triangular_solve(tf.eye(3), tf.zeros([4, 1]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="MatrixTriangularSolve: Input matrix is not invertible"):
        run(tf.matrix_triangular_solve(np.zeros((2, 2)), np.ones((2, 1))))
    with pytest.raises(ValueError, match="lstsq: l2_regularizer must be 0 when fast=False"):
        tf.linalg.lstsq(tf.eye(2), tf.ones([2, 1]), l2_regularizer=1.0, fast=False)
    with pytest.raises(ValueError, match="cross: a must have a last axis of size 3"):
        tf.cross(tf.zeros([2, 4]), tf.zeros([2, 3]))
    with pytest.raises(ValueError, match="MatrixSetDiag.*diagonal must have shape"):
        tf.matrix_set_diag(tf.zeros([3, 4]), tf.zeros([4]))
    with pytest.raises(ValueError, match="only the main diagonal"):
        tf.matrix_set_diag(tf.zeros([3, 3]), tf.zeros([3]), k=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="TridiagonalSolve: The matrix is not invertible"):
        run(tf.linalg.tridiagonal_solve(np.zeros((3, 4)), np.ones((4, 1))))
    with pytest.raises(ValueError, match="tridiagonal_solve: Unrecognized diagonals_format: banded"):
        tf.linalg.tridiagonal_solve(np.zeros((3, 4)), np.ones((4, 1)), diagonals_format="banded")
    with pytest.raises(ValueError, match="TridiagonalSolve.*diagonals must have shape \\[..., 3, M\\]"):
        tf.linalg.tridiagonal_solve(np.zeros((2, 4)), np.ones((4, 1)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Lu: Input is not invertible"):
        run(tf.linalg.lu(np.zeros((2, 2))))
    x = tf.placeholder(tf.float64, [4, 3])
    (g,) = tf.gradients(tf.reduce_sum(tf.svd(x, full_matrices=True)[1]), [x])
    with pytest.raises(tf.errors.InvalidArgumentError, match="full_matrices=True is implemented for square"):
        run(g, {x: R.normal(size=(4, 3))})
    with pytest.raises(LookupError, match="no gradient rule for op 'flowstack::MatrixSolveLs'"):
        tf.gradients(tf.reduce_sum(tf.linalg.lstsq(x, tf.ones([4, 1], tf.float64), fast=False)), [x])


# -- a TF1 script -----------------------------------------------------------------------------------
def test_a_tf1_script_fits_a_gaussian_process_by_marginal_likelihood():
    """GP regression the TF1 way: an RBF kernel, its Cholesky factor, cholesky_solve and the
    log-determinant in the negative log marginal likelihood, minimized over the log length scale."""
    rng = np.random.default_rng(2)
    xs = np.sort(rng.uniform(-3, 3, 40))
    ys = np.sin(xs) + 0.05 * rng.normal(size=40)
    x = tf.placeholder(tf.float64, [40], name="x")
    y = tf.placeholder(tf.float64, [None, 1], name="y")
    log_scale = tf.Variable(np.log(0.2), dtype=tf.float64, name="log_length_scale")
    sq = tf.square(tf.expand_dims(x, 1) - tf.expand_dims(x, 0))
    k = tf.exp(-0.5 * sq / tf.exp(2.0 * log_scale)) + 0.01 * tf.eye(40, dtype=tf.float64)
    chol = tf.cholesky(k)
    alpha = tf.linalg.cholesky_solve(chol, y)
    nll = 0.5 * tf.reduce_sum(y * alpha) + tf.reduce_sum(tf.log(tf.matrix_diag_part(chol)))
    train = tf.train.AdamOptimizer(0.05).minimize(nll)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        start = sess.run(nll, {x: xs, y: ys[:, None]})
        for _ in range(150):
            sess.run(train, {x: xs, y: ys[:, None]})
        end, scale, fit = sess.run([nll, tf.exp(log_scale), tf.matmul(k, alpha)], {x: xs, y: ys[:, None]})
    # Measured (seeded): nll -29.1 -> -70.1, length scale 0.2 -> 1.86, fit error 0.12; bars far from those.
    assert end < start - 20.0
    assert 0.6 < scale < 3.0
    assert np.max(np.abs(fit[:, 0] - np.sin(xs))) < 0.3
