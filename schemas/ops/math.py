"""Elementwise math, activations, comparisons, logic, matrix products, casts and windows."""

from __future__ import annotations

import numpy as np

from schemas import dtypes
from schemas.ops.rules import (
    BOOL,
    broadcast,
    broadcast_shapes,
    common_dtype,
    const_ints,
    normalize_axis,
    same_as_input,
)
from schemas.ops.shape import dtype_from_code
from schemas.registry import REQUIRED, Attr, TensorType, op


def _dtype_attr(ctx, name: str) -> np.dtype:
    return dtype_from_code(ctx.attrs[name], f"{ctx.schema.name}: attribute {name}")


def _with_axis(ctx):
    """Rule: output like input 0, after checking the ``axis`` attribute against its rank."""
    x = ctx.input(0)
    if x.rank is not None:
        normalize_axis(ctx, ctx.attrs["axis"], x.rank)
    return [x]


# --- elementwise unary -----------------------------------------------------------------------

op("Abs", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Neg", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Exp", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Log", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Sqrt", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Reciprocal", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Sin", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Cos", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Tan", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Asin", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Acos", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Atan", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Sinh", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Cosh", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Asinh", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Acosh", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Atanh", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Erf", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Sigmoid", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Tanh", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("HardSwish", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Softplus", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Softsign", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("Mish", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))

# Piecewise constant: the gradient is zero almost everywhere, so no gradient flows.
op("Floor", inputs=["X"], outputs=["Y"])(same_as_input(0))
op("Ceil", inputs=["X"], outputs=["Y"])(same_as_input(0))
op("Round", inputs=["X"], outputs=["Y"])(same_as_input(0))
op("Sign", inputs=["X"], outputs=["Y"])(same_as_input(0))

op("Not", inputs=["X"], outputs=["Y"])(same_as_input(0))
op("BitwiseNot", inputs=["X"], outputs=["Y"])(same_as_input(0))

op("IsNaN", inputs=["X"], outputs=["Y"])(broadcast(BOOL))
op(
    "IsInf", inputs=["X"], outputs=["Y"],
    attrs={"detect_negative": Attr("int", 1), "detect_positive": Attr("int", 1)},
)(broadcast(BOOL))

op("Relu", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))
op("LeakyRelu", inputs=["X"], outputs=["Y"], attrs={"alpha": Attr("float", 0.01)},
   differentiable=True)(same_as_input(0))
op("Gelu", inputs=["X"], outputs=["Y"], attrs={"approximate": Attr("string", "none")},
   differentiable=True)(same_as_input(0))
op("HardSigmoid", inputs=["X"], outputs=["Y"],
   attrs={"alpha": Attr("float", 0.2), "beta": Attr("float", 0.5)}, differentiable=True)(same_as_input(0))
op("Elu", inputs=["X"], outputs=["Y"], attrs={"alpha": Attr("float", 1.0)},
   differentiable=True)(same_as_input(0))
op("Selu", inputs=["X"], outputs=["Y"],
   attrs={"alpha": Attr("float", 1.6732631921768188), "gamma": Attr("float", 1.0507010221481323)},
   differentiable=True)(same_as_input(0))
op("Celu", inputs=["X"], outputs=["Y"], attrs={"alpha": Attr("float", 1.0)},
   differentiable=True)(same_as_input(0))
op("Shrink", inputs=["X"], outputs=["Y"], attrs={"bias": Attr("float", 0.0), "lambd": Attr("float", 0.5)},
   differentiable=True)(same_as_input(0))
op("ThresholdedRelu", inputs=["X"], outputs=["Y"], attrs={"alpha": Attr("float", 1.0)},
   differentiable=True)(same_as_input(0))
op("Swish", inputs=["X"], outputs=["Y"], attrs={"alpha": Attr("float", 1.0)},
   differentiable=True)(same_as_input(0))
