"""Gradients of the row-routing ops: a stitch's gradient gathers each input's rows back."""

from __future__ import annotations

from trainer.gradients.helpers import onnx
from trainer.gradients.registry import register_gradient

D = "flowstack"


@register_gradient("DynamicStitch", D)
def _dynamic_stitch(node, grads):
    n = node.attrs["N"]
    indices = node.inputs[:n]
    return [None] * n + [onnx("Gather", [grads[0], idx], {"axis": 0}) for idx in indices]


@register_gradient("UnsortedSegmentSum", D)
def _unsorted_segment_sum(node, grads):
    return [onnx("Gather", [grads[0], node.inputs[1]], {"axis": 0}), None, None]
