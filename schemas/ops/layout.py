"""Channels-last ops (domain ``flowstack``): convolution and max pooling on (N, spatial..., C) tensors.

The exporter's ``to_channels_last`` pass rewrites chains of small-plane convolutions into them,
with Transposes only where the chain meets planar ops. Weights are stored (M, kernel..., C)
("OHWI", as TensorFlow Lite stores them), so a convolution's columns, gathered from the input in
runs of kernel_width * C contiguous values, meet its weights with no per-call reshuffle. Group 1
and depthwise convolutions (group = channels, one filter each: weights (C, kernel..., 1)) only; the
kernel refuses other groups.
``activation`` ("" for none) and ``activation_params`` are those of ``FusedConv``.
"""

from __future__ import annotations

from schemas.ops import fused, nn  # noqa: F401  (Conv, MaxPool and FusedConv are declared first)
from schemas.ops.fused import DOMAIN, check_activation
from schemas.registry import Attr, InferenceContext, ShapeError, TensorType, get_schema, op


def to_planar(shape):
    """(N, spatial..., C) -> (N, C, spatial...); None stays None."""
    return None if shape is None else (shape[0], shape[-1], *shape[1:-1])


def to_channels_last(shape):
    """(N, C, spatial...) -> (N, spatial..., C); None stays None."""
    return None if shape is None else (shape[0], *shape[2:], shape[1])


def _planar_rule(base: str, weights: bool):
    """The rule of ``base`` applied to the planar view of the inputs, its output made channels-last again."""

    def rule(ctx):
        if ctx.attrs.get("activation"):
            check_activation(ctx)
        types = [ctx.input(i) for i in range(ctx.num_inputs)]
        for i in (0, 1) if weights else (0,):
            types[i] = TensorType(types[i].dtype, to_planar(types[i].shape))
        schema = get_schema(base)
        attrs = {k: v for k, v in ctx.attrs.items() if k in schema.attrs}
        try:
            planar = schema.infer(InferenceContext(schema, types, attrs, (), ctx.num_outputs, ctx.name))
        except ShapeError as exc:
            raise ctx.fail(f"on the planar (N, C, spatial...) view of its inputs: {exc}") from None
        return [TensorType(t.dtype, to_channels_last(t.shape)) for t in planar]

    return rule


op(
    "ChannelsLastConv",
    domain=DOMAIN,
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs={**nn.CONV_ATTRS, "activation": Attr("string", ""), "activation_params": Attr("floats", [])},
    doc="Conv (group 1, or depthwise) on (N, spatial..., C) with (M, kernel..., C/group) weights, then an "
        "optional activation.",
)(_planar_rule("Conv", weights=True))

op(
    "ChannelsLastMaxPool",
    domain=DOMAIN,
    inputs=["X"],
    outputs=["Y"],
    attrs={k: v for k, v in get_schema("MaxPool").attrs.items() if k != "storage_order"},
    doc="MaxPool on (N, spatial..., C).",
)(_planar_rule("MaxPool", weights=False))
