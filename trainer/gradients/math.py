"""Gradients of elementwise math, activations and matrix products."""

from __future__ import annotations

import string

import numpy as np

from schemas.dtypes import from_numpy
from trainer.gradients.helpers import (
    binary,
    fs,
    ints_const,
    onnx,
    unary,
    unbroadcast,
    zero_grad,
)
from trainer.gradients.registry import register_gradient

reg = register_gradient

reg("Add")(binary(lambda g, a, b, y: g, lambda g, a, b, y: g))
reg("Sub")(binary(lambda g, a, b, y: g, lambda g, a, b, y: -g))
reg("Mul")(binary(lambda g, a, b, y: g * b, lambda g, a, b, y: g * a))
reg("Div")(binary(lambda g, a, b, y: g / b, lambda g, a, b, y: -(g * y) / b))
reg("Pow")(binary(lambda g, a, b, y: g * b * onnx("Pow", [a, b - 1.0]),
                  lambda g, a, b, y: g * y * onnx("Log", [a])))
reg("Neg")(unary(lambda g, x, y: -g))
reg("Relu")(unary(lambda g, x, y: fs("ReluGrad", [g, y])))
reg("Sigmoid")(unary(lambda g, x, y: fs("SigmoidGrad", [g, y])))
reg("Tanh")(unary(lambda g, x, y: fs("TanhGrad", [g, y])))
reg("Exp")(unary(lambda g, x, y: g * y))
reg("Log")(unary(lambda g, x, y: g / x))
reg("Sqrt")(unary(lambda g, x, y: g * 0.5 / y))
reg("Reciprocal")(unary(lambda g, x, y: -(g * y * y)))
reg("Abs")(unary(lambda g, x, y: g * onnx("Sign", [x])))
reg("Sin")(unary(lambda g, x, y: g * onnx("Cos", [x])))
reg("Cos")(unary(lambda g, x, y: -(g * onnx("Sin", [x]))))
reg("Softplus")(unary(lambda g, x, y: g * onnx("Sigmoid", [x])))
reg("LeakyRelu")(lambda node, grads: [
    onnx("Where", [onnx("Greater", [node.inputs[0], 0.0]), grads[0], grads[0] * node.attrs["alpha"]])])
reg("Elu")(lambda node, grads: [
    onnx("Where", [onnx("Greater", [node.inputs[0], 0.0]), grads[0], grads[0] * (node.outputs[0] + node.attrs["alpha"])])])
reg("Softmax")(lambda node, grads: [fs("SoftmaxGrad", [grads[0], node.outputs[0]], {"axis": node.attrs["axis"]})])
reg("LogSoftmax")(lambda node, grads: [fs("LogSoftmaxGrad", [grads[0], node.outputs[0]], {"axis": node.attrs["axis"]})])
reg("Sum")(lambda node, grads: [unbroadcast(grads[0], x, node.outputs[0]) for x in node.inputs])
reg("Mean")(lambda node, grads: [unbroadcast(grads[0] / float(len(node.inputs)), x, node.outputs[0]) for x in node.inputs])


@reg("Max")
@reg("Min")
def _extremum(node, grads):
    y = node.outputs[0]
    # Ties share nothing: the first input attaining the extremum gets the gradient, as in ONNX Max.
    return [unbroadcast(onnx("Where", [onnx("Equal", [x, y]), grads[0], fs("ZerosLike", [grads[0]])]), x, y)
            for x in node.inputs]


@reg("Where")
def _where_grad(node, grads):
    c, a, b = node.inputs
    y = node.outputs[0]
    zero = fs("ZerosLike", [grads[0]])
    return [None, unbroadcast(onnx("Where", [c, grads[0], zero]), a, y),
            unbroadcast(onnx("Where", [c, zero, grads[0]]), b, y)]


@reg("Clip")
def _clip(node, grads):
    """Clip is min(max(x, lo), hi): each element's gradient goes to x, lo or hi, whichever it equals
    (hi wins when lo > hi, as every element then becomes hi)."""
    x, y, g = node.inputs[0], node.outputs[0], grads[0]
    lo, hi = (node.inputs[i] if len(node.inputs) > i else None for i in (1, 2))
    zero = fs("ZerosLike", [g])
    keep = None
    dlo = dhi = None
    if lo is not None:
        keep = onnx("GreaterOrEqual", [x, lo])
        dlo = onnx("Where", [keep, zero, g])
    if hi is not None:
        below = onnx("LessOrEqual", [onnx("Max", [x, lo]) if lo is not None else x, hi])
        keep = below if keep is None else onnx("And", [keep, below])
        dhi = onnx("Where", [below, zero, g])
        dlo = None if dlo is None else onnx("Where", [below, dlo, zero])
    dx = g if keep is None else onnx("Where", [keep, g, zero])
    dbounds = [None if d is None else unbroadcast(d, bound, y) for bound, d in ((lo, dlo), (hi, dhi))]
    return [dx] + dbounds[: len(node.inputs) - 1]


