"""Fuse a squeeze-excite gate and the 1x1 convolution that reads the gated tensor
(``flowstack::SqueezeExciteConv``).

EfficientNet-style blocks end in

    s = ReduceMean(x, spatial axes, keepdims)    (or GlobalAveragePool, planar)
    g = act2(Conv1x1(act1(Conv1x1(s))))          two convolutions of 1x1 planes
    y = Conv1x1(x * g)                           the projection

five nodes, two of them convolution kernels called on a few hundred values, and the Mul a pass
over x. Fused, the gate is two small row products and the gates scale the projection's weights
(``edge_runtime.kernels.squeeze_excite``; channels-last, those are stored (C, M)). Planar chains
and the channels-last ones the ``to_channels_last`` pass writes (``ChannelsLastConv``, means over
axes 1..-2) both fuse; every value inside the chain must be read by the chain alone.
"""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import has_kernel
from exporter import ir
from exporter.passes.fuse_pointwise import is_1x1_conv
from exporter.passes.graph_edit import add_constant, constant
from exporter.passes.pattern import ChainReader, rewrite_matches
from schemas.ops.fused import DOMAIN

FUSED = "SqueezeExciteConv"


def fuse_squeeze_excite(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace squeeze-excite chains and their projection by SqueezeExciteConv; returns the new
    model and how many were replaced."""
    if not has_kernel(FUSED, DOMAIN):
        return model, 0
    model, found = rewrite_matches(model, _match)
    if found:
        model.opset_imports.setdefault(DOMAIN, 1)
    return model, found


def _is_channels_last_1x1(graph: ir.Graph, node: ir.Node) -> bool:
    """A ChannelsLastConv with constant (M, 1..., C) weights, stride 1, no pads and group 1."""
    if (node.domain, node.op_type) != (DOMAIN, "ChannelsLastConv") or len(node.inputs) < 2:
        return False
    w = constant(graph, node.inputs[1])
    a = node.attrs
    return (w is not None and w.ndim >= 3 and all(k == 1 for k in w.shape[1:-1]) and (a.get("group") or 1) == 1
            and all(s == 1 for s in a.get("strides") or []) and not any(a.get("pads") or [])
            and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID"))


def _is_1x1(graph: ir.Graph, node: ir.Node | None, channels_last: bool) -> bool:
    if node is None:
        return False
    return _is_channels_last_1x1(graph, node) if channels_last else is_1x1_conv(graph, node)


def _spatial_mean_of(reader: ChainReader, node: ir.Node | None, rank: int, channels_last: bool) -> bool:
    """``node`` averages its input over exactly the spatial axes, keeping them."""
    if node is None or node.domain != "":
        return False
    if node.op_type == "GlobalAveragePool":
        return not channels_last
    if node.op_type != "ReduceMean" or node.attrs.get("keepdims", 1) != 1:
        return False
    axes = constant(reader.graph, node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    if axes is None:
        axes = node.attrs.get("axes")  # before opset 18, an attribute
    if axes is None:
        return False
    spatial = range(1, rank - 1) if channels_last else range(2, rank)
    return sorted(int(a) % rank for a in np.asarray(axes).reshape(-1)) == list(spatial)


def _bias(node: ir.Node) -> str:
    return node.inputs[2] if len(node.inputs) > 2 else ""


def _match(reader: ChainReader, project: ir.Node) -> tuple[list[ir.Node], ir.Node] | None:
    channels_last = project.op_type == "ChannelsLastConv"
    if not _is_1x1(reader.graph, project, channels_last):
        return None
    mul = reader.producer(project.inputs[0], "Mul")
    if mul is None or len(mul.inputs) != 2 or not reader.only_read_by(mul.outputs[0], project):
        return None
    for x, g in (mul.inputs, mul.inputs[::-1]):
        expand = reader.made.get(g)
        if not _is_1x1(reader.graph, expand, channels_last) or not reader.only_read_by(g, mul):
            continue
        squeeze = reader.made.get(expand.inputs[0])
        if not _is_1x1(reader.graph, squeeze, channels_last) or not reader.only_read_by(expand.inputs[0], expand):
            continue
        mean = reader.made.get(squeeze.inputs[0])
        value = reader.graph.values.get(x)
        if value is None or value.shape is None or len(value.shape) < 3 or mean is None or mean.inputs[0] != x:
            continue
        if not _spatial_mean_of(reader, mean, len(value.shape), channels_last):
            continue
        if not reader.only_read_by(mean.outputs[0], squeeze):
            continue
        projection = project.inputs[1]
        if channels_last:  # (M, 1..., C) -> (C, M), as the product of X's rows reads it fastest
            w = constant(reader.graph, projection)
            projection = add_constant(reader.graph, f"{projection}/io", w.reshape(w.shape[0], -1).T)
        inputs = [x, squeeze.inputs[1], _bias(squeeze), expand.inputs[1], _bias(expand), projection, _bias(project)]
        while not inputs[-1]:
            inputs.pop()
        attrs = {"channels_last": int(channels_last)}
        for prefix, node in (("reduce_", squeeze), ("gate_", expand), ("", project)):
            attrs[f"{prefix}activation"] = node.attrs.get("activation", "")
            attrs[f"{prefix}activation_params"] = list(node.attrs.get("activation_params") or [])
        fused = ir.Node(FUSED, inputs, list(project.outputs), attrs, project.name, DOMAIN)
        return [mean, squeeze, expand, mul, project], fused
    return None
