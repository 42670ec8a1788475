"""Store a Gemm's constant weight as (N, K) with ``transB=1``, PyTorch's Linear layout.

The trainer's dense layers and many converted models compute ``x @ W`` with W stored (K, N)
(``transB=0``). For the few rows a server's batch or a phone's single input has, the edge
runtime's Gemm runs fastest as ``(W^T @ x^T)^T`` over a row-major (N, K) weight (OpenBLAS is
slow on products of few rows), which needs that layout; so the weight is transposed once here,
when the model is written, instead of at every call. Measured on the serving benchmark's MLP
(256-1024-1024-10), whole model, time with the pass / without: 4-16 rows 0.56-0.73x, 32 rows
0.78-0.86x, 64-96 rows 0.97-1.00x, 128-256 rows 1.04-1.13x (benchmarks/RESULTS.md, session 6).

Only a weight that nothing but such Gemms reads is rewritten, so no tensor is stored twice.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import add_constant, all_graphs, constant, copy_model, readers


def transpose_gemm_weights(model: ir.Model) -> tuple[ir.Model, int]:
    """Rewrite ``Gemm(transB=0)`` with a constant 2-D weight to ``Gemm(transB=1)`` over its transpose;
    returns the new model and how many weights were transposed."""
    model = copy_model(model)
    changed = 0
    for graph in all_graphs(model.graph):
        uses = readers(graph)
        for name, nodes in uses.items():
            weight = constant(graph, name)
            if weight is None or weight.ndim != 2 or name in graph.outputs:
                continue
            if not all(_reads_as_untransposed_weight(node, name) for node in nodes):
                continue
            transposed = add_constant(graph, f"{name}_transposed", np.ascontiguousarray(weight.T))
            for node in nodes:
                node.inputs[1] = transposed
                node.attrs["transB"] = 1
            changed += 1
    return model, changed


def _reads_as_untransposed_weight(node: ir.Node, name: str) -> bool:
    """``node`` is a plain Gemm reading ``name`` as its (K, N) B input and nowhere else."""
    return (node.op_type == "Gemm" and node.domain == "" and not node.attrs.get("transB", 0)
            and len(node.inputs) > 1 and node.inputs[1] == name and node.inputs.count(name) == 1)
