"""Store each constant Gemm weight in the layout the edge runtime multiplies fastest.

Large weights go (N, K) with ``transB=1``, PyTorch's Linear layout. The trainer's dense layers and
many converted models compute ``x @ W`` with W stored (K, N) (``transB=0``); for the few rows a
server's batch or a phone's single input has, the edge runtime's Gemm runs fastest as
``(W^T @ x^T)^T`` over a row-major (N, K) weight (OpenBLAS is slow on products of few rows),
which needs that layout; so the weight is transposed once here, when the model is written,
instead of at every call. Measured on the serving benchmark's MLP (256-1024-1024-10), whole
model, time with the pass / without: 4-16 rows 0.56-0.73x, 32 rows 0.78-0.86x, 64-96 rows
0.97-1.00x, 128-256 rows 1.04-1.13x (benchmarks/RESULTS.md, session 6).

Small weights go the other way, (K, N) with ``transB=0``: there the plain row-major product
``x @ W`` matches (within 3%) or beats the products over an (N, K) weight at every row count
measured. Zen 5, AVX-512 kernels, one / two OpenBLAS threads, x @ W over (K, N) against today's
product over (N, K) at 2, 4, 8, 16, 32, 64 rows: LeNet's 120->84 0.84-0.86, 0.94-1.01, 0.83-0.84,
0.63-0.66, 0.69-0.70, 0.68; 200->100 0.96-0.98, 1.02-1.03, 0.88-0.92, 0.66-0.67, 0.71-0.88,
0.83-0.86; 64->64 at 1-128 rows 0.51-0.90. Larger ones are mixed (400->120: 1.26-1.32 at 4 rows
and 0.98-1.10 at 32, 0.74-0.98 at 16 and 64; 128->256 1.14-1.19 at 32 rows), and with few
outputs ``x @ W^T`` wins (512->10 at 32 rows: 2.5 against 4.0 us), so those stay (N, K).

Only a weight that nothing but such Gemms reads is rewritten, so no tensor is stored twice;
either way the node is a plain ONNX Gemm, so the model written back to ONNX stays valid.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import add_constant, all_graphs, constant, copy_model, readers

# A (K, N) weight is kept row-major when it has at most this many elements (200->100, the largest
# measured to win at every row count) and at least ROW_MAJOR_MIN_OUTPUTS columns.
ROW_MAJOR_MAX_WEIGHT = 20_000
ROW_MAJOR_MIN_OUTPUTS = 64


def prefers_row_major(k: int, n: int) -> bool:
    """Whether a (K, N) Gemm weight multiplies fastest stored (K, N) (``transB=0``) rather than (N, K)."""
    return k * n <= ROW_MAJOR_MAX_WEIGHT and n >= ROW_MAJOR_MIN_OUTPUTS


def transpose_gemm_weights(model: ir.Model) -> tuple[ir.Model, int]:
    """Store each constant 2-D Gemm weight (K, N) with ``transB=0`` where ``prefers_row_major``,
    else (N, K) with ``transB=1``; returns the new model and how many weights were transposed."""
    model = copy_model(model)
    changed = 0
    for graph in all_graphs(model.graph):
        uses = readers(graph)
        for name, nodes in uses.items():
            weight = constant(graph, name)
            if weight is None or weight.ndim != 2 or name in graph.outputs:
                continue
            trans_b = {_weight_transposition(node, name) for node in nodes}
            if len(trans_b) != 1 or None in trans_b:
                continue
            stored_transposed = trans_b.pop()
            k, n = weight.shape[::-1] if stored_transposed else weight.shape
            if stored_transposed != prefers_row_major(k, n):
                continue
            transposed = add_constant(graph, f"{name}_transposed", np.ascontiguousarray(weight.T))
            for node in nodes:
                node.inputs[1] = transposed
                node.attrs["transB"] = 0 if stored_transposed else 1
            changed += 1
    return model, changed


def _weight_transposition(node: ir.Node, name: str) -> int | None:
    """``node``'s transB where it is a plain Gemm reading ``name`` as its B input and nowhere else, else None."""
    if (node.op_type == "Gemm" and node.domain == "" and len(node.inputs) > 1 and node.inputs[1] == name
            and node.inputs.count(name) == 1):
        return int(node.attrs.get("transB", 0))
    return None