op("Clip", inputs=["X", "min?", "max?"], outputs=["Y"], differentiable=True)(same_as_input(0))

op("Softmax", inputs=["X"], outputs=["Y"], attrs={"axis": Attr("int", -1)}, differentiable=True)(_with_axis)
op("LogSoftmax", inputs=["X"], outputs=["Y"], attrs={"axis": Attr("int", -1)}, differentiable=True)(_with_axis)
op("Hardmax", inputs=["X"], outputs=["Y"], attrs={"axis": Attr("int", -1)})(_with_axis)

# --- binary and variadic with broadcasting ---------------------------------------------------

op("Add", inputs=["A", "B"], outputs=["C"], differentiable=True)(broadcast())
op("Sub", inputs=["A", "B"], outputs=["C"], differentiable=True)(broadcast())
op("Mul", inputs=["A", "B"], outputs=["C"], differentiable=True)(broadcast())
op("Div", inputs=["A", "B"], outputs=["C"], differentiable=True)(broadcast())

op("Pow", inputs=["X", "Y"], outputs=["Z"], differentiable=True)(broadcast(same_dtype=False))
op("Mod", inputs=["A", "B"], outputs=["C"], attrs={"fmod": Attr("int", 0)})(broadcast())
op("BitShift", inputs=["X", "Y"], outputs=["Z"], attrs={"direction": Attr("string", REQUIRED)})(broadcast())

op("And", inputs=["A", "B"], outputs=["C"])(broadcast())
op("Or", inputs=["A", "B"], outputs=["C"])(broadcast())
op("Xor", inputs=["A", "B"], outputs=["C"])(broadcast())
op("BitwiseAnd", inputs=["A", "B"], outputs=["C"])(broadcast())
op("BitwiseOr", inputs=["A", "B"], outputs=["C"])(broadcast())
op("BitwiseXor", inputs=["A", "B"], outputs=["C"])(broadcast())

op("Equal", inputs=["A", "B"], outputs=["C"])(broadcast(BOOL))
op("Greater", inputs=["A", "B"], outputs=["C"])(broadcast(BOOL))
op("GreaterOrEqual", inputs=["A", "B"], outputs=["C"])(broadcast(BOOL))
op("Less", inputs=["A", "B"], outputs=["C"])(broadcast(BOOL))
op("LessOrEqual", inputs=["A", "B"], outputs=["C"])(broadcast(BOOL))


@op("PRelu", inputs=["X", "slope"], outputs=["Y"], differentiable=True)
def _prelu(ctx):
    # slope broadcasts to X (unidirectionally): the output is X's shape.
    x, slope = ctx.input(0), ctx.input(1)
    shape = broadcast_shapes(ctx, [x.shape, slope.shape])
    if x.shape is not None and shape is not None and len(shape) != len(x.shape):
        raise ctx.fail(f"slope {slope.shape} does not broadcast to X {x.shape}")
    return [TensorType(common_dtype(ctx, [0, 1]), x.shape if x.shape is not None else shape)]


op("Sum", inputs=["data_0+"], outputs=["result"], differentiable=True)(broadcast())
op("Mean", inputs=["data_0+"], outputs=["result"], differentiable=True)(broadcast())
op("Max", inputs=["data_0+"], outputs=["result"], differentiable=True)(broadcast())
op("Min", inputs=["data_0+"], outputs=["result"], differentiable=True)(broadcast())


@op("Where", inputs=["condition", "X", "Y"], outputs=["output"], differentiable=True)
def _where(ctx):
    shape = broadcast_shapes(ctx, [ctx.input(i).shape for i in range(3)])
    return [TensorType(common_dtype(ctx, [1, 2]), shape)]


# --- linear algebra --------------------------------------------------------------------------