@reg("Cast")
def _cast(node, grads):
    x = node.inputs[0]
    if x.dtype is None or x.dtype.kind != "f":
        return [None]
    return [onnx("Cast", [grads[0]], {"to": from_numpy(x.dtype)})]


def _swap_last(t):
    rank = len(t.shape)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return onnx("Transpose", [t], {"perm": perm})


@reg("MatMul")
def _matmul(node, grads):
    """1-D operands are promoted as MatMul promotes them ((K,) -> (1, K) on the left, (K, 1) on the
    right), differentiated as matrices, and squeezed back."""
    a, b = node.inputs
    g = grads[0]
    if a.shape is None or b.shape is None:
        raise NotImplementedError("MatMul gradient needs inputs of known rank")
    a_vec, b_vec = len(a.shape) == 1, len(b.shape) == 1
    if b_vec:
        b, g = _unsqueeze(b, -1), _unsqueeze(g, -1)
    if a_vec:
        a, g = _unsqueeze(a, 0), _unsqueeze(g, -2)
    da, db = _matrix_grads(a, b, g)
    return [_squeeze(da, 0) if a_vec else da, _squeeze(db, -1) if b_vec else db]


def _unsqueeze(t, axis):
    return onnx("Unsqueeze", [t, ints_const([axis])])


def _squeeze(t, axis):
    return onnx("Squeeze", [t, ints_const([axis])])


def _matrix_grads(a, b, g):
    if len(a.shape) == 2 and len(b.shape) == 2:
        return onnx("Gemm", [g, b], {"transB": 1}), onnx("Gemm", [a, g], {"transA": 1})
    rank = max(len(a.shape), len(b.shape))
    da = onnx("MatMul", [g, _swap_last(b)])
    db = onnx("MatMul", [_swap_last(a), g])
    return _sum_batch(da, a, rank), _sum_batch(db, b, rank)


def _sum_batch(d, like, rank):
    if len(like.shape) == rank:
        return unbroadcast(d, like, d)
    return fs("SumToShape", [d, like])


@reg("Gemm")
def _gemm(node, grads):
    a, b = node.inputs[:2]
    c = node.inputs[2] if len(node.inputs) > 2 else None
    g = grads[0]
    alpha, beta = node.attrs["alpha"], node.attrs["beta"]
    ta, tb = node.attrs["transA"], node.attrs["transB"]
    scale = {"alpha": alpha}
    if not ta:
        da = onnx("Gemm", [g, b], {**scale, "transB": 0 if tb else 1})
    else:
        da = onnx("Gemm", [b, g], {**scale, "transA": tb, "transB": 1})
    if not tb:
        db = onnx("Gemm", [a, g], {**scale, "transA": 0 if ta else 1})
    else:
        db = onnx("Gemm", [g, a], {**scale, "transA": 1, "transB": ta})
    dc = None
    if c is not None:
        dc = unbroadcast(g if beta == 1.0 else g * beta, c, node.outputs[0])
    return [da, db, dc][: len(node.inputs)]


zero_grad("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Not", "And", "Or", "Xor",
          "Sign", "Floor", "Ceil", "Round", "IsNaN", "IsInf")


def _sq(x):
    return x * x


def _gt0(x):
    return onnx("Greater", [x, 0.0])


def _where(c, a, b):
    return onnx("Where", [c, a, b])


reg("Acos")(unary(lambda g, x, y: -(g / onnx("Sqrt", [1.0 - _sq(x)]))))
reg("Asin")(unary(lambda g, x, y: g / onnx("Sqrt", [1.0 - _sq(x)])))
reg("Acosh")(unary(lambda g, x, y: g / onnx("Sqrt", [_sq(x) - 1.0])))
reg("Asinh")(unary(lambda g, x, y: g / onnx("Sqrt", [_sq(x) + 1.0])))
reg("Atan")(unary(lambda g, x, y: g / (_sq(x) + 1.0)))
reg("Atanh")(unary(lambda g, x, y: g / (1.0 - _sq(x))))
reg("Sinh")(unary(lambda g, x, y: g * onnx("Cosh", [x])))
reg("Cosh")(unary(lambda g, x, y: g * onnx("Sinh", [x])))
reg("Tan")(unary(lambda g, x, y: g * (_sq(y) + 1.0)))
reg("Erf")(unary(lambda g, x, y: g * onnx("Exp", [-_sq(x)]) * (2.0 / np.sqrt(np.pi))))
reg("Softsign")(unary(lambda g, x, y: g / _sq(onnx("Abs", [x]) + 1.0)))
reg("ThresholdedRelu")(lambda node, grads: [grads[0] * onnx("Cast", [onnx("Greater", [node.inputs[0], node.attrs["alpha"]])],
                                                            {"to": from_numpy(node.inputs[0].dtype)})])
