"""Gradients of the row-routing ops (a stitch's gradient gathers each input's rows back) and of the
segment reductions."""

from __future__ import annotations

import numpy as np

from schemas.dtypes import from_numpy
from trainer.gradients.helpers import fs, onnx
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError
from trainer.ops import constant

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
    count = onnx("Size", [partitions])
    positions = onnx("Reshape", [onnx("Range", [constant(np.int64(0)), count, constant(np.int64(1))]),
                                 onnx("Shape", [partitions])])
    routed = fs("DynamicPartition", [positions, partitions], {"num_partitions": n}, n=n)
    filled = [g if g is not None else fs("ZerosLike", [out]) for g, out in zip(grads, node.outputs)]
    stitched = fs("DynamicStitch", [*routed, *filled], {"N": n})
    return [onnx("Reshape", [stitched, onnx("Shape", [data])]), None]


@register_gradient("UnsortedSegmentSum", D)
def _unsorted_segment_sum(node, grads):
    return [onnx("Gather", [grads[0], node.inputs[1]], {"axis": 0}), None, None]


def _segment_rows(node, what: str):
    """(data, ids clipped at 0, a flag per entry of data: its row's id is not negative)."""
    data, ids = node.inputs[0], node.inputs[1]
    if data.shape is None or ids.shape is None:
        raise GraphError(f"{node.name}: the {what} gradient needs the ranks of data and segment_ids")
    zero = constant(np.zeros((), ids.dtype))
    valid = onnx("GreaterOrEqual", [ids, zero])
    if len(data.shape) > len(ids.shape):  # one flag per row, broadcast over the row's entries
        valid = onnx("Unsqueeze", [valid, constant(np.arange(len(ids.shape), len(data.shape), dtype=np.int64))])
    return data, onnx("Max", [ids, zero]), valid


def _selected_rows_gradient(node, grad, num_segments):
    """TensorFlow's segment min/max gradient: each segment's gradient split evenly among the rows
    that attain its extreme (ties share), zero elsewhere; rows with a negative id get none."""
    data, clipped, valid = _segment_rows(node, "segment min/max")
    selected = onnx("And", [onnx("Equal", [data, onnx("Gather", [node.outputs[0], clipped], {"axis": 0})]), valid])
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


@register_gradient("UnsortedSegmentProd", D)
def _unsorted_segment_prod(node, grads):
    """TensorFlow's: d prod / d x_i is the product of the segment's other rows (the product over
    x_i where x_i != 0; that of the other rows' nonzeros where x_i is the segment's one zero; 0 where
    the segment has two zeros or more)."""
    data, clipped, valid = _segment_rows(node, "unsorted segment product")
    n = node.inputs[2]
    zero, one = constant(np.zeros((), data.dtype)), constant(np.ones((), data.dtype))
    is_zero = onnx("And", [onnx("Equal", [data, zero]), valid])
    zeros_in_segment = fs("UnsortedSegmentSum", [onnx("Cast", [is_zero], {"to": from_numpy(data.dtype)}), clipped, n])
    grad = onnx("Where", [onnx("Greater", [zeros_in_segment, one]), fs("ZerosLike", [grads[0]]), grads[0]])
    nonzero = onnx("Where", [is_zero, fs("OnesLike", [data]), data])
    nonzero_prod = fs("UnsortedSegmentProd", [nonzero, node.inputs[1], n])
    others = onnx("Where", [is_zero, onnx("Gather", [nonzero_prod, clipped], {"axis": 0}),
                            onnx("Div", [onnx("Gather", [node.outputs[0], clipped], {"axis": 0}), nonzero])])
    row_grad = onnx("Where", [valid, onnx("Gather", [grad, clipped], {"axis": 0}), fs("ZerosLike", [data])])
    return [onnx("Mul", [row_grad, others]), None, None]
