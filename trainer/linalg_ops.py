"""TensorFlow 1.15's linear algebra beyond the basics: Cholesky, triangular and least-squares
solves, SVD, symmetric eigendecomposition, LU, log-determinants, the matrix exponential, cross
products and diagonals, batched over the leading axes as TensorFlow does.

Decompositions are graph ops (schemas/ops/linalg.py, with TensorFlow's gradients); what TensorFlow
composes in Python (cholesky_solve, lstsq's fast path, logdet, matvec, cross, normalize) is
composed here the same way. ``__all__`` holds the names TensorFlow has at ``tf.*``; the rest exist
only under ``tf.linalg`` (trainer/tf_linalg.py imports them).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from trainer import array_ops as A
from trainer import ops
from trainer.dtypes import as_numpy_dtype
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import constant, convert_to_tensor, make_op
from trainer.special_math import conj

__all__ = ["cholesky", "cross", "matrix_set_diag", "matrix_triangular_solve", "self_adjoint_eig", "svd"]

LuResult = namedtuple("Lu", ["lu", "p"])
SlogdetResult = namedtuple("LogMatrixDeterminant", ["sign", "log_abs_determinant"])


def _op(op_type: str, inputs, name=None, attrs=None, n: int | None = None):
    node = make_op(op_type, inputs, attrs or {}, domain=TRAINER_DOMAIN, name=name, num_outputs=n)
    return node.outputs if n else node.outputs[0]


def cholesky(input, name=None) -> Tensor:  # noqa: A002
    """The lower Cholesky factor L (input = L @ adjoint(L)) of each matrix; reads the lower triangle."""
    return _op("Cholesky", [input], name)


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None) -> Tensor:
    """x with matrix @ x = rhs for a lower (or upper) triangular matrix; adjoint solves with its adjoint."""
    matrix, rhs = convert_to_tensor(matrix), convert_to_tensor(rhs)
    return _op("MatrixTriangularSolve", [matrix, rhs], name, {"lower": int(bool(lower)), "adjoint": int(bool(adjoint))})


triangular_solve = matrix_triangular_solve


def cholesky_solve(chol, rhs, name=None) -> Tensor:
    """x with A @ x = rhs, given A's Cholesky factor ``chol`` (two triangular solves, as TensorFlow)."""
    y = matrix_triangular_solve(chol, rhs, lower=True, adjoint=False)
    return matrix_triangular_solve(chol, y, lower=True, adjoint=True, name=name)


def _static_dims(x: Tensor, what: str) -> tuple[int, int]:
    if x.shape is None or len(x.shape) < 2 or None in x.shape[-2:]:
        raise ValueError(f"{what}: matrix needs static row and column counts, got shape {x.shape}")
    return x.shape[-2], x.shape[-1]


def _eye(n: int, dtype, graph) -> Tensor:
    return constant(np.eye(n, dtype=dtype), graph=graph)


def lstsq(matrix, rhs, l2_regularizer=0.0, fast=True, name=None) -> Tensor:
    """Least-squares solutions of matrix @ x = rhs (``tf.linalg.lstsq``, ``matrix_solve_ls``).

    fast: the regularized normal equations through a Cholesky factorization, differentiable (as
    TensorFlow); otherwise the minimum-norm solution by a complete orthogonal decomposition, which
    like TensorFlow's takes no l2_regularizer and has no gradient.
    """
    matrix, rhs = convert_to_tensor(matrix), convert_to_tensor(rhs, dtype=None)
    if not fast:
        if l2_regularizer not in (0, 0.0, None):
            raise ValueError("lstsq: l2_regularizer must be 0 when fast=False")
        return _op("MatrixSolveLs", [matrix, rhs], name)
    m, n = _static_dims(matrix, "lstsq")
    g = matrix.graph
    l2 = ops.cast(convert_to_tensor(l2_regularizer, graph=g), matrix.dtype)
    if m >= n:
        gramian = A.matmul(matrix, matrix, adjoint_a=True) + l2 * _eye(n, matrix.dtype, g)
        return cholesky_solve(cholesky(gramian), A.matmul(matrix, rhs, adjoint_a=True), name=name)
    gramian = A.matmul(matrix, matrix, adjoint_b=True) + l2 * _eye(m, matrix.dtype, g)
    return A.matmul(matrix, cholesky_solve(cholesky(gramian), rhs), adjoint_a=True, name=name)


