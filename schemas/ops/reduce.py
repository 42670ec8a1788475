"""Reductions over axes (Reduce*), index reductions (ArgMax, ArgMin) and TopK."""

from __future__ import annotations

from schemas.ops.rules import INT64, const_ints, normalize_axis
from schemas.registry import Attr, TensorType, op

_REDUCE_ATTRS = {"keepdims": Attr("int", 1), "noop_with_empty_axes": Attr("int", 0)}


def _reduce(ctx):
    """Rule: the input's shape with ``axes`` (input 1) removed, or kept as 1 when keepdims."""
    x = ctx.input(0)
    keepdims = bool(ctx.attrs["keepdims"])
    if ctx.has_input(1):
        axes = const_ints(ctx, 1)
        if axes is None:  # axes only known when running
            rank_known = keepdims and x.shape is not None
            return [TensorType(x.dtype, (None,) * len(x.shape) if rank_known else None)]
    else:
        axes = []
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if not axes:
        if ctx.attrs["noop_with_empty_axes"]:
            return [x]
        axes = list(range(len(x.shape)))
    reduced = {normalize_axis(ctx, a, len(x.shape)) for a in axes}
    shape = tuple(1 if i in reduced else d for i, d in enumerate(x.shape) if keepdims or i not in reduced)
    return [TensorType(x.dtype, shape)]


op("ReduceSum", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceMean", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceMax", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceMin", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceProd", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceL1", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceL2", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceLogSum", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceLogSumExp", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)
op("ReduceSumSquare", inputs=["data", "axes?"], outputs=["reduced"], attrs=_REDUCE_ATTRS, differentiable=True)(_reduce)


def _arg_reduce(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(INT64, None)]
    axis = normalize_axis(ctx, ctx.attrs["axis"], len(x.shape))
    keepdims = bool(ctx.attrs["keepdims"])
    shape = tuple(1 if i == axis else d for i, d in enumerate(x.shape) if keepdims or i != axis)
    return [TensorType(INT64, shape)]


op("ArgMax", inputs=["data"], outputs=["reduced"],
   attrs={"axis": Attr("int", 0), "keepdims": Attr("int", 1), "select_last_index": Attr("int", 0)})(_arg_reduce)
op("ArgMin", inputs=["data"], outputs=["reduced"],
   attrs={"axis": Attr("int", 0), "keepdims": Attr("int", 1), "select_last_index": Attr("int", 0)})(_arg_reduce)


@op(
    "TopK", inputs=["X", "K"], outputs=["Values", "Indices"], differentiable=True,
    attrs={"axis": Attr("int", -1), "largest": Attr("int", 1), "sorted": Attr("int", 1)},
)
def _topk(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None), TensorType(INT64, None)]
    axis = normalize_axis(ctx, ctx.attrs["axis"], len(x.shape))
    k = const_ints(ctx, 1)
    if k is not None:
        if len(k) != 1 or k[0] < 0:
            raise ctx.fail(f"K must hold one non-negative value, got {k}")
        if x.shape[axis] is not None and k[0] > x.shape[axis]:
            raise ctx.fail(f"K={k[0]} exceeds axis {axis} of X {x.shape}")
    shape = tuple((k[0] if k is not None else None) if i == axis else d for i, d in enumerate(x.shape))
    return [TensorType(x.dtype, shape), TensorType(INT64, shape)]
