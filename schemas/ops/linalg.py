"""Matrix decompositions and solvers over the last two axes (TensorFlow's linalg ops): Cholesky,
triangular and least-squares solves, SVD, symmetric eigendecomposition, LU, log-determinant,
the matrix exponential, setting a diagonal, and the helper kernels of their gradients."""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import broadcast_shapes
from schemas.registry import Attr, TensorType, op

D = "flowstack"


def _matrix(ctx, index: int, square: bool = False):
    """Input ``index``'s type, checked to be a float matrix (square when asked)."""
    x = ctx.input(index)
    name = ctx.schema.inputs[index].name
    if x.dtype is not None and x.dtype.kind not in "fc":
        raise ctx.fail(f"{name} must be floating point or complex, got {x.dtype}")
    if x.shape is not None:
        if len(x.shape) < 2:
            raise ctx.fail(f"{name} must have rank >= 2, got shape {x.shape}")
        m, n = x.shape[-2:]
        if square and m is not None and n is not None and m != n:
            raise ctx.fail(f"{name} must be square (batches of M x M matrices), got shape {x.shape}")
    return x


def _square(ctx):
    return [_matrix(ctx, 0, square=True)]


op("Cholesky", domain=D, inputs=["input"], outputs=["output"], differentiable=True,
   doc="The lower Cholesky factor of each Hermitian positive-definite matrix (reads the lower triangle).")(_square)
op("MatrixExponential", domain=D, inputs=["input"], outputs=["output"], differentiable=True,
   doc="exp(A) of each square matrix, by scaling and squaring with a [13/13] Pade approximant.")(_square)
op("MatrixExponentialGrad", domain=D, inputs=["input", "grad"], outputs=["output"],
   doc="The gradient of MatrixExponential: the top-right block of exp([[A^H, G], [0, A^H]]).")(_square)


def _solve_shape(ctx, matrix, rhs):
    if matrix.shape is None or rhs.shape is None:
        return None
    if len(rhs.shape) < 2:
        raise ctx.fail(f"rhs must have rank >= 2, got shape {rhs.shape}")
    if matrix.shape[-2] is not None and rhs.shape[-2] is not None and matrix.shape[-2] != rhs.shape[-2]:
        raise ctx.fail(f"matrix {matrix.shape} and rhs {rhs.shape} disagree on the number of rows")
    batch = broadcast_shapes(ctx, [matrix.shape[:-2], rhs.shape[:-2]])
    return None if batch is None else (*batch, matrix.shape[-1], rhs.shape[-1])


@op("MatrixTriangularSolve", domain=D, inputs=["matrix", "rhs"], outputs=["output"], differentiable=True,
    attrs={"lower": Attr("int", 1), "adjoint": Attr("int", 0)},
    doc="x with matrix @ x = rhs (adjoint(matrix) @ x with adjoint), reading only matrix's lower (or "
        "upper) triangle.")
def _triangular_solve(ctx):
    matrix, rhs = _matrix(ctx, 0, square=True), _matrix(ctx, 1)
    return [TensorType(matrix.dtype, _solve_shape(ctx, matrix, rhs))]


@op("MatrixSolveLs", domain=D, inputs=["matrix", "rhs"], outputs=["output"],
    doc="The minimum-norm least-squares solution of matrix @ x = rhs (TensorFlow's fast=False path).")
def _solve_ls(ctx):
    matrix, rhs = _matrix(ctx, 0), _matrix(ctx, 1)
    return [TensorType(matrix.dtype, _solve_shape(ctx, matrix, rhs))]


@op("LogMatrixDeterminant", domain=D, inputs=["input"], outputs=["sign", "log_abs_determinant"],
    differentiable=True, doc="sign(det(A)) and log(|det(A)|) of each square matrix, without overflow.")
def _slogdet(ctx):
    x = _matrix(ctx, 0, square=True)
    batch = None if x.shape is None else tuple(x.shape[:-2])
    return [TensorType(x.dtype, batch), TensorType(x.dtype, batch)]


def _svd_shapes(ctx, x, full: bool):
    if x.shape is None:
        return None, None, None
    *batch, m, n = x.shape
    p = None if m is None or n is None else min(m, n)
    return (*batch, p), (*batch, m, m if full else p), (*batch, n, n if full else p)


@op("Svd", domain=D, inputs=["input"], outputs=["s", "u", "v"], differentiable=True,
    attrs={"compute_uv": Attr("int", 1), "full_matrices": Attr("int", 0)},
    doc="input = u @ diag(s) @ adjoint(v) per matrix, s descending (TensorFlow's output order s, u, v); "
        "u and v are empty without compute_uv.")