@op("MatMul", inputs=["A", "B"], outputs=["Y"], differentiable=True)
def _matmul(ctx):
    a, b = ctx.input(0), ctx.input(1)
    if a.shape is None or b.shape is None:
        return [TensorType(a.dtype, None)]
    sa, sb = list(a.shape), list(b.shape)
    if not sa or not sb:
        raise ctx.fail("inputs must have rank >= 1")
    a_vec, b_vec = len(sa) == 1, len(sb) == 1
    if a_vec:
        sa = [1] + sa
    if b_vec:
        sb = sb + [1]
    k1, k2 = sa[-1], sb[-2]
    if k1 is not None and k2 is not None and k1 != k2:
        raise ctx.fail(f"inner dimensions differ: A {a.shape} @ B {b.shape}")
    batch = broadcast_shapes(ctx, [tuple(sa[:-2]), tuple(sb[:-2])])
    out = list(batch) + ([] if a_vec else [sa[-2]]) + ([] if b_vec else [sb[-1]])
    return [TensorType(a.dtype, tuple(out))]


@op(
    "Gemm", inputs=["A", "B", "C?"], outputs=["Y"], differentiable=True,
    attrs={"alpha": Attr("float", 1.0), "beta": Attr("float", 1.0),
           "transA": Attr("int", 0), "transB": Attr("int", 0)},
)
def _gemm(ctx):
    a, b = ctx.input(0), ctx.input(1)
    dtype = common_dtype(ctx, [0, 1])
    if a.shape is None or b.shape is None:
        return [TensorType(dtype, None)]
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ctx.fail(f"A and B must be matrices, got A {a.shape} and B {b.shape}")
    m, ka = a.shape[::-1] if ctx.attrs["transA"] else a.shape
    kb, n = b.shape[::-1] if ctx.attrs["transB"] else b.shape
    if ka is not None and kb is not None and ka != kb:
        raise ctx.fail(
            f"inner dimensions differ: A {a.shape} (transA={ctx.attrs['transA']}) "
            f"and B {b.shape} (transB={ctx.attrs['transB']})"
        )
    c = ctx.input(2)
    if ctx.has_input(2) and c.shape is not None:
        # C broadcasts to the product (unidirectionally); it can only fill in unknown dims.
        if len(c.shape) > 2 or any(
            d not in (None, 1) and o is not None and d != o for d, o in zip(c.shape[::-1], (n, m))
        ):
            raise ctx.fail(f"C {c.shape} does not broadcast to the product's shape {(m, n)}")
        m, n = broadcast_shapes(ctx, [(m, n), c.shape])
    return [TensorType(dtype, (m, n))]


@op("Einsum", inputs=["Inputs+"], outputs=["Output"], attrs={"equation": Attr("string", REQUIRED)},
    differentiable=True)
def _einsum(ctx):
    equation = ctx.attrs["equation"].replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != ctx.num_inputs:
        raise ctx.fail(f"equation {equation!r} names {len(terms)} operands, got {ctx.num_inputs} inputs")
    dtype = common_dtype(ctx, range(ctx.num_inputs))
    sizes: dict[str, int | None] = {}
    ellipsis_shapes = []
    for i, term in enumerate(terms):
        shape = ctx.input(i).shape
        if shape is None:
            return [TensorType(dtype, None)]
        labels = term.replace("...", "")
        n_ell = len(shape) - len(labels)
        if n_ell < 0 or (n_ell and "..." not in term):
            raise ctx.fail(f"operand {i} of rank {len(shape)} does not match term {term!r}")
        before = term.split("...")[0] if "..." in term else term
        ellipsis_shapes.append(tuple(shape[len(before):len(before) + n_ell]))
        dims = list(shape[:len(before)]) + list(shape[len(before) + n_ell:])
        for label, dim in zip(labels, dims):
            known = sizes.get(label)
            if known is not None and dim is not None and known != dim and 1 not in (known, dim):
                raise ctx.fail(f"label {label!r} has sizes {known} and {dim} in {equation!r}")
            if known is None or known == 1:
                sizes[label] = dim
    ell = broadcast_shapes(ctx, ellipsis_shapes)
    if not arrow:
        counts = {c: lhs.count(c) for c in lhs if c.isalpha()}
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c, k in counts.items() if k == 1))
    head, ell_mark, tail = rhs.partition("...")
    out = [sizes.get(c) for c in head]
    if ell_mark:
        out += list(ell) + [sizes.get(c) for c in tail]
    return [TensorType(dtype, tuple(out))]


