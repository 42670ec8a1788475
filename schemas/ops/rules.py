"""Shape rule helpers shared by the op families: most ops need one of these, not a rule of their own."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from schemas.registry import InferenceContext, TensorType, UNKNOWN

BOOL = np.dtype(bool)
INT64 = np.dtype(np.int64)


def broadcast_shapes(
    ctx: InferenceContext, shapes: Sequence[tuple[int | None, ...] | None]
) -> tuple[int | None, ...] | None:
    """Numpy-style multidirectional broadcasting over partially known shapes."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)
    out: list[int | None] = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ctx.fail(f"shapes {[tuple(s) for s in shapes]} cannot be broadcast together")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def common_dtype(ctx: InferenceContext, indices: Sequence[int]) -> np.dtype | None:
    dtypes = {ctx.input(i).dtype for i in indices if ctx.input(i).dtype is not None}
    if len(dtypes) > 1:
        raise ctx.fail(f"inputs must share one dtype, got {sorted(str(d) for d in dtypes)}")
    return dtypes.pop() if dtypes else None


def same_as_input(index: int = 0):
    """Rule: one output with the type of input ``index`` (unary elementwise ops)."""

    def rule(ctx: InferenceContext) -> list[TensorType]:
        return [ctx.input(index)]

    return rule


def broadcast(output_dtype: np.dtype | None = None, same_dtype: bool = True):
    """Rule: one output whose shape broadcasts all inputs; dtype shared or fixed (comparisons)."""

    def rule(ctx: InferenceContext) -> list[TensorType]:
        present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
        shape = broadcast_shapes(ctx, [ctx.input(i).shape for i in present])
        dtype = common_dtype(ctx, present) if same_dtype else ctx.input(0).dtype
        return [TensorType(output_dtype if output_dtype is not None else dtype, shape)]

    return rule


def unknown_outputs(ctx: InferenceContext) -> list[TensorType]:
    """Rule for ops whose output shape depends on runtime data (NonZero, Unique, ...)."""
    return [UNKNOWN] * ctx.num_outputs


def normalize_axis(ctx: InferenceContext, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        raise ctx.fail(f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def const_ints(ctx: InferenceContext, index: int) -> list[int] | None:
    value = ctx.value(index)
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]
