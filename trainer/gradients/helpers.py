"""Small helpers that make most gradient rules one line."""

from __future__ import annotations

import numpy as np

from schemas.op_table import registering_module
from trainer.graph import TRAINER_DOMAIN, GraphError, Node, Tensor, constant_value
from trainer.gradients.registry import NO_GRADIENT, register_gradient
from trainer.ops import make_op

D = TRAINER_DOMAIN


def fs(op_type: str, inputs, attrs=None, n: int | None = None):
    """Build a flowstack-domain helper op; its single output, or all outputs when ``n`` is given."""
    node = make_op(op_type, inputs, attrs or {}, domain=D, num_outputs=n)
    return node.outputs if n else node.outputs[0]


def onnx(op_type: str, inputs, attrs=None, n: int | None = None):
    node = make_op(op_type, inputs, attrs or {}, num_outputs=n)
    return node.outputs if n else node.outputs[0]


def unbroadcast(g: Tensor | None, like: Tensor, out: Tensor) -> Tensor | None:
    """Sum ``g`` (shaped like ``out``) down to ``like``'s shape where broadcasting expanded it."""
    if g is None:
        return None
    ls, os_ = like.shape, out.shape
    if ls is not None and os_ is not None and ls == os_ and None not in ls:
        return g
    if ls is not None and os_ is not None and ls == os_ and _no_broadcast_at_unknown(like, out):
        return g
    return fs("SumToShape", [g, like])


def _no_broadcast_at_unknown(like: Tensor, out: Tensor) -> bool:
    # An unknown dim of ``like`` equal to the output's is broadcast only if another input of the
    # node could be larger there; it can't when every other input has a known dim (or none) there.
    rank = len(like.shape)
    for other in out.node.inputs:
        if other is None or other is like:
            continue
        if other.shape is None:
            return False
        if len(other.shape) > rank:
            return False
        off = rank - len(other.shape)
        for i, d in enumerate(like.shape):
            if d is None and i >= off and other.shape[i - off] is None:
                return False
    return True


def binary(dfa, dfb):
    """Rule for a broadcasting binary op from two lambdas ``(g, a, b, y) -> partial``."""

    def rule(node: Node, grads):
        g = grads[0]
        a, b = node.inputs
        y = node.outputs[0]
        return [
            None if dfa is None else unbroadcast(dfa(g, a, b, y), a, y),
            None if dfb is None else unbroadcast(dfb(g, a, b, y), b, y),
        ]

    return rule


def unary(df):
    """Rule for a unary elementwise op from ``(g, x, y) -> dx``."""

    def rule(node: Node, grads):
        return [df(grads[0], node.inputs[0], node.outputs[0])] + [None] * (len(node.inputs) - 1)

    return rule


def linear(transpose):
    """Rule for an op linear in input 0: its gradient is its transpose applied to ``g``."""

    def rule(node: Node, grads):
        return [transpose(grads[0], node)] + [None] * (len(node.inputs) - 1)

    return rule


def zero_grad(*names: str, domain: str = "") -> None:
    """Declare that no gradient flows through ``names`` (filed under the caller's family)."""
    module = registering_module()
    for name in names:
        register_gradient(name, domain, module=module)(NO_GRADIENT)


def const_ints(t: Tensor | None, what: str) -> list[int] | None:
    if t is None:
        return None
    value = constant_value(t)
    if value is None:
        raise GraphError(f"gradient needs {what} ({t.name}) to be a constant")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def ints_const(values) -> Tensor:
    from trainer.ops import constant

    return constant(np.asarray(values, np.int64))


def via_composite(build):
    """Rule for an op whose gradient comes from an equivalent composite of differentiable ops.

    ``build(node, *inputs) -> output`` (or a list of outputs, in the node's order) rebuilds the
    op from primitives; the rule differentiates that rebuild (recomputing the forward once in the
    backward pass). One line per op, no hand-written adjoint, and the composite is checked
    against the op's kernel by the same finite-difference test as everything else.
    """

    def rule(node: Node, grads):
        from trainer.gradients.registry import gradients
        from trainer.ops import identity

        ins = [None if t is None else identity(t) for t in node.inputs]
        ys = build(node, *ins)
        ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
        used = [(y, g) for y, g in zip(ys, grads) if g is not None]
        wrt = [t for t in ins if t is not None and t.dtype is not None and t.dtype.kind == "f"]
        if not used or not wrt:
            return [None] * len(ins)
        got = dict(zip(wrt, gradients([y for y, _ in used], wrt, grad_ys=[g for _, g in used])))
        return [None if t is None else got.get(t) for t in ins]

    return rule
