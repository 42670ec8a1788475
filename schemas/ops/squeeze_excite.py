"""Squeeze-excite and the 1x1 convolution that reads it, in one node (domain ``flowstack``).

EfficientNet-style blocks gate their channels by a function of the channel means, then project:

    s = ReduceMean(X over the spatial axes)                 (N, C) means
    r = reduce_activation(Conv1x1(s, W_reduce, B_reduce))   (N, R)
    g = gate_activation(Conv1x1(r, W_expand, B_expand))     (N, C) gates
    Y = activation(Conv1x1(X * g, W, B))                    (N, M, spatial...)

The exporter's ``fuse_squeeze_excite`` pass writes it; the edge runtime scales the projection's
weights by the gates instead of the input where that is fewer multiplies, and runs the gate's two
tiny convolutions as products of (N, C) rows. Planar (``channels_last`` 0), every weight is a 1x1
convolution's, (M, C, 1...). With ``channels_last`` 1, X and Y are (N, spatial..., C), the gate's
weights are stored as ``ChannelsLastConv`` stores them, (M, 1..., C), and the projection's as
``FusedMatMul`` reads them, (C, M): row-major for the product of X's rows. Activations are
``FusedConv``'s ("" for none).
"""

from __future__ import annotations

from schemas.ops import fused  # noqa: F401  (the activations are checked as FusedConv's)
from schemas.ops.fused import DOMAIN, check_activation
from schemas.registry import Attr, TensorType, op

# input index, its name in messages, and the value whose channel count it reads
WEIGHTS = ((1, "W_reduce", "C"), (3, "W_expand", "R"), (5, "W", "C"))
PROJECTION = 5


def _one_by_one(ctx, index: int, label: str, channels_last: bool) -> tuple[int | None, int | None]:
    """(out channels, in channels) of a 1x1 weight in the node's layout, None where unknown."""
    shape = ctx.input(index).shape
    if shape is None:
        return None, None
    if channels_last and index == PROJECTION:
        if len(shape) != 2:
            raise ctx.fail(f"{label} must be the projection's (C, M) matrix, got shape {shape}")
        return shape[1], shape[0]
    spatial = shape[1:-1] if channels_last else shape[2:]
    if len(shape) < 3 or any(d not in (None, 1) for d in spatial):
        layout = "(M, 1..., C)" if channels_last else "(M, C, 1...)"
        raise ctx.fail(f"{label} must be a 1x1 convolution's weights {layout}, got shape {shape}")
    return shape[0], shape[-1] if channels_last else shape[1]


def _rule(ctx):
    for key in ("reduce_activation", "gate_activation", "activation"):
        if ctx.attrs.get(key):
            check_activation(ctx, key)
    channels_last = bool(ctx.attrs["channels_last"])
    x = ctx.input(0)
    if x.shape is not None and len(x.shape) < 3:
        raise ctx.fail(f"X must have a batch, a channel and spatial axes, got shape {x.shape}")
    seen = {"C": None if x.shape is None else x.shape[-1] if channels_last else x.shape[1]}
    made = {}
    for (index, label, reads), makes in zip(WEIGHTS, ("R", "C", "M")):
        out, into = _one_by_one(ctx, index, label, channels_last)
        if None not in (into, seen[reads]) and into != seen[reads]:
            raise ctx.fail(f"{label} reads {into} channels where there are {seen[reads]}")
        if makes in seen and None not in (out, seen[makes]) and out != seen[makes]:
            raise ctx.fail(f"{label} makes {out} channels where X has {seen[makes]}")
        seen.setdefault(makes, out)
        made[makes] = out
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    shape = (x.shape[:-1] + (made["M"],)) if channels_last else (x.shape[0], made["M"]) + tuple(x.shape[2:])
    return [TensorType(x.dtype, shape)]


op(
    "SqueezeExciteConv",
    domain=DOMAIN,
    inputs=["X", "W_reduce", "B_reduce?", "W_expand", "B_expand?", "W", "B?"],
    outputs=["Y"],
    attrs={
        "channels_last": Attr("int", 0),
        "reduce_activation": Attr("string", ""),
        "reduce_activation_params": Attr("floats", []),
        "gate_activation": Attr("string", ""),
        "gate_activation_params": Attr("floats", []),
        "activation": Attr("string", ""),
        "activation_params": Attr("floats", []),
    },
    doc="X gated by its squeeze-excite (mean over the plane, two 1x1 convolutions), then a 1x1 convolution.",
)(_rule)
