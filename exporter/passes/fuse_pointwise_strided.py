"""Fuse a 1x1 convolution into the strided depthwise convolution that reads it
(``flowstack::FusedPointwiseConv``).

MobileNet-style blocks expand the channels with a 1x1 convolution and then downsample with a
stride-2 depthwise convolution. Apart, the depthwise convolution gathers its taps from the
expanded tensor with a stride of 2; fused, the 1x1 convolution writes the expanded tensor already
split into stride phases, so every tap is a contiguous run (``edge_runtime.kernels.stride_phases``).
Measured, pair against the two nodes (batch 1 and 4, two host phases): 0.63-0.77 at 112x112,
0.65-0.77 at 56x56, 0.70-0.87 at 28x28, 1.12-1.33 at 14x14 (where the depthwise convolution runs
channels-last); so the pass fuses where the plane has at least MIN_PLANE_PIXELS pixels. MobileNetV2
at 224x224: 3 pairs, the model 0.91-0.93x.
"""

from __future__ import annotations

import math

from edge_runtime.kernels import has_kernel
from exporter import ir
from exporter.passes.fuse_pointwise import CONVS, fused_attrs, is_1x1_conv
from exporter.passes.graph_edit import constant, fuse_into_producers, producers, readers
from schemas.ops.fused import DOMAIN

FUSED = "FusedPointwiseConv"
MIN_PLANE_PIXELS = 28 * 28


def fuse_pointwise_strided(model: ir.Model) -> tuple[ir.Model, int]:
    """Fuse 1x1 (Fused)Conv + strided depthwise (Fused)Conv pairs; returns the new model and how
    many were fused."""
    if not has_kernel(FUSED, DOMAIN):
        return model, 0
    return fuse_into_producers(model, DOMAIN, _fuse)


def _strided_depthwise(graph: ir.Graph, conv: ir.Node) -> bool:
    """A 2-D depthwise convolution (one filter a channel) with constant weights, a stride above 1,
    dilations 1, and a static input plane of at least MIN_PLANE_PIXELS pixels."""
    if (conv.domain, conv.op_type) not in CONVS or len(conv.inputs) < 2:
        return False
    w = constant(graph, conv.inputs[1])
    bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
    value = graph.values.get(conv.inputs[0])
    x = None if value is None else value.shape  # the batch may be unknown (-1), the rest must not
    a = conv.attrs
    strides, dilations = list(a.get("strides") or [1, 1]), list(a.get("dilations") or [1, 1])
    if w is None or w.ndim != 4 or w.shape[1] != 1 or x is None or len(x) != 4 or any(d <= 0 for d in x[1:]):
        return False
    if bias and constant(graph, bias) is None:
        return False
    return ((a.get("group") or 1) == w.shape[0] == x[1] and math.prod(strides) > 1 and all(d == 1 for d in dilations)
            and x[2] * x[3] >= MIN_PLANE_PIXELS)


def _fuse(graph: ir.Graph, conv: ir.Node) -> bool:
    """Make the producer of ``conv``'s input the fused node when the pair qualifies; True when
    ``conv`` is now redundant."""
    if not _strided_depthwise(graph, conv):
        return False
    x = conv.inputs[0]
    pointwise = producers(graph).get(x)
    if pointwise is None or not is_1x1_conv(graph, pointwise):
        return False
    if x in graph.outputs or [id(n) for n in readers(graph).get(x, [])] != [id(conv)]:
        return False
    pointwise_inputs = list(pointwise.inputs) + [""] * (3 - len(pointwise.inputs))
    conv_inputs = list(conv.inputs) + [""] * (3 - len(conv.inputs))
    inputs = pointwise_inputs[:3] + conv_inputs[1:3]
    while not inputs[-1]:
        inputs.pop()
    pointwise.inputs = inputs
    pointwise.op_type, pointwise.domain = FUSED, DOMAIN
    pointwise.attrs = fused_attrs(conv, pointwise)
    pointwise.outputs = list(conv.outputs)
    return True
