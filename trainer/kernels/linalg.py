"""Kernels of the linalg ops (schemas/ops/linalg.py), batched over the leading axes with NumPy's
LAPACK routines, and the NumPy helper kernels of the SVD, eigendecomposition and matrix
exponential gradients. Bad input (a matrix that is not positive definite, a singular triangle)
fails the run with TensorFlow's InvalidArgumentError and message."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from trainer.errors import InvalidArgumentError

D = "flowstack"


def _adjoint(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


@kernel("Cholesky", domain=D)
def cholesky(x, *, xp):
    lower = np.tril(x)
    hermitian = lower + _adjoint(np.tril(x, -1))  # LAPACK's potrf reads only the lower triangle
    try:
        return xp.asarray(np.linalg.cholesky(hermitian))
    except np.linalg.LinAlgError as e:
        raise InvalidArgumentError("Cholesky decomposition was not successful. The input might not be valid.") from e


@kernel("MatrixTriangularSolve", domain=D)
def matrix_triangular_solve(matrix, rhs, *, xp, lower, adjoint):
    tri = np.tril(matrix) if lower else np.triu(matrix)
    if adjoint:
        tri = _adjoint(tri)
    diagonal = np.diagonal(tri, axis1=-2, axis2=-1)
    if diagonal.size and np.any(diagonal == 0):
        raise InvalidArgumentError("MatrixTriangularSolve: Input matrix is not invertible (a zero on its diagonal)")
    return xp.asarray(np.linalg.solve(tri, rhs).astype(np.result_type(matrix, rhs)))


@kernel("MatrixSolveLs", domain=D)
def matrix_solve_ls(matrix, rhs, *, xp):
    batch = np.broadcast_shapes(matrix.shape[:-2], rhs.shape[:-2])
    a = np.broadcast_to(matrix, batch + matrix.shape[-2:]).reshape((-1,) + matrix.shape[-2:])
    b = np.broadcast_to(rhs, batch + rhs.shape[-2:]).reshape((-1,) + rhs.shape[-2:])
    out = [np.linalg.lstsq(ai, bi, rcond=None)[0] for ai, bi in zip(a, b)]
    shape = batch + (matrix.shape[-1], rhs.shape[-1])
    return xp.asarray(np.asarray(out, matrix.dtype).reshape(shape))


@kernel("LogMatrixDeterminant", domain=D)
def log_matrix_determinant(x, *, xp):
    sign, logdet = np.linalg.slogdet(x)
    return xp.asarray(sign.astype(x.dtype)), xp.asarray(logdet.astype(x.dtype))


@kernel("Svd", domain=D)
def svd(x, *, xp, compute_uv, full_matrices):
    if not compute_uv:
        s = np.linalg.svd(x, compute_uv=False)
        empty = np.zeros((0,), x.dtype)
        return xp.asarray(s), xp.asarray(empty), xp.asarray(empty)
    u, s, vh = np.linalg.svd(x, full_matrices=bool(full_matrices))
    return xp.asarray(s), xp.asarray(u), xp.asarray(_adjoint(vh))


def _svd_input_grad(u, s, v, gs, gu, gv):
    """Real A = U diag(s) V^T with M >= N (reduced): dL/dA (Townsend, "Differentiating the SVD")."""
    ut, vt = np.swapaxes(u, -1, -2), np.swapaxes(v, -1, -2)
    s2 = s * s
    with np.errstate(divide="ignore"):
        f = s2[..., None, :] - s2[..., :, None]  # f[i, j] = s_j^2 - s_i^2
        f = np.where(np.eye(s.shape[-1], dtype=bool), 0.0, 1.0 / np.where(f == 0, np.inf, f))
    middle = np.zeros(s.shape + s.shape[-1:], s.dtype)
    middle += np.eye(s.shape[-1]) * gs[..., None, :]
    uu = ut @ gu
    vv = vt @ gv
    middle += (f * (uu - np.swapaxes(uu, -1, -2))) * s[..., None, :]
    middle += s[..., :, None] * (f * (vv - np.swapaxes(vv, -1, -2)))
    grad = u @ middle @ vt
    # The parts of gu and gv outside the spans of U and V.
    inv_s = 1.0 / s
    grad += (gu - u @ uu) * inv_s[..., None, :] @ vt
    grad += u @ (np.swapaxes(gv - v @ vv, -1, -2) * inv_s[..., :, None])
    return grad


@kernel("SvdGrad", domain=D)
def svd_grad(a, s, u, v, gs, gu, gv, *, xp, compute_uv, full_matrices):
    m, n = a.shape[-2:]
    if full_matrices and compute_uv and m != n:
        raise InvalidArgumentError("SvdGrad: the gradient of svd with full_matrices=True is implemented for "
                                   f"square matrices only, got {m} x {n}")
    if not compute_uv:  # only s has a gradient: any consistent U and V serve
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        v = np.swapaxes(vh, -1, -2)
        gu, gv = np.zeros_like(u), np.zeros_like(v)
    u, s, v, gs, gu, gv = (np.asarray(t, np.float64) for t in (u, s, v, gs, gu, gv))
    if m < n:  # differentiate A^T = V S U^T instead
        u, v, gu, gv = v, u, gv, gu
    grad = _svd_input_grad(u, s, v, gs, gu, gv)
    if m < n:
        grad = np.swapaxes(grad, -1, -2)
    return xp.asarray(grad.astype(a.dtype))


@kernel("SelfAdjointEigV2", domain=D)
def self_adjoint_eig(x, *, xp, compute_v):
    e, v = np.linalg.eigh(x, UPLO="L")
    return xp.asarray(e.astype(np.finfo(x.dtype).dtype)), xp.asarray(v if compute_v else np.zeros((0,), x.dtype))


@kernel("SelfAdjointEigV2Grad", domain=D)
def self_adjoint_eig_grad(e, v, ge, gv, *, xp):
    """TensorFlow's rule: V (diag(ge) + F o (V^H gv)) V^H, folded onto the lower triangle the op reads."""
    with np.errstate(divide="ignore"):
        diff = e[..., None, :] - e[..., :, None]  # f[i, j] = 1 / (e_j - e_i), 0 on the diagonal
        f = np.where(np.eye(e.shape[-1], dtype=bool), 0.0, 1.0 / np.where(diff == 0, np.inf, diff))
    inner = np.eye(e.shape[-1]) * ge[..., None, :] + f * (_adjoint(v) @ gv)
    grad = v @ inner @ _adjoint(v)
    grad = np.tril(grad + _adjoint(grad))
    diagonal = np.einsum("...ii->...i", grad)
    diagonal *= 0.5
    return xp.asarray(grad.astype(v.dtype))


