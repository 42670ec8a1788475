"""Gradients of products whose textbook rule divides by the input: Det, MatrixInverse, CumProd.

Det's gradient is det(X) * inverse(X)^T (TensorFlow's rule: singular matrices have none to give);
CumProd's solves a recurrence instead of dividing by X, so it stays exact where X has zeros.
"""

from __future__ import annotations

from trainer.gradients.helpers import fs, ints_const, onnx
from trainer.gradients.registry import register_gradient

reg = register_gradient


def _transposed(t):
    rank = len(t.shape)
    return onnx("Transpose", [t], {"perm": list(range(rank - 2)) + [rank - 1, rank - 2]})


@reg("Det")
def _det(node, grads):
    x, y = node.inputs[0], node.outputs[0]
    per_matrix = onnx("Unsqueeze", [grads[0] * y, ints_const([-2, -1])])
    return [per_matrix * _transposed(fs("MatrixInverse", [x]))]


@reg("MatrixInverse", "flowstack")
def _matrix_inverse(node, grads):
    # d(X^-1) = -X^-1 dX X^-1, so dX = -(X^-1)^T dY (X^-1)^T.
    yt = _transposed(node.outputs[0])
    return [-onnx("MatMul", [onnx("MatMul", [yt, grads[0]]), yt])]


@reg("CumProd")
def _cum_prod(node, grads):
    x, axis = node.inputs
    attrs = {"exclusive": node.attrs["exclusive"], "reverse": node.attrs["reverse"]}
    return [fs("CumProdGrad", [grads[0], x, axis], attrs), None]
