"""Gradients of the linalg ops (real matrices), after TensorFlow 1.15's linalg_grad.py.

Ops that read one triangle of their input (Cholesky, SelfAdjointEigV2, MatrixTriangularSolve)
give their gradient on that triangle, so it is the derivative of what the kernel computes.
For Cholesky TensorFlow returns the symmetric matrix sym(G) instead; folded onto the lower
triangle that is tril(2 sym(G)) with sym(G)'s diagonal, and for any input built symmetric
(A = X X^T + ...) both give the same gradient downstream.
"""

from __future__ import annotations

from trainer.gradients.helpers import fs, ints_const, onnx, unbroadcast
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError

reg = register_gradient
D = "flowstack"


def _t(x):
    """Swap the last two axes (the adjoint of a real matrix)."""
    if x.shape is None:
        raise GraphError(f"linalg gradient needs the rank of {x.name}")
    rank = len(x.shape)
    return onnx("Transpose", [x], {"perm": list(range(rank - 2)) + [rank - 1, rank - 2]})


def _mm(a, b):
    return onnx("MatMul", [a, b])


def _lower(x, k: int = 0):
    return onnx("Trilu", [x, ints_const(k)], {"upper": 0})


def _upper(x):
    return onnx("Trilu", [x, ints_const(0)], {"upper": 1})


def _fold_lower(g):
    """The gradient on the lower triangle for an op that reads only it: tril(G + G^T), diagonal G's."""
    both = g + _t(g)
    return fs("MatrixSetDiag", [_lower(both), fs("MatrixDiagPart", [g])])


def _or_zeros(g, like):
    return g if g is not None else fs("ZerosLike", [like])


@reg("Cholesky", D)
def _cholesky(node, grads):
    # TensorFlow's rule: with L^-1, P = Phi(L^T dL), grad = sym(L^-T P L^-1), Phi = lower with half diagonal.
    l = node.outputs[0]
    eye = fs("MatrixSetDiag", [fs("ZerosLike", [l]), fs("OnesLike", [fs("MatrixDiagPart", [l])])])
    l_inverse = fs("MatrixTriangularSolve", [l, eye], {"lower": 1, "adjoint": 0})
    middle = _mm(_t(l), grads[0])
    middle = _lower(fs("MatrixSetDiag", [middle, fs("MatrixDiagPart", [middle]) * 0.5]))
    grad_a = _mm(_mm(_t(l_inverse), middle), l_inverse)
    return [_fold_lower((grad_a + _t(grad_a)) * 0.5)]


@reg("MatrixTriangularSolve", D)
def _triangular_solve(node, grads):
    a, b = node.inputs
    c = node.outputs[0]
    lower, adjoint = node.attrs["lower"], node.attrs["adjoint"]
    grad_b = fs("MatrixTriangularSolve", [a, grads[0]], {"lower": lower, "adjoint": 1 - adjoint})
    grad_a = -_mm(c, _t(grad_b)) if adjoint else -_mm(grad_b, _t(c))
    grad_a = _lower(grad_a) if lower else _upper(grad_a)
    return [unbroadcast(grad_a, a, grad_a), unbroadcast(grad_b, b, grad_b)]


@reg("LogMatrixDeterminant", D)
def _slogdet(node, grads):
    g = grads[1]
    if g is None:
        return [None]
    x = node.inputs[0]
    return [onnx("Unsqueeze", [g, ints_const([-2, -1])]) * _t(fs("MatrixInverse", [x]))]


@reg("Svd", D)
def _svd(node, grads):
    s, u, v = node.outputs
    attrs = {"compute_uv": node.attrs["compute_uv"], "full_matrices": node.attrs["full_matrices"]}
    inputs = [node.inputs[0], s, u, v, _or_zeros(grads[0], s), _or_zeros(grads[1], u), _or_zeros(grads[2], v)]
    return [fs("SvdGrad", inputs, attrs)]


@reg("SelfAdjointEigV2", D)
def _eigh(node, grads):
    e, v = node.outputs
    if not node.attrs["compute_v"]:  # TensorFlow recomputes the eigenvectors the rule needs
        e, v = fs("SelfAdjointEigV2", [node.inputs[0]], {"compute_v": 1}, n=2)
    return [fs("SelfAdjointEigV2Grad", [e, v, _or_zeros(grads[0], e), _or_zeros(grads[1], v)])]


@reg("MatrixSetDiag", D)
def _set_diag(node, grads):
    g = grads[0]
    return [fs("MatrixSetDiag", [g, fs("ZerosLike", [node.inputs[1]])]), fs("MatrixDiagPart", [g])]


reg("MatrixDiagPart", D)(lambda node, grads: [fs("MatrixSetDiag", [fs("ZerosLike", [node.inputs[0]]), grads[0]])])
reg("MatrixExponential", D)(lambda node, grads: [fs("MatrixExponentialGrad", [node.inputs[0], grads[0]])])


@reg("TridiagonalSolve", D)
def _tridiagonal_solve(node, grads):
    diagonals, rhs = node.inputs
    grad_diagonals, grad_rhs = fs("TridiagonalSolveGrad", [diagonals, node.outputs[0], grads[0]],
                                  {"partial_pivoting": node.attrs["partial_pivoting"]}, n=2)
    return [unbroadcast(grad_diagonals, diagonals, grad_diagonals), unbroadcast(grad_rhs, rhs, grad_rhs)]