@kernel("Lu", domain=D)
def lu(x, *, xp, output_idx_type):
    """Doolittle elimination with partial pivoting (the largest |pivot|, as LAPACK's getrf)."""
    n = x.shape[-1]
    a = np.array(x, copy=True).reshape((-1, n, n))
    perm = np.tile(np.arange(n), (a.shape[0], 1))
    rows = np.arange(a.shape[0])
    for k in range(n):
        pivot = k + np.argmax(np.abs(a[:, k:, k]), axis=1)
        a[rows, k], a[rows, pivot] = a[rows, pivot].copy(), a[rows, k].copy()
        perm[rows, k], perm[rows, pivot] = perm[rows, pivot].copy(), perm[rows, k].copy()
        head = a[:, k, k]
        if np.any(head == 0):
            raise InvalidArgumentError("Lu: Input is not invertible.")
        a[:, k + 1:, k] /= head[:, None]
        a[:, k + 1:, k + 1:] -= a[:, k + 1:, k, None] * a[:, k, None, k + 1:]
    index = np.int64 if output_idx_type == 7 else np.int32
    return xp.asarray(a.reshape(x.shape)), xp.asarray(perm.reshape(x.shape[:-1]).astype(index))


def _diagonal_view(x: np.ndarray) -> np.ndarray:
    return np.einsum("...ii->...i", x[..., : min(x.shape[-2:]), : min(x.shape[-2:])])


@kernel("MatrixSetDiag", domain=D)
def matrix_set_diag(x, diagonal, *, xp):
    out = np.array(x, copy=True)
    p = min(x.shape[-2:])
    if diagonal.shape != x.shape[:-2] + (p,):
        raise InvalidArgumentError(f"MatrixSetDiag: diagonal must have shape {x.shape[:-2] + (p,)} for input "
                                   f"{x.shape}, got {diagonal.shape}")
    _diagonal_view(out)[...] = diagonal
    return xp.asarray(out)


@kernel("MatrixDiagPart", domain=D)
def matrix_diag_part(x, *, xp):
    return xp.asarray(np.ascontiguousarray(_diagonal_view(x)))


# [13/13] Pade coefficients and the 1-norm bound below which it is exact to double rounding (Higham 2005).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _expm(a: np.ndarray) -> np.ndarray:
    """exp(a) of each matrix: scale by 2^-s into the Pade region, approximate, square s times."""
    norm = np.max(np.sum(np.abs(a), axis=-2), axis=-1) if a.size else np.zeros(a.shape[:-2])
    with np.errstate(divide="ignore"):
        squarings = np.maximum(0, np.ceil(np.log2(np.maximum(norm, 1e-300) / _THETA13))).astype(int)
    a = a / (2.0 ** squarings)[..., None, None]
    eye = np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    b = _PADE13
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    flat, counts = r.reshape((-1,) + r.shape[-2:]), squarings.reshape(-1)
    for i, count in enumerate(counts):
        for _ in range(int(count)):
            flat[i] = flat[i] @ flat[i]
    return flat.reshape(r.shape)


@kernel("MatrixExponential", domain=D)
def matrix_exponential(x, *, xp):
    return xp.asarray(_expm(np.asarray(x, np.result_type(x, np.float64))).astype(x.dtype))