reg("Shrink")(lambda node, grads: [grads[0] * onnx("Cast", [onnx("Greater", [onnx("Abs", [node.inputs[0]]), node.attrs["lambd"]])],
                                                   {"to": from_numpy(node.inputs[0].dtype)})])
reg("Selu")(lambda node, grads: [_where(_gt0(node.inputs[0]), grads[0] * node.attrs["gamma"],
                                        grads[0] * (node.outputs[0] + node.attrs["alpha"] * node.attrs["gamma"]))])
reg("Celu")(lambda node, grads: [_where(_gt0(node.inputs[0]), grads[0],
                                        grads[0] * onnx("Exp", [node.inputs[0] / node.attrs["alpha"]]))])


@reg("HardSigmoid")
def _hard_sigmoid(node, grads):
    x, a, b = node.inputs[0], node.attrs["alpha"], node.attrs["beta"]
    z = x * a + b
    inside = onnx("And", [onnx("Greater", [z, 0.0]), onnx("Less", [z, 1.0])])
    return [_where(inside, grads[0] * a, fs("ZerosLike", [grads[0]]))]


@reg("HardSwish")
def _hard_swish(node, grads):
    x, g = node.inputs[0], grads[0]
    mid = g * (x / 3.0 + 0.5)
    out = _where(onnx("Greater", [x, 3.0]), g, mid)
    return [_where(onnx("Less", [x, -3.0]), fs("ZerosLike", [g]), out)]


@reg("Swish")
def _swish(node, grads):
    x, a = node.inputs[0], node.attrs["alpha"]
    s = onnx("Sigmoid", [x * a])
    return [grads[0] * (s + x * a * s * (1.0 - s))]


@reg("Mish")
def _mish(node, grads):
    x = node.inputs[0]
    t = onnx("Tanh", [onnx("Softplus", [x])])
    return [grads[0] * (t + x * onnx("Sigmoid", [x]) * (1.0 - t * t))]