@op("Det", inputs=["X"], outputs=["Y"], differentiable=True)
def _det(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [x]
    if len(x.shape) < 2:
        raise ctx.fail(f"X must have rank >= 2, got {x.shape}")
    m, n = x.shape[-2:]
    if m is not None and n is not None and m != n:
        raise ctx.fail(f"X must hold square matrices, got {x.shape}")
    return [TensorType(x.dtype, x.shape[:-2])]


op("Trilu", inputs=["X", "k?"], outputs=["Y"], attrs={"upper": Attr("int", 1)},
   differentiable=True)(same_as_input(0))

op("CumSum", inputs=["X", "axis"], outputs=["Y"], differentiable=True,
   attrs={"exclusive": Attr("int", 0), "reverse": Attr("int", 0)})(same_as_input(0))
op("CumProd", inputs=["X", "axis"], outputs=["Y"], differentiable=True,
   attrs={"exclusive": Attr("int", 0), "reverse": Attr("int", 0)})(same_as_input(0))

# --- types -----------------------------------------------------------------------------------

# saturate and round_mode only change conversions to float8 types, which are refused.
_CAST_ATTRS = {"saturate": Attr("int", 1), "round_mode": Attr("string", "up")}


@op("Cast", inputs=["input"], outputs=["output"], attrs={"to": Attr("int", REQUIRED), **_CAST_ATTRS},
    differentiable=True)
def _cast(ctx):
    return [TensorType(_dtype_attr(ctx, "to"), ctx.input(0).shape)]


@op("CastLike", inputs=["input", "target_type"], outputs=["output"], attrs=dict(_CAST_ATTRS),
    differentiable=True)
def _cast_like(ctx):
    return [TensorType(ctx.input(1).dtype, ctx.input(0).shape)]


# --- windows ---------------------------------------------------------------------------------


def _window(ctx):
    size = const_ints(ctx, 0)
    return [TensorType(_dtype_attr(ctx, "output_datatype"), (size[0],) if size else (None,))]


op("HannWindow", inputs=["size"], outputs=["output"],
   attrs={"output_datatype": Attr("int", dtypes.FLOAT), "periodic": Attr("int", 1)})(_window)
op("HammingWindow", inputs=["size"], outputs=["output"],
   attrs={"output_datatype": Attr("int", dtypes.FLOAT), "periodic": Attr("int", 1)})(_window)
op("BlackmanWindow", inputs=["size"], outputs=["output"],
   attrs={"output_datatype": Attr("int", dtypes.FLOAT), "periodic": Attr("int", 1)})(_window)


# -- flowstack ops: the matrix inverse, gradient helpers, softmax losses --------------------------
D = "flowstack"

op("MatrixInverse", domain=D, inputs=["X"], outputs=["Y"], differentiable=True,
   doc="Inverse of each square matrix in the last two axes (TensorFlow's MatrixInverse).")(same_as_input(0))


@op("Qr", domain=D, inputs=["input"], outputs=["q", "r"], attrs={"full_matrices": Attr("int", 0)},
    doc="QR decomposition of each matrix in the last two axes (TensorFlow's Qr): [..., M, N] gives q "
        "[..., M, P] and r [..., P, N], P = min(M, N) (M with full_matrices).")
def _qr(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None)] * 2
    if len(x.shape) < 2:
        raise ctx.fail(f"input must be at least a matrix, got shape {x.shape}")
    *batch, m, n = x.shape
    p = m if ctx.attrs["full_matrices"] else (None if m is None or n is None else min(m, n))
    return [TensorType(x.dtype, (*batch, m, p)), TensorType(x.dtype, (*batch, p, n))]