@kernel("MatrixExponentialGrad", domain=D)
def matrix_exponential_grad(x, g, *, xp):
    """d<G, exp(A)>/dA = the top-right block of exp([[A^H, G], [0, A^H]]) (Najfeld and Havel)."""
    n = x.shape[-1]
    ah = _adjoint(np.asarray(x, np.result_type(x, np.float64)))
    block = np.zeros(x.shape[:-2] + (2 * n, 2 * n), ah.dtype)
    block[..., :n, :n] = ah
    block[..., n:, n:] = ah
    block[..., :n, n:] = g
    return xp.asarray(_expm(block)[..., :n, n:].astype(x.dtype))


def _gtsv(diagonals: np.ndarray, rhs: np.ndarray, pivoting: bool) -> np.ndarray:
    """Tridiagonal solves batched over leading axes: LAPACK gtsv's elimination, swapping rows where
    the subdiagonal entry is the larger pivot (never without ``pivoting``, which is Thomas' algorithm)."""
    du = np.array(diagonals[..., 0, :-1], np.result_type(diagonals, rhs))
    d = np.array(diagonals[..., 1, :], du.dtype)
    dl = np.array(diagonals[..., 2, 1:], du.dtype)
    b = np.array(np.broadcast_to(rhs, d.shape[:-1] + rhs.shape[-2:]), du.dtype)
    n = d.shape[-1]
    fill = np.zeros_like(dl)  # the second superdiagonal that row swaps create
    for i in range(n - 1):
        swap = (np.abs(d[..., i]) < np.abs(dl[..., i])) if pivoting else np.zeros(d.shape[:-1], bool)
        keep = ~swap
        if np.any(keep & (d[..., i] == 0)):
            raise InvalidArgumentError("TridiagonalSolve: The matrix is not invertible (a zero pivot)")
        with np.errstate(divide="ignore", invalid="ignore"):
            fact = np.where(swap, d[..., i] / dl[..., i], dl[..., i] / d[..., i])
        bi, bn = b[..., i, :].copy(), b[..., i + 1, :].copy()
        di1, dui = d[..., i + 1].copy(), du[..., i].copy()
        next_du = du[..., i + 1].copy() if i < n - 2 else np.zeros_like(dui)
        # no swap: eliminate row i + 1 with row i
        d_keep = di1 - fact * dui
        b_keep = bn - fact[..., None] * bi
        # swap: row i + 1 becomes the pivot row
        d[..., i] = np.where(swap, dl[..., i], d[..., i])
        d[..., i + 1] = np.where(swap, dui - fact * di1, d_keep)
        if i < n - 2:
            fill[..., i] = np.where(swap, next_du, 0.0)
            du[..., i + 1] = np.where(swap, -fact * next_du, next_du)
        du[..., i] = np.where(swap, di1, dui)
        b[..., i, :] = np.where(swap[..., None], bn, bi)
        b[..., i + 1, :] = np.where(swap[..., None], bi - fact[..., None] * bn, b_keep)
    if np.any(d[..., n - 1] == 0):
        raise InvalidArgumentError("TridiagonalSolve: The matrix is not invertible (a zero pivot)")
    b[..., n - 1, :] /= d[..., n - 1, None]
    if n > 1:
        b[..., n - 2, :] = (b[..., n - 2, :] - du[..., n - 2, None] * b[..., n - 1, :]) / d[..., n - 2, None]
    for i in range(n - 3, -1, -1):
        b[..., i, :] = (b[..., i, :] - du[..., i, None] * b[..., i + 1, :] - fill[..., i, None] * b[..., i + 2, :]) \
            / d[..., i, None]
    return b


@kernel("TridiagonalSolve", domain=D)
def tridiagonal_solve(diagonals, rhs, *, xp, partial_pivoting):
    if rhs.shape[-2] == 0:
        return xp.asarray(np.array(rhs))
    return xp.asarray(_gtsv(np.asarray(diagonals), np.asarray(rhs), bool(partial_pivoting)).astype(rhs.dtype))


def _transposed_diagonals(diagonals: np.ndarray) -> np.ndarray:
    """The compact diagonals of A^T: the superdiagonal becomes the subdiagonal shifted by one, and back."""
    out = np.zeros_like(diagonals)
    out[..., 0, :-1] = diagonals[..., 2, 1:]
    out[..., 1, :] = diagonals[..., 1, :]
    out[..., 2, 1:] = diagonals[..., 0, :-1]
    return out


@kernel("TridiagonalSolveGrad", domain=D)
def tridiagonal_solve_grad(diagonals, x, grad, *, xp, partial_pivoting):
    grad_rhs = _gtsv(_transposed_diagonals(np.asarray(diagonals)), np.asarray(grad), bool(partial_pivoting))
    grad_diagonals = np.zeros(np.broadcast_shapes(diagonals.shape, grad_rhs.shape[:-2] + (3, x.shape[-2])),
                              diagonals.dtype)
    grad_diagonals[..., 0, :-1] = -np.sum(grad_rhs[..., :-1, :] * x[..., 1:, :], axis=-1)
    grad_diagonals[..., 1, :] = -np.sum(grad_rhs * x, axis=-1)
    grad_diagonals[..., 2, 1:] = -np.sum(grad_rhs[..., 1:, :] * x[..., :-1, :], axis=-1)
    return xp.asarray(grad_diagonals), xp.asarray(grad_rhs.astype(grad.dtype))
