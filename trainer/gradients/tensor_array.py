"""Gradients of TensorArray writes: a written element's gradient goes to the value written, the
rest of the flow's to the flow before the write."""

from __future__ import annotations

from trainer.gradients.helpers import fs
from trainer.gradients.registry import register_gradient


@register_gradient("TensorArrayScatter", domain="flowstack")
def _scatter(node, grads):
    if grads[0] is None:
        return [None] * 4
    flow, indices = node.inputs[:2]
    grad_flow, grad_value = fs("TensorArrayScatterGrad", [grads[0], flow, indices], n=2)
    return [grad_flow, None, grad_value, None]


@register_gradient("TensorArrayStack", domain="flowstack")
def _stack(node, grads):
    return [grads[0]]