@op("Bincount", domain=D, inputs=["arr", "size", "weights"], outputs=["bins"],
    doc="bins[i] = how often (or, with weights, their sum where) arr holds i, for i < size; values >= size "
        "are dropped, negative ones fail the run. Empty weights count 1 per value (TensorFlow's Bincount).")
def _bincount(ctx):
    arr = ctx.input(0)
    if arr.dtype is not None and arr.dtype != np.dtype(np.int32):
        raise ctx.fail(f"arr must be int32, got {arr.dtype}")
    size = const_ints(ctx, 1)
    return [TensorType(ctx.input(2).dtype, (size[0],) if size else (None,))]


op("CumProdGrad", domain=D, inputs=["dY", "X", "axis"], outputs=["dX"],
   attrs={"exclusive": Attr("int", 0), "reverse": Attr("int", 0)},
   doc="Gradient of CumProd, exact where X has zeros (no division by X).")(same_as_input(1))


@op("SumToShape", domain=D, inputs=["X", "like"], outputs=["Y"], differentiable=True,
    doc="Sum X down to the shape of ``like`` (undoes numpy broadcasting).")
def _sum_to_shape(ctx):
    return [TensorType(ctx.input(0).dtype, ctx.input(1).shape)]


op("ZerosLike", domain=D, inputs=["X"], outputs=["Y"])(same_as_input(0))
op("OnesLike", domain=D, inputs=["X"], outputs=["Y"])(same_as_input(0))
op("ReluGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"])(same_as_input(1))
op("SigmoidGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"])(same_as_input(1))
op("TanhGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"])(same_as_input(1))
op("SoftmaxGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"], attrs={"axis": Attr("int", -1)})(
    same_as_input(1))
op("LogSoftmaxGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"], attrs={"axis": Attr("int", -1)})(
    same_as_input(1))


@op("BroadcastReduceGrad", domain=D, inputs=["dY", "X"], outputs=["dX"],
    attrs={"axes": Attr("ints"), "keepdims": Attr("int", 1), "scale": Attr("string", "sum")},
    doc="Gradient of ReduceSum/ReduceMean: dY re-expanded to X's shape (divided by the count for mean).")
def _broadcast_reduce_grad(ctx):
    return [ctx.input(1)]


@op("ReduceExtremumGrad", domain=D, inputs=["dY", "X", "Y"], outputs=["dX"],
    attrs={"axes": Attr("ints"), "keepdims": Attr("int", 1)},
    doc="Gradient of ReduceMax/ReduceMin: dY split evenly over the positions that attain Y.")
def _reduce_extremum_grad(ctx):
    return [ctx.input(1)]


def _two_outputs(ctx):
    logits = ctx.input(0)
    batch = None if logits.shape is None else tuple(logits.shape[:-1])
    return [TensorType(logits.dtype, batch), logits]


op("SoftmaxCrossEntropyWithLogits", domain=D, inputs=["logits", "labels"], outputs=["loss", "backprop"],
   differentiable=True, doc="Per-example -sum(labels * log_softmax(logits)) and its gradient.")(_two_outputs)
op("SparseSoftmaxCrossEntropyWithLogits", domain=D, inputs=["logits", "labels"],
   outputs=["loss", "backprop"], differentiable=True,
   doc="As SoftmaxCrossEntropyWithLogits with integer class labels.")(_two_outputs)
op("ClipByGlobalNormScale", domain=D, inputs=["clip_norm", "tensors+"], outputs=["scale", "global_norm"],
   doc="min(1, clip_norm / global_norm) over all tensors, and global_norm.")(
    lambda ctx: [TensorType(ctx.input(1).dtype, ()), TensorType(ctx.input(1).dtype, ())])
