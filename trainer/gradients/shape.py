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


@reg("Tile")
def _tile(node, grads):
    x, repeats = node.inputs
    reps = const_ints(repeats, "Tile repeats")
    if x.shape is None or None in x.shape:
        raise NotImplementedError("Tile gradient needs a static input shape")
    split = [d for r, s in zip(reps, x.shape) for d in (r, s)]
    summed = onnx("ReduceSum", [onnx("Reshape", [grads[0], ints_const(split)]),
                                ints_const(list(range(0, 2 * len(reps), 2)))], {"keepdims": 0})
    return [summed, None]


@reg("Pad")
def _pad(node, grads):
    if node.attrs["mode"] != "constant":
        raise NotImplementedError(f"Pad gradient supports mode 'constant', not {node.attrs['mode']!r}")
    x = node.inputs[0]
    pads = const_ints(node.inputs[1], "Pad pads")
    rank = len(x.shape)
    axes = const_ints(node.inputs[3], "Pad axes") if len(node.inputs) > 3 and node.inputs[3] is not None \
        else list(range(rank))
    n = len(axes)
    big = np.iinfo(np.int64).max
    starts = pads[:n]
    ends = [-e if e > 0 else big for e in pads[n:]]
    dx = onnx("Slice", [grads[0], ints_const(starts), ints_const(ends), ints_const(axes)])
    return [dx] + [None] * (len(node.inputs) - 1)


@reg("Trilu")
def _trilu(node, grads):
    return [onnx("Trilu", [grads[0]] + node.inputs[1:], {"upper": node.attrs["upper"]})] + [None] * (len(node.inputs) - 1)


@reg("CumSum")
def _cumsum(node, grads):
    attrs = {"exclusive": node.attrs["exclusive"], "reverse": 1 - node.attrs["reverse"]}
    return [onnx("CumSum", [grads[0], node.inputs[1]], attrs), None]


@reg("ReverseSequence")
def _reverse_sequence(node, grads):
    return [onnx("ReverseSequence", [grads[0], node.inputs[1]], dict(node.attrs)), None]


@reg("GatherElements")
def _gather_elements(node, grads):
    data, idx = node.inputs
    zeros = fs("ZerosLike", [data])
    return [onnx("ScatterElements", [zeros, idx, grads[0]], {"axis": node.attrs["axis"], "reduction": "add"}), None]


@reg("GatherND")
def _gather_nd(node, grads):
    if node.attrs["batch_dims"]:
        raise NotImplementedError("GatherND gradient supports batch_dims=0")
    data, idx = node.inputs
    return [onnx("ScatterND", [fs("ZerosLike", [data]), idx, grads[0]], {"reduction": "add"}), None]


def _scatter_rule(scatter, gather, with_axis):
    def rule(node, grads):
        if node.attrs.get("reduction", "none") != "none":
            raise NotImplementedError(f"{node.op_type} gradient supports reduction='none'")
        data, idx, upd = node.inputs
        attrs = {"axis": node.attrs["axis"]} if with_axis else {}
        ddata = onnx(scatter, [grads[0], idx, fs("ZerosLike", [upd])], attrs)  # overwritten entries get none
        dupd = onnx(gather, [grads[0], idx], attrs)
        return [ddata, None, dupd]

    return rule


reg("ScatterElements")(_scatter_rule("ScatterElements", "GatherElements", True))
reg("Scatter")(_scatter_rule("ScatterElements", "GatherElements", True))
reg("ScatterND")(_scatter_rule("ScatterND", "GatherND", False))


@reg("DepthToSpace")
def _depth_to_space(node, grads):
    if node.attrs.get("mode", "DCR") != "DCR":
        raise NotImplementedError("DepthToSpace gradient supports mode DCR")
    return [onnx("SpaceToDepth", [grads[0]], {"blocksize": node.attrs["blocksize"]})]


@reg("SpaceToDepth")
def _space_to_depth(node, grads):
    return [onnx("DepthToSpace", [grads[0]], {"blocksize": node.attrs["blocksize"], "mode": "DCR"})]
