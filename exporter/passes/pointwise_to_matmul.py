"""Run channels-last 1x1 convolutions as products over the last axis (``flowstack::FusedMatMul``).

A 1x1 convolution with stride 1 and no padding on an (N, spatial..., C) tensor is one matmul of
its (pixels, C) rows by the weights. ``ChannelsLastConv`` stores those weights (M, 1..., C), which
the product reads transposed; stored (C, M), row-major, OpenBLAS multiplies faster where the rows
are few (one BLAS thread, us: 49 x 320 by 320 x 1280 243 -> 218, 49 x 960 by 960 x 160 96 -> 78,
196 x 96 by 96 x 576 105 -> 93). The pass runs after the channels-last rewrite and the
squeeze-excite fusion, which still read these convolutions as ChannelsLastConv.
"""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import has_kernel
from exporter import ir
from exporter.passes.graph_edit import add_constant, all_graphs, constant, copy_model
from schemas.ops.fused import DOMAIN

FUSED = "FusedMatMul"


def pointwise_to_matmul(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace channels-last 1x1 convolutions by FusedMatMul; returns the new model and how many."""
    if not has_kernel(FUSED, DOMAIN):
        return model, 0
    model = copy_model(model)
    changed = 0
    for graph in all_graphs(model.graph):
        for i, node in enumerate(graph.nodes):
            w = _pointwise_weights(graph, node)
            if w is None:
                continue
            weights = add_constant(graph, f"{node.inputs[1]}/io", np.ascontiguousarray(w.reshape(w.shape[0], -1).T))
            inputs = [node.inputs[0], weights] + ([node.inputs[2]] if len(node.inputs) > 2 and node.inputs[2] else [])
            attrs = {"activation": node.attrs.get("activation", ""),
                     "activation_params": list(node.attrs.get("activation_params") or [])}
            graph.nodes[i] = ir.Node(FUSED, inputs, list(node.outputs), attrs, node.name, DOMAIN)
            changed += 1
    return model, changed


def _pointwise_weights(graph: ir.Graph, node: ir.Node) -> np.ndarray | None:
    """The constant (M, 1..., C) weights of a ChannelsLastConv that is a 1x1 convolution with stride
    1, no padding and group 1, else None."""
    if (node.domain, node.op_type) != (DOMAIN, "ChannelsLastConv") or len(node.inputs) < 2:
        return None
    w = constant(graph, node.inputs[1])
    a = node.attrs
    if w is None or w.ndim < 3 or any(k != 1 for k in w.shape[1:-1]) or (a.get("group") or 1) != 1:
        return None
    if any(s != 1 for s in a.get("strides") or []) or any(a.get("pads") or []):
        return None
    return w if a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID") else None
