"""Fuse an activation into the Conv or Gemm that feeds it (``flowstack::FusedConv`` / ``FusedGemm``).

Applies only where the edge runtime has the fused kernel, the linear op's output is read by the
activation alone, and the activation's parameters are constants. The fused node keeps the
activation's output name, so readers and graph outputs are untouched.
"""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import has_kernel
from exporter import ir
from exporter.passes.graph_edit import constant, fuse_into_producers, producers, readers
from schemas.ops.fused import ACTIVATIONS, DOMAIN

FUSED = {"Conv": "FusedConv", "Gemm": "FusedGemm"}


def fuse_activations(model: ir.Model) -> tuple[ir.Model, int]:
    """Fuse Conv/Gemm + activation pairs; returns the new model and how many were fused."""
    return fuse_into_producers(model, DOMAIN, _fuse)


def activation_params(graph: ir.Graph, node: ir.Node) -> list[float] | None:
    """The activation's parameters in ``ACTIVATIONS`` order, or None when they are not constant."""
    if node.op_type == "Clip":
        bounds = []
        for i, default in ((1, -np.inf), (2, np.inf)):
            name = node.inputs[i] if len(node.inputs) > i else ""
            value = constant(graph, name) if name else np.asarray(default)
            if value is None or value.size != 1:
                return None
            bounds.append(float(value.reshape(-1)[0]))
        return bounds
    defaults = {"LeakyRelu": {"alpha": 0.01}, "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
                "Swish": {"alpha": 1.0}}.get(node.op_type, {})
    return [float(node.attrs.get(p, defaults[p])) for p in ACTIVATIONS[node.op_type]]


def _fuse(graph: ir.Graph, act: ir.Node) -> bool:
    if act.domain != "" or act.op_type not in ACTIVATIONS:
        return False
    x = act.inputs[0]
    linear = producers(graph).get(x)
    if linear is None or linear.domain != "" or linear.op_type not in FUSED:
        return False
    if not has_kernel(FUSED[linear.op_type], DOMAIN):
        return False
    if x in graph.outputs or [id(n) for n in readers(graph).get(x, [])] != [id(act)]:
        return False
    params = activation_params(graph, act)
    if params is None:
        return False
    linear.op_type, linear.domain = FUSED[linear.op_type], DOMAIN
    linear.attrs = {**linear.attrs, "activation": act.op_type, "activation_params": params}
    linear.outputs = [act.outputs[0]]
    return True
