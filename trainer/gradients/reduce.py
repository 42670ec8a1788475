"""Gradients of reductions: re-expand dY over the reduced axes."""

from __future__ import annotations

from trainer.gradients.helpers import const_ints, fs, onnx, zero_grad
from trainer.gradients.registry import register_gradient


def _axes(node):
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return const_ints(node.inputs[1], f"the axes of {node.name}")
    return node.attrs.get("axes")


def _is_noop(node) -> bool:
    """No axes and noop_with_empty_axes: the reduction reduces nothing (an elementwise op)."""
    return not _axes(node) and bool(node.attrs.get("noop_with_empty_axes"))


def _spread(scale):
    def rule(node, grads):
        rest = [None] * (len(node.inputs) - 1)
        if _is_noop(node):
            return [grads[0]] + rest
        attrs = {"keepdims": node.attrs["keepdims"], "scale": scale}
        axes = _axes(node)
        if axes:
            attrs["axes"] = axes
        return [fs("BroadcastReduceGrad", [grads[0], node.inputs[0]], attrs)] + rest

    return rule


def _extremum(node, grads):
    rest = [None] * (len(node.inputs) - 1)
    if _is_noop(node):
        return [grads[0]] + rest
    attrs = {"keepdims": node.attrs["keepdims"]}
    axes = _axes(node)
    if axes:
        attrs["axes"] = axes
    return [fs("ReduceExtremumGrad", [grads[0], node.inputs[0], node.outputs[0]], attrs)] + rest


register_gradient("ReduceSum")(_spread("sum"))
register_gradient("ReduceMean")(_spread("mean"))
register_gradient("ReduceMax")(_extremum)
register_gradient("ReduceMin")(_extremum)
zero_grad("ArgMax", "ArgMin")


def _expanded(node, t):
    """``t`` (shaped like the reduction's output) broadcast back to the input's shape."""
    if _is_noop(node):
        return t
    attrs = {"keepdims": node.attrs["keepdims"], "scale": "sum"}
    axes = _axes(node)
    if axes:
        attrs["axes"] = axes
    return fs("BroadcastReduceGrad", [t, node.inputs[0]], attrs)


def _via(local):
    """Rule for a reduction whose gradient is dY (expanded) times ``local(x, y_expanded)``."""

    def rule(node, grads):
        x = node.inputs[0]
        return [_expanded(node, grads[0]) * local(x, _expanded(node, node.outputs[0]))] + [None] * (len(node.inputs) - 1)

    return rule


register_gradient("ReduceSumSquare")(_via(lambda x, y: x * 2.0))
register_gradient("ReduceL1")(_via(lambda x, y: onnx("Sign", [x])))
register_gradient("ReduceL2")(_via(lambda x, y: x / y))
register_gradient("ReduceLogSum")(_via(lambda x, y: onnx("Reciprocal", [onnx("Exp", [y])])))
register_gradient("ReduceLogSumExp")(_via(lambda x, y: onnx("Exp", [x - y])))
register_gradient("ReduceProd")(_via(lambda x, y: y / x))


@register_gradient("TopK")
def _top_k(node, grads):
    x = node.inputs[0]
    zeros = fs("ZerosLike", [x])
    dx = onnx("ScatterElements", [zeros, node.outputs[1], grads[0]], {"axis": node.attrs["axis"], "reduction": "add"})
    return [dx, None]
