"""Fuse a 1x1 convolution into the convolution that feeds it (``flowstack::FusedConvPointwise``).

A stride-1 convolution with a spatial window runs as flat im2col, which computes every output row
as wide as the padded input row and then crops the extra outputs into a copy. Fused, the 1x1
convolution reads the wide rows as they are and only its own output is cropped (MobileNetV2's
depthwise + project pairs: the project output has a sixth of the channels). The 1x1 then
multiplies the wide rows' extra columns too, so the pass fuses only where a padded row is at most
MAX_WIDE_ROW_WASTE wider than an output row (3x3 windows at 14x14 and up; at 7x7, 28% wider, the
pair ran 0.92-1.30x the time of the two nodes). Exact: the 1x1 convolution is per pixel, and the
cropped columns never mix into the kept ones.
"""

from __future__ import annotations

from edge_runtime.kernels import has_kernel
from exporter import ir
from exporter.passes.graph_edit import constant, fuse_into_producers, producers, readers
from schemas.ops.fused import DOMAIN

FUSED = "FusedConvPointwise"
MAX_WIDE_ROW_WASTE = 0.15

CONVS = {("", "Conv"), (DOMAIN, "FusedConv")}


def fuse_pointwise(model: ir.Model) -> tuple[ir.Model, int]:
    """Fuse (Fused)Conv + 1x1 (Fused)Conv pairs; returns the new model and how many were fused."""
    if not has_kernel(FUSED, DOMAIN):
        return model, 0
    return fuse_into_producers(model, DOMAIN, _fuse)


def _ones(values) -> bool:
    return all(v == 1 for v in (values or []))


def _zeros(values) -> bool:
    return all(v == 0 for v in (values or []))


def is_1x1_conv(graph: ir.Graph, node: ir.Node) -> bool:
    """A (Fused)Conv with constant 1x1 weights, stride 1, no pads and group 1."""
    w = constant(graph, node.inputs[1]) if len(node.inputs) > 1 else None
    a = node.attrs
    return (
        (node.domain, node.op_type) in CONVS
        and w is not None and w.ndim >= 3 and all(k == 1 for k in w.shape[2:])
        and (a.get("group") or 1) == 1
        and _ones(a.get("strides")) and _zeros(a.get("pads"))
        and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")
    )


def _wide_rows_pay(graph: ir.Graph, conv: ir.Node) -> bool:
    """A stride-1 2-D convolution with a window wider than 1, whose padded rows are at most
    MAX_WIDE_ROW_WASTE wider than its output rows (static shapes only)."""
    w = constant(graph, conv.inputs[1])
    a = conv.attrs
    y = graph.values.get(conv.outputs[0])
    if w is None or w.ndim != 4 or not _ones(a.get("strides")) or a.get("auto_pad", "NOTSET") != "NOTSET":
        return False
    if y is None or y.shape is None or len(y.shape) != 4 or y.shape[3] <= 0:
        return False
    width, window = y.shape[3], (w.shape[3] - 1) * max(list(a.get("dilations") or [1, 1])[-1], 1)
    return window > 0 and window / width <= MAX_WIDE_ROW_WASTE


def _fuse(graph: ir.Graph, pointwise: ir.Node) -> bool:
    """Make ``pointwise``'s producer the fused node when the pair qualifies; True when ``pointwise`` is now redundant."""
    if not is_1x1_conv(graph, pointwise):
        return False
    x = pointwise.inputs[0]
    conv = producers(graph).get(x)
    if conv is None or (conv.domain, conv.op_type) not in CONVS or not _wide_rows_pay(graph, conv):
        return False
    if x in graph.outputs or [id(n) for n in readers(graph).get(x, [])] != [id(pointwise)]:
        return False
    inputs = list(conv.inputs) + [""] * (3 - len(conv.inputs))
    b_pointwise = pointwise.inputs[2] if len(pointwise.inputs) > 2 else ""
    conv.inputs = inputs[:3] + [pointwise.inputs[1]] + ([b_pointwise] if b_pointwise else [])
    conv.op_type, conv.domain = FUSED, DOMAIN
    conv.attrs = fused_attrs(conv, pointwise)
    conv.outputs = list(pointwise.outputs)
    return True


def fused_attrs(conv: ir.Node, pointwise: ir.Node) -> dict:
    """The attributes of a node fusing ``conv`` (its window, its activation) and the 1x1
    ``pointwise`` convolution (its activation, under the ``pointwise_`` prefix)."""
    return {
        **conv.attrs,
        "activation": conv.attrs.get("activation", ""),
        "activation_params": list(conv.attrs.get("activation_params") or []),
        "pointwise_activation": pointwise.attrs.get("activation", ""),
        "pointwise_activation_params": list(pointwise.attrs.get("activation_params") or []),
    }
