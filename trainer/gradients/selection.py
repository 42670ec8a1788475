"""Gradients of ops that keep part of a tensor (Compress, CenterCropPad): dY goes back to the
positions it was taken from, zeros elsewhere."""

from __future__ import annotations

from trainer.gradients.helpers import ints_const, onnx, via_composite
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError

reg = register_gradient


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
