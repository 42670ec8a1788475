"""Gradients of shape ops: route dY back to where each element came from."""

from __future__ import annotations

import numpy as np

from trainer.gradients.helpers import const_ints, fs, ints_const, onnx, zero_grad
from trainer.gradients.registry import IndexedSlices, register_gradient

reg = register_gradient


def _reshape_back(node, grads):
    x = node.inputs[0]
    shape = list(x.shape) if x.shape is not None and None not in x.shape else None
    target = ints_const(shape) if shape is not None else onnx("Shape", [x])
    return [onnx("Reshape", [grads[0], target])] + [None] * (len(node.inputs) - 1)


for _name in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
    reg(_name)(_reshape_back)


@reg("Transpose")
def _transpose(node, grads):
    perm = node.attrs.get("perm")
    if perm is None:
        perm = list(range(len(node.inputs[0].shape)))[::-1]
    return [onnx("Transpose", [grads[0]], {"perm": [int(i) for i in np.argsort(perm)]})]


@reg("Concat")
def _concat(node, grads):
    axis = node.attrs["axis"]
    sizes = []
    for x in node.inputs:
        if x.shape is None or x.shape[axis] is None:
            raise NotImplementedError(f"Concat gradient needs static sizes along axis {axis}")
        sizes.append(x.shape[axis])
    if len(sizes) == 1:
        return [grads[0]]
    return list(onnx("Split", [grads[0], ints_const(sizes)], {"axis": axis}, n=len(sizes)))


@reg("Split")
def _split(node, grads):
    parts = [g if g is not None else fs("ZerosLike", [o]) for g, o in zip(grads, node.outputs)]
    return [onnx("Concat", parts, {"axis": node.attrs["axis"]})] + [None] * (len(node.inputs) - 1)


@reg("Slice")
def _slice(node, grads):
    x, starts, ends = node.inputs[:3]
    axes = node.inputs[3] if len(node.inputs) > 3 else None
    steps = node.inputs[4] if len(node.inputs) > 4 else None
    attrs = {"starts": const_ints(starts, "Slice starts"), "ends": const_ints(ends, "Slice ends")}
    if axes is not None:
        attrs["axes"] = const_ints(axes, "Slice axes")
    if steps is not None:
        attrs["steps"] = const_ints(steps, "Slice steps")
    return [fs("SliceGrad", [grads[0], x], attrs)] + [None] * (len(node.inputs) - 1)


@reg("Gather")
def _gather(node, grads):
    params, indices = node.inputs
    axis = node.attrs["axis"]
    if axis == 0:
        # Embedding lookups: only the gathered rows get gradient, as indexed slices.
        return [IndexedSlices(grads[0], indices, params), None]
    return [fs("GatherGrad", [grads[0], indices, params], {"axis": axis}), None]


@reg("Expand")
def _expand(node, grads):
    return [fs("SumToShape", [grads[0], node.inputs[0]]), None]


@reg("SumToShape", "flowstack")
def _sum_to_shape(node, grads):
    return [onnx("Expand", [grads[0], onnx("Shape", [node.inputs[0]])]), None]


zero_grad("Shape", "Size", "ConstantOfShape")
zero_grad("ZerosLike", "OnesLike", domain="flowstack")
