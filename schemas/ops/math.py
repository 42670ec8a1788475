"""Elementwise math, activations, comparisons, logic and matrix products."""

from __future__ import annotations

from schemas.ops.rules import BOOL, broadcast, same_as_input
from schemas.registry import Attr, TensorType, op

op("Relu", inputs=["X"], outputs=["Y"], differentiable=True)(same_as_input(0))

for _name in ("Add", "Sub", "Mul", "Div"):
    op(_name, inputs=["A", "B"], outputs=["C"], differentiable=True)(broadcast())

op("Equal", inputs=["A", "B"], outputs=["C"])(broadcast(BOOL))


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
    from schemas.ops.rules import broadcast_shapes

    batch = broadcast_shapes(ctx, [tuple(sa[:-2]), tuple(sb[:-2])])
    out = list(batch) + ([] if a_vec else [sa[-2]]) + ([] if b_vec else [sb[-1]])
    return [TensorType(a.dtype, tuple(out))]