@reg("Gelu")
def _gelu(node, grads):
    x, g = node.inputs[0], grads[0]
    if node.attrs["approximate"] == "tanh":
        c = np.sqrt(2.0 / np.pi)
        t = onnx("Tanh", [(x + x * x * x * 0.044715) * c])
        d = (t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * c * (x * x * (3 * 0.044715) + 1.0)
        return [g * d]
    cdf = (onnx("Erf", [x * (1.0 / np.sqrt(2.0))]) + 1.0) * 0.5
    pdf = onnx("Exp", [-(x * x) * 0.5]) * (1.0 / np.sqrt(2.0 * np.pi))
    return [g * (cdf + x * pdf)]


@reg("PRelu")
def _prelu(node, grads):
    x, slope = node.inputs
    g, y = grads[0], node.outputs[0]
    zero = fs("ZerosLike", [g])
    pos = _gt0(x)
    return [unbroadcast(_where(pos, g, g * slope), x, y), unbroadcast(_where(pos, zero, g * x), slope, y)]


@reg("CastLike")
def _cast_like(node, grads):
    x = node.inputs[0]
    if x.dtype is None or x.dtype.kind != "f":
        return [None, None]
    return [onnx("Cast", [grads[0]], {"to": from_numpy(x.dtype)}), None]


@reg("Einsum")
def _einsum(node, grads):
    """Each operand's gradient is an einsum of the output gradient with the other operands.

    Indices of an operand that are in neither the output nor another operand (summed within it
    alone) are broadcast back through a ones tensor shaped like that operand; size-1 dims that
    einsum broadcast are summed back. Indices repeated within one operand (diagonals) are not
    supported.
    """
    terms, out = _einsum_terms(node.attrs["equation"], [x.shape for x in node.inputs])
    result = []
    for k, (mine, x) in enumerate(zip(terms, node.inputs)):
        others = [(t, y) for j, (t, y) in enumerate(zip(terms, node.inputs)) if j != k]
        subs = [out] + [t for t, _ in others]
        operands = [grads[0]] + [y for _, y in others]
        if not set(mine) <= set("".join(subs)):
            subs.append(mine)
            operands.append(fs("OnesLike", [x]))
        d = onnx("Einsum", operands, {"equation": f"{','.join(subs)}->{mine}"})
        same = d.shape is not None and d.shape == x.shape and None not in d.shape
        result.append(d if same else fs("SumToShape", [d, x]))
    return result


def _einsum_terms(equation: str, shapes) -> tuple[list[str], str]:
    """The operands' index strings and the output's, with ellipses spelled out as letters of their
    own (right-aligned, as they broadcast) and an implicit output made explicit (as numpy and ONNX
    do: the ellipsis dims, then the indices used once in alphabetical order)."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    dots = ""
    if "..." in eq:
        if any(shape is None for t, shape in zip(terms, shapes) if "..." in t):
            raise NotImplementedError(f"Einsum gradient with an ellipsis needs the operands' ranks: {equation!r}")
        widths = [len(shape) - (len(t) - 3) if "..." in t else 0 for t, shape in zip(terms, shapes)]
        dots = "".join([ch for ch in string.ascii_letters if ch not in eq][: max(widths)])
        terms = [t.replace("...", dots[len(dots) - w:]) for t, w in zip(terms, widths)]
        out = out.replace("...", dots)
    if not arrow:
        letters = "".join(terms)
        out = dots + "".join(sorted(ch for ch in set(letters) - set(dots) if letters.count(ch) == 1))
    if any(len(set(t)) != len(t) for t in terms):
        raise NotImplementedError(f"Einsum gradient does not support an index repeated within an operand: {equation!r}")
    return terms, out


# -- products whose textbook rule divides by the input --------------------------------------------
# Gradients of products whose textbook rule divides by the input: Det, MatrixInverse, CumProd.
#
# Det's gradient is det(X) * inverse(X)^T (TensorFlow's rule: singular matrices have none to give);
# CumProd's solves a recurrence instead of dividing by X, so it stays exact where X has zeros.


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


@reg("Trilu")
def _trilu(node, grads):
    return [onnx("Trilu", [grads[0]] + node.inputs[1:], {"upper": node.attrs["upper"]})] + [None] * (len(node.inputs) - 1)


@reg("CumSum")
def _cumsum(node, grads):
    attrs = {"exclusive": node.attrs["exclusive"], "reverse": 1 - node.attrs["reverse"]}
    return [onnx("CumSum", [grads[0], node.inputs[1]], attrs), None]


@reg("SumToShape", "flowstack")
def _sum_to_shape(node, grads):
    return [onnx("Expand", [grads[0], onnx("Shape", [node.inputs[0]])]), None]


zero_grad("ZerosLike", "OnesLike", domain="flowstack")


def _xent(node, grads):
    """d/d logits: g * backprop; where a gradient reaches ``backprop`` too (a second derivative),
    TensorFlow's extra term (gg - sum(gg * softmax)) * softmax is added."""
    g, gg = grads
    if g is None and gg is None:
        return [None, None]
    out = None if g is None else onnx("Unsqueeze", [g, ints_const([-1])]) * node.outputs[1]
    if gg is not None:
        softmax = onnx("Softmax", [node.inputs[0]], {"axis": -1})
        inner = onnx("ReduceSum", [gg * softmax, ints_const([-1])], {"keepdims": 1})
        term = (gg - inner) * softmax
        out = term if out is None else out + term
    return [out, None]


reg("SoftmaxCrossEntropyWithLogits", "flowstack")(_xent)
reg("SparseSoftmaxCrossEntropyWithLogits", "flowstack")(_xent)


# Second derivatives (tf.hessians, gradient penalties): the rules of the helper ops first-order
# rules build, each linear in dY.
@reg("ReluGrad", "flowstack")
def _relu_grad(node, grads):
    return [fs("ReluGrad", [grads[0], node.inputs[1]]), None]


@reg("SigmoidGrad", "flowstack")
def _sigmoid_grad(node, grads):
    dy, y = node.inputs
    return [fs("SigmoidGrad", [grads[0], y]), grads[0] * dy * (1.0 - 2.0 * y)]


@reg("TanhGrad", "flowstack")
def _tanh_grad(node, grads):
    dy, y = node.inputs
    return [fs("TanhGrad", [grads[0], y]), grads[0] * dy * y * -2.0]


@reg("BroadcastReduceGrad", "flowstack")
def _broadcast_reduce_grad(node, grads):
    """The forward op spreads dY over the reduced axes: its transpose reduces them back."""
    dy, x = node.inputs
    axes = node.attrs.get("axes")
    if not axes:
        rank = None if x.shape is None else len(x.shape)
        if rank is None:
            return [None, None]  # unknown rank: TensorFlow's reshape-based rule needs it too
        axes = list(range(rank))
    op = "ReduceMean" if node.attrs.get("scale") == "mean" else "ReduceSum"
    reduced = onnx(op, [grads[0], ints_const(axes)], {"keepdims": 1})
    return [onnx("Reshape", [reduced, onnx("Shape", [dy])]), None]
