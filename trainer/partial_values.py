"""What a graph knows of a small integer tensor's values before it runs (TF's ``constant_value_as_shape``).

A shape built from pieces, ``tf.stack([tf.shape(x)[0], 32])`` or ``[batch, -1, 4]`` with a tensor
``batch``, is no constant, yet its known elements fix dimensions of what it shapes: TensorFlow 1.x
gives ``tf.zeros([tf.shape(x)[0], 32])`` the static shape (?, 32), and what reads a last dimension
at build time (``tf.layers.dense``, an RNN cell's weights) needs it. ``known_elements`` follows such
a tensor back through the ops shapes are built from to the elements it can tell, None for the rest;
shape rules read it through ``InferenceContext.known_ints``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from schemas.ops.shape import onnx_slice
from trainer import graph  # graph.create_op calls known_elements: read graph's names at call time

if TYPE_CHECKING:
    from trainer.graph import Node, Tensor

# Longer vectors are not shapes; deeper chains are not followed.
MAX_ELEMENTS = 64
MAX_DEPTH = 16

Elements = list  # list[int | None]


def known_elements(t: Tensor | None, depth: int = MAX_DEPTH) -> Elements | None:
    """The elements of ``t`` (an integer scalar or vector of at most MAX_ELEMENTS), flattened, each an
    int where known at build time and None where not; None when not even their number is known."""
    if t is None or depth <= 0:
        return None
    shape = t.type.shape
    if shape is None or len(shape) > 1 or (shape and (shape[0] is None or shape[0] > MAX_ELEMENTS)):
        return None
    dtype = t.type.dtype
    if dtype is not None and np.dtype(dtype).kind not in "iu":
        return None
    value = _constant_ints(t)
    if value is not None:
        return value
    rule = _RULES.get(t.node.op_type) if t.node.domain == "" else None
    found = rule(t.node, depth - 1) if rule is not None and t.index == 0 else None
    count = shape[0] if shape else 1
    if found is None or len(found) != count:
        return [None] * count
    return found


def _shape(node: Node, depth: int) -> Elements | None:
    dims = node.inputs[0].type.shape
    if dims is None:
        return None
    return list(dims[node.attrs.get("start") or 0:node.attrs.get("end")])


def _same_elements(node: Node, depth: int) -> Elements | None:
    """Squeeze, Unsqueeze, Reshape, Identity and integer Casts keep the elements in order."""
    return known_elements(node.inputs[0], depth)


def _concat(node: Node, depth: int) -> Elements | None:
    if node.attrs.get("axis") not in (0, -1):
        return None
    pieces = [known_elements(t, depth) for t in node.inputs]
    return None if any(p is None for p in pieces) else [e for p in pieces for e in p]


def _constant_ints(t: Tensor | None) -> list[int] | None:
    value = None if t is None else graph.constant_value(t)
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def _slice(node: Node, depth: int) -> Elements | None:
    data = known_elements(node.inputs[0], depth)
    starts, ends = (_constant_ints(t) for t in node.inputs[1:3])
    axes = _constant_ints(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] is not None else [0]
    steps = _constant_ints(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] is not None else [1]
    if None in (data, starts, ends, axes, steps) or len(starts) != 1 or axes[0] not in (0, -1) or steps[0] == 0:
        return None
    return data[onnx_slice(len(data), starts[0], ends[0], steps[0])]


def _gather(node: Node, depth: int) -> Elements | None:
    data = known_elements(node.inputs[0], depth)
    indices = _constant_ints(node.inputs[1])
    if data is None or indices is None or node.attrs.get("axis") not in (0, -1):
        return None
    n = len(data)
    if any(not -n <= i < n for i in indices):
        return None
    return [data[i] for i in indices]


_RULES: dict[str, Callable[[Node, int], Elements | None]] = {
    "Shape": _shape,
    "Concat": _concat,
    "Slice": _slice,
    "Gather": _gather,
    "Squeeze": _same_elements,
    "Unsqueeze": _same_elements,
    "Reshape": _same_elements,
    "Identity": _same_elements,
    "Cast": _same_elements,
}