def lu(input, output_idx_type=np.int32, name=None) -> LuResult:  # noqa: A002
    """(lu, p): L (unit diagonal, below) and U (on and above) packed in lu, with L @ U = input[..., p, :]."""
    index = as_numpy_dtype(output_idx_type)
    if index not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"lu: output_idx_type must be int32 or int64, got {index}")
    out = _op("Lu", [input], name, {"output_idx_type": 7 if index == np.int64 else 6}, n=2)
    return LuResult(*out)


def slogdet(input, name=None) -> SlogdetResult:  # noqa: A002
    """(sign, log|det|) of each square matrix, finite where det itself would overflow."""
    return SlogdetResult(*_op("LogMatrixDeterminant", [input], name, n=2))


def logdet(matrix, name=None) -> Tensor:
    """log(det(matrix)) of Hermitian positive-definite matrices: 2 * sum(log(diag(cholesky)))."""
    chol = cholesky(matrix)
    diagonal = _op("MatrixDiagPart", [chol])
    return ops.multiply(2.0, A.reduce_sum(ops.log(diagonal), axis=[-1]), name=name)


def eigh(tensor, name=None) -> tuple[Tensor, Tensor]:
    """(e, v): eigenvalues ascending and eigenvectors (columns) of each self-adjoint matrix (lower triangle read)."""
    e, v = _op("SelfAdjointEigV2", [tensor], name, {"compute_v": 1}, n=2)
    return e, v


def eigvalsh(tensor, name=None) -> Tensor:
    """The eigenvalues, ascending, of each self-adjoint matrix."""
    return _op("SelfAdjointEigV2", [tensor], name, {"compute_v": 0}, n=2)[0]


self_adjoint_eig = eigh
self_adjoint_eigvals = eigvalsh


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """s, or (s, u, v) with tensor = u @ diag(s) @ adjoint(v): TensorFlow's order, v not transposed."""
    s, u, v = _op("Svd", [tensor], name, {"compute_uv": int(bool(compute_uv)),
                                           "full_matrices": int(bool(full_matrices))}, n=3)
    return (s, u, v) if compute_uv else s


def adjoint(matrix, name=None) -> Tensor:
    """The conjugate transpose of the last two axes."""
    return conj(A.matrix_transpose(matrix), name=name)


def matvec(a, b, transpose_a=False, adjoint_a=False, a_is_sparse=False, b_is_sparse=False, name=None) -> Tensor:
    """a @ b for matrices a [..., M, N] and vectors b [..., N]."""
    b = convert_to_tensor(b)
    product = A.matmul(a, A.expand_dims(b, -1), transpose_a=transpose_a, adjoint_a=adjoint_a,
                       a_is_sparse=a_is_sparse, b_is_sparse=b_is_sparse)
    return A.squeeze(product, axis=-1, name=name)


def matrix_set_diag(input, diagonal, name="set_diag", k=0) -> Tensor:  # noqa: A002
    """input with the main diagonal of each matrix replaced (k = 0, the only band TensorFlow 1.15 sets)."""
    if k != 0:
        raise ValueError(f"matrix_set_diag: only the main diagonal (k=0) can be set, got k={k}")
    x = convert_to_tensor(input)
    return _op("MatrixSetDiag", [x, convert_to_tensor(diagonal, dtype=x.dtype, graph=x.graph)], name)


set_diag = matrix_set_diag


def tensor_diag(diagonal, name=None) -> Tensor:
    """The rank-2k tensor with ``diagonal`` (rank k, static shape) on its diagonal: out[i, j] = d[i] if i == j."""
    d = convert_to_tensor(diagonal)
    if d.shape is None or None in d.shape:
        raise ValueError(f"tensor_diag: diagonal needs a static shape, got {d.shape}")
    n = int(np.prod(d.shape))
    flat = A.matrix_diag(ops.reshape(d, [n]))
    return ops.reshape(flat, list(d.shape) * 2, name=name)


