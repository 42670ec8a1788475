"""Gradients of shape ops: route dY back to where each element came from."""

from __future__ import annotations

import numpy as np

from schemas.dtypes import INT64
from trainer.gradients.helpers import (
    const_ints,
    fs,
    ints_const,
    onnx,
    unary,
    via_composite,
    zero_grad,
)
from trainer.gradients.registry import IndexedSlices, register_gradient
from trainer.graph import GraphError

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
    if len(node.inputs) == 1:
        return [grads[0]]
    if all(x.shape is not None and x.shape[axis] is not None for x in node.inputs):
        sizes = ints_const([x.shape[axis] for x in node.inputs])
    else:  # e.g. batches of run-time sizes concatenated along the batch axis
        sizes = onnx("Concat", [onnx("Gather", [onnx("Shape", [x]), ints_const([axis])], {"axis": 0})
                                for x in node.inputs], {"axis": 0})
    return list(onnx("Split", [grads[0], sizes], {"axis": axis}, n=len(node.inputs)))


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
        return [IndexedSlices(grads[0], indices, dense_like=params), None]
    return [fs("GatherGrad", [grads[0], indices, params], {"axis": axis}), None]


@reg("Expand")
def _expand(node, grads):
    return [fs("SumToShape", [grads[0], node.inputs[0]]), None]


zero_grad("Shape", "Size", "ConstantOfShape")
reg("Identity")(unary(lambda g, x, y: g))
register_gradient("IdentityN", "flowstack")(lambda node, grads: list(grads))


@reg("Tile")
def _tile(node, grads):
    # dY viewed as (r0, s0, r1, s1, ...) sums over the repeat axes.
    x, repeats = node.inputs
    reps = const_ints(repeats, "Tile repeats")
    if x.shape is not None and None not in x.shape:
        split = ints_const([d for r, s in zip(reps, x.shape) for d in (r, s)])
    else:  # a dynamic dim (a batch): interleave the repeats with the input's run-time shape
        pairs = [onnx("Unsqueeze", [t, ints_const([1])]) for t in (ints_const(reps), onnx("Shape", [x]))]
        split = onnx("Reshape", [onnx("Concat", pairs, {"axis": 1}), ints_const([-1])])
    summed = onnx("ReduceSum", [onnx("Reshape", [grads[0], split]),
                                ints_const(list(range(0, 2 * len(reps), 2)))], {"keepdims": 0})
    return [summed, None]


@reg("Pad")
def _pad(node, grads):
    if node.attrs["mode"] != "constant":
        return via_composite(_pad_as_gathers)(node, grads)
    # Constant padding's transpose pads dY by the negated widths: what was added is cropped off,
    # what was cropped (negative pads) comes back as zeros.
    axes = node.inputs[3] if len(node.inputs) > 3 else None
    dx = onnx("Pad", [grads[0], onnx("Neg", [node.inputs[1]]), None, axes], {"mode": "constant"})
    return [dx] + [None] * (len(node.inputs) - 1)


def _pad_as_gathers(node, x, pads, constant_value=None, axes=None):
    """Edge, reflect and wrap padding as one Gather per padded axis (the kernel crops negative
    pads first, then pads by what is left); the Gathers' gradients scatter-add dY back."""
    if x.shape is None:
        raise GraphError(f"Pad {node.name!r}: the gradient of mode {node.attrs['mode']!r} needs the input's rank")
    rank = len(x.shape)
    widths = const_ints(node.inputs[1], "Pad pads")
    axes = [a % rank for a in const_ints(node.inputs[3], "Pad axes")] if axes is not None else list(range(rank))
    y = x
    for a, lo, hi in zip(axes, widths[: len(axes)], widths[len(axes):]):
        if lo == 0 and hi == 0:
            continue
        if x.shape[a] is None:
            raise GraphError(f"Pad {node.name!r}: the gradient of mode {node.attrs['mode']!r} needs axis {a} "
                             f"of {x.name} to be static, got {x.shape}")
        y = onnx("Gather", [y, ints_const(_pad_source(x.shape[a], lo, hi, node.attrs["mode"]))], {"axis": a})
    return y


