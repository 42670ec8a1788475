"""Gradients of reductions: re-expand dY over the reduced axes."""

from __future__ import annotations

from trainer.gradients.helpers import const_ints, fs, zero_grad
from trainer.gradients.registry import register_gradient


def _axes(node):
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        return const_ints(node.inputs[1], f"the axes of {node.name}")
    return node.attrs.get("axes")


def _spread(scale):
    def rule(node, grads):
        attrs = {"keepdims": node.attrs["keepdims"], "scale": scale}
        axes = _axes(node)
        if axes:
            attrs["axes"] = axes
        return [fs("BroadcastReduceGrad", [grads[0], node.inputs[0]], attrs)] + [None] * (len(node.inputs) - 1)

    return rule


def _extremum(node, grads):
    attrs = {"keepdims": node.attrs["keepdims"]}
    axes = _axes(node)
    if axes:
        attrs["axes"] = axes
    return [fs("ReduceExtremumGrad", [grads[0], node.inputs[0], node.outputs[0]], attrs)] + [None] * (len(node.inputs) - 1)


register_gradient("ReduceSum")(_spread("sum"))
register_gradient("ReduceMean")(_spread("mean"))
register_gradient("ReduceMax")(_extremum)
register_gradient("ReduceMin")(_extremum)
zero_grad("ArgMax", "ArgMin")
