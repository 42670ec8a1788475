"""Gradients of the row-routing ops (a stitch's gradient gathers each input's rows back) and of the
segment reductions."""

from __future__ import annotations

import numpy as np

from schemas.dtypes import from_numpy
from trainer.gradients.helpers import fs, onnx
from trainer.graph import GraphError
from trainer.ops import constant
from trainer.gradients.registry import register_gradient

D = "flowstack"


@register_gradient("DynamicStitch", D)
def _dynamic_stitch(node, grads):
    n = node.attrs["N"]
    indices = node.inputs[:n]
    return [None] * n + [onnx("Gather", [grads[0], idx], {"axis": 0}) for idx in indices]


@register_gradient("DynamicPartition", D)
def _dynamic_partition(node, grads):
    """TensorFlow's: partition the rows' positions as the data was, then stitch the gradients back there."""
    data, partitions = node.inputs
    n = node.attrs["num_partitions"]
    positions = onnx("Reshape", [onnx("Range", [constant(np.int64(0)), onnx("Size", [partitions]), constant(np.int64(1))]),
                                 onnx("Shape", [partitions])])
    routed = fs("DynamicPartition", [positions, partitions], {"num_partitions": n}, n=n)
    filled = [g if g is not None else fs("ZerosLike", [out]) for g, out in zip(grads, node.outputs)]
    stitched = fs("DynamicStitch", [*routed, *filled], {"N": n})
    return [onnx("Reshape", [stitched, onnx("Shape", [data])]), None]


@register_gradient("UnsortedSegmentSum", D)
def _unsorted_segment_sum(node, grads):
    return [onnx("Gather", [grads[0], node.inputs[1]], {"axis": 0}), None, None]


def _selected_rows_gradient(node, grad, num_segments):
    """TensorFlow's segment min/max gradient: each segment's gradient split evenly among the rows
    that attain its extreme (ties share), zero elsewhere; rows with a negative id get none."""
    data, ids, out = node.inputs[0], node.inputs[1], node.outputs[0]
    if data.shape is None or ids.shape is None:
        raise GraphError(f"{node.name}: the segment min/max gradient needs the ranks of data and segment_ids")
    zero = constant(np.zeros((), ids.dtype))
    clipped = onnx("Max", [ids, zero])
    valid = onnx("GreaterOrEqual", [ids, zero])
    if len(data.shape) > len(ids.shape):  # one flag per row, broadcast over the row's entries
        valid = onnx("Unsqueeze", [valid, constant(np.arange(len(ids.shape), len(data.shape), dtype=np.int64))])
    selected = onnx("And", [onnx("Equal", [data, onnx("Gather", [out, clipped], {"axis": 0})]), valid])
    count = fs("UnsortedSegmentSum", [onnx("Cast", [selected], {"to": from_numpy(data.dtype)}), clipped, num_segments])
    share = onnx("Div", [grad, onnx("Max", [count, constant(np.ones((), data.dtype))])])
    return onnx("Where", [selected, onnx("Gather", [share, clipped], {"axis": 0}), fs("ZerosLike", [data])])


def _sorted_min_max(node, grads):
    rows = onnx("Gather", [onnx("Shape", [node.outputs[0]]), constant(np.zeros((1,), np.int64))], {"axis": 0})
    return [_selected_rows_gradient(node, grads[0], onnx("Squeeze", [rows])), None]


def _unsorted_min_max(node, grads):
    return [_selected_rows_gradient(node, grads[0], node.inputs[2]), None, None]


register_gradient("SegmentMax", D)(_sorted_min_max)
register_gradient("SegmentMin", D)(_sorted_min_max)
register_gradient("UnsortedSegmentMax", D)(_unsorted_min_max)
register_gradient("UnsortedSegmentMin", D)(_unsorted_min_max)