def _svd(ctx):
    x = _matrix(ctx, 0)
    s, u, v = _svd_shapes(ctx, x, bool(ctx.attrs["full_matrices"]))
    real = None if x.dtype is None else np.finfo(x.dtype).dtype
    if not ctx.attrs["compute_uv"]:
        u = v = None
    return [TensorType(real, s), TensorType(x.dtype, u), TensorType(x.dtype, v)]


@op("SvdGrad", domain=D, inputs=["input", "s", "u", "v", "grad_s", "grad_u", "grad_v"], outputs=["output"],
    attrs={"compute_uv": Attr("int", 1), "full_matrices": Attr("int", 0)},
    doc="The gradient of Svd with respect to its input (real matrices), from its outputs (recomputed "
        "without compute_uv) and their gradients.")
def _svd_grad(ctx):
    return [ctx.input(0)]


@op("SelfAdjointEigV2", domain=D, inputs=["input"], outputs=["e", "v"], differentiable=True,
    attrs={"compute_v": Attr("int", 1)},
    doc="Eigenvalues (ascending) and eigenvectors of each self-adjoint matrix, reading its lower triangle.")
def _eigh(ctx):
    x = _matrix(ctx, 0, square=True)
    e = None if x.shape is None else tuple(x.shape[:-1])
    values = TensorType(None if x.dtype is None else np.finfo(x.dtype).dtype, e)
    return [values, TensorType(x.dtype, x.shape if ctx.attrs["compute_v"] else None)]


@op("SelfAdjointEigV2Grad", domain=D, inputs=["e", "v", "grad_e", "grad_v"], outputs=["output"],
    doc="The gradient of SelfAdjointEigV2 with respect to the lower triangle of its input.")
def _eigh_grad(ctx):
    return [ctx.input(1)]


@op("Lu", domain=D, inputs=["input"], outputs=["lu", "p"], attrs={"output_idx_type": Attr("int", 6)},
    doc="LU with partial pivoting: lu holds L (unit diagonal, below) and U (on and above), and "
        "L @ U = input[..., p, :]. output_idx_type is an ONNX dtype code (int32 = 6, int64 = 7).")
def _lu(ctx):
    x = _matrix(ctx, 0, square=True)
    index = np.dtype(np.int64) if ctx.attrs["output_idx_type"] == 7 else np.dtype(np.int32)
    return [x, TensorType(index, None if x.shape is None else tuple(x.shape[:-1]))]


@op("MatrixSetDiag", domain=D, inputs=["input", "diagonal"], outputs=["output"], differentiable=True,
    doc="input with the main diagonal of each matrix (min(M, N) long) replaced by diagonal.")
def _set_diag(ctx):
    x, d = _matrix(ctx, 0), ctx.input(1)
    if x.shape is not None and d.shape is not None:
        m, n = x.shape[-2:]
        want = None if m is None or n is None else min(m, n)
        if len(d.shape) != len(x.shape) - 1 or (want is not None and d.shape[-1] not in (None, want)):
            raise ctx.fail(f"diagonal must have shape {(*x.shape[:-2], want)} for input {x.shape}, got {d.shape}")
    return [x]


@op("MatrixDiagPart", domain=D, inputs=["input"], outputs=["diagonal"], differentiable=True,
    doc="The main diagonal (min(M, N) long) of each matrix in the last two axes.")
def _diag_part(ctx):
    x = _matrix(ctx, 0)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    *batch, m, n = x.shape
    return [TensorType(x.dtype, (*batch, None if m is None or n is None else min(m, n)))]


@op("TridiagonalSolve", domain=D, inputs=["diagonals", "rhs"], outputs=["output"], differentiable=True,
    attrs={"partial_pivoting": Attr("int", 1)},
    doc="x with A @ x = rhs for tridiagonal A given compactly as diagonals [..., 3, M] (superdiagonal, "
        "diagonal, subdiagonal; the last superdiagonal and first subdiagonal entries unused), rhs [..., M, K].")
def _tridiagonal_solve(ctx):
    d, rhs = ctx.input(0), _matrix(ctx, 1)
    if d.shape is not None and (len(d.shape) < 2 or d.shape[-2] not in (None, 3)):
        raise ctx.fail(f"diagonals must have shape [..., 3, M], got {d.shape}")
    if d.shape is not None and rhs.shape is not None and None not in (d.shape[-1], rhs.shape[-2]) \
            and d.shape[-1] != rhs.shape[-2]:
        raise ctx.fail(f"diagonals {d.shape} and rhs {rhs.shape} disagree on M")
    return [rhs]


op("TridiagonalSolveGrad", domain=D, inputs=["diagonals", "x", "grad"], outputs=["grad_diagonals", "grad_rhs"],
   attrs={"partial_pivoting": Attr("int", 1)},
   doc="The gradients of TridiagonalSolve: grad_rhs solves the transposed system, grad_diagonals is the "
       "three diagonals of -grad_rhs @ x^T.")(lambda ctx: [ctx.input(0), ctx.input(2)])