def _pad_source(size: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """For each position along a padded axis, the input position it copies."""
    first, kept = max(-lo, 0), size + min(lo, 0) + min(hi, 0)
    q = np.arange(-max(lo, 0), kept + max(hi, 0))
    if mode == "edge":
        local = np.clip(q, 0, kept - 1)
    elif mode == "wrap":
        local = q % kept
    elif kept == 1:  # reflect about a single element
        local = np.zeros_like(q)
    else:
        r = q % (2 * (kept - 1))
        local = np.where(r < kept, r, 2 * (kept - 1) - r)
    return first + local


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
        return via_composite(_gather_nd_unbatched)(node, grads)
    data, idx = node.inputs
    return [onnx("ScatterND", [fs("ZerosLike", [data]), idx, grads[0]], {"reduction": "add"}), None]


def _gather_nd_unbatched(node, data, idx):
    """GatherND with batch_dims as one without: the batch dims of the data flattened into one, and
    each index tuple prefixed with its position in it."""
    b = node.attrs["batch_dims"]
    if data.shape is None or None in data.shape[1:] or idx.shape is None or None in idx.shape[:-1]:
        raise GraphError(f"GatherND {node.name!r}: the gradient with batch_dims needs static shapes, "
                         f"got data {data.shape} and indices {idx.shape}")
    flat = onnx("Reshape", [data, ints_const([-1, *data.shape[b:]])])
    batch = np.arange(int(np.prod(idx.shape[:b]))).reshape(tuple(idx.shape[:b]) + (1,) * (len(idx.shape) - b))
    prefix = np.broadcast_to(batch, tuple(idx.shape[:-1]) + (1,)).astype(np.int64)
    tuples = onnx("Concat", [ints_const(prefix), onnx("Cast", [idx], {"to": INT64})], {"axis": -1})
    return onnx("GatherND", [flat, tuples])


def _scatter_rule(scatter, gather, with_axis):
    def rule(node, grads):
        reduction = node.attrs.get("reduction", "none")
        if reduction not in ("none", "add"):
            raise NotImplementedError(f"{node.op_type} gradient supports reduction 'none' and 'add', not {reduction!r}")
        _, idx, upd = node.inputs
        attrs = {"axis": node.attrs["axis"]} if with_axis else {}
        ddata = grads[0]
        if reduction == "none":  # overwritten entries get none
            ddata = onnx(scatter, [grads[0], idx, fs("ZerosLike", [upd])], attrs)
        # ScatterElements: GatherElements reads only the leading part of the data where indices (and updates) are
        # shorter than it on the other axes, as ScatterElements wrote them.
        dupd = onnx(gather, [grads[0], idx], attrs)
        return [ddata, None, dupd]

    return rule


reg("ScatterElements")(_scatter_rule("ScatterElements", "GatherElements", True))
reg("Scatter")(_scatter_rule("ScatterElements", "GatherElements", True))
reg("ScatterND")(_scatter_rule("ScatterND", "GatherND", False))


# -- selection ------------------------------------------------------------------------------------
# Gradients of ops that keep part of a tensor (Compress, CenterCropPad): dY goes back to the
# positions it was taken from, zeros elsewhere.


def _compress(node, x, condition):
    # The kept positions as a Gather, whose gradient scatters dY back (condition may be shorter
    # than the axis: the rest is dropped, as NonZero never names it).
    kept = onnx("Squeeze", [onnx("NonZero", [condition]), ints_const([0])])
    axis = node.attrs["axis"]
    if axis is None:
        return onnx("Gather", [onnx("Reshape", [x, ints_const([-1])]), kept], {"axis": 0})
    return onnx("Gather", [x, kept], {"axis": axis})


reg("Compress")(via_composite(_compress))


@reg("CenterCropPad")
def _center_crop_pad(node, grads):
    # Cropping and padding centred the same way are each other's transpose: crop/pad dY back.
    x = node.inputs[0]
    if x.shape is None:
        raise GraphError(f"CenterCropPad gradient needs the rank of {x.name}")
    rank = len(x.shape)
    axes = [a % rank for a in (node.attrs["axes"] or range(rank))]
    if None not in (x.shape[a] for a in axes):
        size = ints_const([x.shape[a] for a in axes])
    else:
        size = onnx("Gather", [onnx("Shape", [x]), ints_const(axes)], {"axis": 0})
    return [onnx("CenterCropPad", [grads[0], size], {"axes": axes}), None]


@reg("SliceGrad", "flowstack")
def _slice_grad(node, grads):
    """SliceGrad writes dY into zeros: its transpose slices the same window back out (second derivatives)."""
    attrs = node.attrs
    inputs = [grads[0], ints_const(attrs["starts"]), ints_const(attrs["ends"])]
    if attrs.get("axes"):
        inputs.append(ints_const(attrs["axes"]))
    if attrs.get("steps"):
        if len(inputs) == 3:
            inputs.append(ints_const(list(range(len(attrs["starts"])))))
        inputs.append(ints_const(attrs["steps"]))
    return [onnx("Slice", inputs), None]