def tensor_diag_part(input, name=None) -> Tensor:  # noqa: A002
    """The diagonal of a rank-2k tensor of shape s + s (static): out[i] = input[i, i]."""
    x = convert_to_tensor(input)
    if x.shape is None or None in x.shape or len(x.shape) % 2 or x.shape[: len(x.shape) // 2] != \
            x.shape[len(x.shape) // 2:]:
        raise ValueError(f"tensor_diag_part: input must have a static shape s + s, got {x.shape}")
    half = x.shape[: len(x.shape) // 2]
    n = int(np.prod(half))
    return ops.reshape(_op("MatrixDiagPart", [ops.reshape(x, [n, n])]), list(half), name=name)


def cross(a, b, name=None) -> Tensor:
    """The cross product of 3-vectors along the last axis, with broadcasting."""
    a, b = convert_to_tensor(a), convert_to_tensor(b)
    for what, t in (("a", a), ("b", b)):
        if t.shape is not None and (not t.shape or t.shape[-1] not in (None, 3)):
            raise ValueError(f"cross: {what} must have a last axis of size 3, got shape {t.shape}")
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    return A.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1, name=name)


def normalize(tensor, ord="euclidean", axis=None, name=None):  # noqa: A002
    """(tensor / norm, norm), the norm kept with its reduced axes for broadcasting."""
    x = convert_to_tensor(tensor)
    norm = A.norm(x, ord=ord, axis=axis, keepdims=True)
    return ops.divide(x, norm, name=name), norm


def expm(input, name=None) -> Tensor:  # noqa: A002
    """The matrix exponential of each square matrix (scaling and squaring, [13/13] Pade)."""
    return _op("MatrixExponential", [input], name)


def _compact_diagonals(diagonals, diagonals_format: str, what: str) -> Tensor:
    """[..., 3, M] (superdiagonal, diagonal, subdiagonal) from TensorFlow's three formats."""
    if diagonals_format == "compact":
        return convert_to_tensor(diagonals)
    if diagonals_format == "sequence":
        if not isinstance(diagonals, (list, tuple)) or len(diagonals) != 3:
            raise ValueError(f"{what}: Expected diagonals to be a sequence of length 3.")
        parts = [convert_to_tensor(t) for t in diagonals]
        return A.stack(parts, axis=-2)
    if diagonals_format == "matrix":
        m = convert_to_tensor(diagonals)
        rows, cols = _static_dims(m, what)
        if rows != cols:
            raise ValueError(f"{what}: Expected last two dimensions of diagonals to be same, got {rows} and {cols}")
        main = _op("MatrixDiagPart", [m])
        upper = _op("MatrixDiagPart", [m[..., :-1, 1:]])
        lower = _op("MatrixDiagPart", [m[..., 1:, :-1]])
        zero = A.zeros_like(main[..., :1])
        return A.stack([ops.concat([upper, zero], -1), main, ops.concat([zero, lower], -1)], axis=-2)
    raise ValueError(f"{what}: Unrecognized diagonals_format: {diagonals_format}")


def tridiagonal_solve(diagonals, rhs, diagonals_format="compact", transpose_rhs=False, conjugate_rhs=False,
                      name=None, partial_pivoting=True) -> Tensor:
    """x with A @ x = rhs for tridiagonal A ('compact' [..., 3, M], 'sequence' or 'matrix' diagonals);
    rhs [..., M, K] or [..., M]; LAPACK's elimination with partial pivoting (Thomas' without)."""
    d = _compact_diagonals(diagonals, diagonals_format, "tridiagonal_solve")
    b = convert_to_tensor(rhs)
    vector = b.shape is not None and len(b.shape) == len(d.shape) - 1
    if vector:
        b = A.expand_dims(b, -1)
    elif transpose_rhs:
        b = A.matrix_transpose(b)
    if conjugate_rhs:
        b = conj(b)
    x = _op("TridiagonalSolve", [d, b], None, {"partial_pivoting": int(bool(partial_pivoting))})
    return A.squeeze(x, axis=-1, name=name) if vector else ops.identity(x, name=name)


def tridiagonal_matmul(diagonals, rhs, diagonals_format="compact", name=None) -> Tensor:
    """A @ rhs for tridiagonal A given by its diagonals, rhs [..., M, N] (composed, so differentiable)."""
    d = _compact_diagonals(diagonals, diagonals_format, "tridiagonal_matmul")
    b = convert_to_tensor(rhs)
    zero_row = A.zeros_like(b[..., :1, :])
    below = ops.concat([b[..., 1:, :], zero_row], -2)  # row i + 1 of rhs, for the superdiagonal
    above = ops.concat([zero_row, b[..., :-1, :]], -2)  # row i - 1, for the subdiagonal
    column = [A.expand_dims(d[..., k, :], -1) for k in range(3)]
    return ops.add_n([column[0] * below, column[1] * b, column[2] * above], name=name)
