"""Fold inference-mode BatchNormalization into the Conv, Gemm or MatMul(+Add) that feeds it.

BatchNormalization computes ``y = (x - mean) * s + bias`` with ``s = scale / sqrt(var + eps)``
per channel (axis 1). When ``x`` comes from a linear op with constant weights whose output
nobody else reads, scaling the weights' output channels by ``s`` and the bias by ``s`` (then
adding ``bias - mean * s``) gives the same result with one op fewer.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import (
    add_constant,
    all_graphs,
    constant,
    copy_model,
    fresh_name,
    producers,
    readers,
    remove_nodes,
)


def fold_batch_norm(model: ir.Model) -> tuple[ir.Model, int]:
    """Fold BatchNormalization nodes into their producers; returns the new model and how many folded."""
    model = copy_model(model)
    folded = 0
    for graph in all_graphs(model.graph):
        doomed = []
        for node in graph.nodes:
            if node.op_type == "BatchNormalization" and node.domain == "" and _fold(graph, node):
                doomed.append(node)
        remove_nodes(graph, doomed)
        folded += len(doomed)
    return model, folded


def _channel_affine(graph: ir.Graph, bn: ir.Node) -> tuple[np.ndarray, np.ndarray] | None:
    """(s, shift) with ``bn(x) == x * s + shift`` per channel, or None if not foldable."""
    if bn.attrs.get("training_mode", 0) or len(bn.inputs) != 5:
        return None
    if any(o for o in bn.outputs[1:]):
        return None
    params = [constant(graph, n) for n in bn.inputs[1:]]
    if any(p is None or p.ndim != 1 for p in params):
        return None
    scale, bias, mean, var = (p.astype(np.float64) for p in params)
    s = scale / np.sqrt(var + bn.attrs.get("epsilon", 1e-5))
    return s, bias - mean * s


def _sole_reader(graph: ir.Graph, name: str, node: ir.Node) -> bool:
    return name not in graph.outputs and [id(n) for n in readers(graph).get(name, [])] == [id(node)]


def _fold(graph: ir.Graph, bn: ir.Node) -> bool:
    affine = _channel_affine(graph, bn)
    x = bn.inputs[0]
    producer = producers(graph).get(x)
    if affine is None or producer is None or producer.domain != "" or not _sole_reader(graph, x, bn):
        return False
    fold = {"Conv": _into_conv, "Gemm": _into_gemm, "MatMul": _into_matmul, "Add": _into_matmul_add,
            "Flatten": _through_flatten}.get(producer.op_type)
    last = fold(graph, producer, *affine) if fold else None
    if last is None:
        return False
    last.outputs[0] = bn.outputs[0]
    return True


def _through_flatten(graph: ir.Graph, flatten: ir.Node, s: np.ndarray, shift: np.ndarray) -> ir.Node | None:
    """Linear -> ``flatten(0, -2)`` -> BatchNorm1d (LeViT's every projection): a Flatten at the last
    axis makes the MatMul's last axis BatchNormalization's channel axis, so the MatMul (+ Add) before
    it takes the fold and the Flatten stays, now the chain's last node."""
    x = flatten.inputs[0]
    record = graph.values.get(x)
    rank = len(record.shape) if record is not None and record.shape is not None else None
    inner = producers(graph).get(x)
    if rank is None or rank < 2 or flatten.attrs.get("axis", 1) % rank != rank - 1 or inner is None:
        return None
    fold = {"MatMul": _into_matmul, "Add": _into_matmul_add}.get(inner.op_type)
    # LeViT reshapes the result back with reshape_as: a Shape of x may read it too (scaling keeps the shape)
    others = [n for n in readers(graph).get(x, []) if n is not flatten]
    if inner.domain != "" or fold is None or x in graph.outputs or any(n.op_type != "Shape" for n in others):
        return None
    last = fold(graph, inner, s, shift, last_axis=True)
    if last is None:
        return None
    if not last.outputs[0]:  # a new bias Add after the MatMul: the Flatten reads it
        last.outputs[0] = fresh_name(graph, f"{x}_bn")
        graph.values[last.outputs[0]] = ir.Value(last.outputs[0], record.dtype, record.shape)
        flatten.inputs[0] = last.outputs[0]
    return flatten


def _into_conv(graph: ir.Graph, conv: ir.Node, s: np.ndarray, shift: np.ndarray) -> ir.Node | None:
    w = constant(graph, conv.inputs[1])
    b = constant(graph, conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
    if w is None or w.shape[0] != s.shape[0] or (len(conv.inputs) > 2 and conv.inputs[2] and b is None):
        return None
    w_new = w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))
    b_new = (np.zeros_like(s) if b is None else b.astype(np.float64)) * s + shift
    hint = conv.name or conv.outputs[0]
    conv.inputs[1:] = [add_constant(graph, f"{hint}_bn_weight", w_new.astype(w.dtype)),
                       add_constant(graph, f"{hint}_bn_bias", b_new.astype(w.dtype))]
    return conv


def _into_gemm(graph: ir.Graph, gemm: ir.Node, s: np.ndarray, shift: np.ndarray) -> ir.Node | None:
    w = constant(graph, gemm.inputs[1])
    c = constant(graph, gemm.inputs[2]) if len(gemm.inputs) > 2 and gemm.inputs[2] else None
    if w is None or w.ndim != 2 or (len(gemm.inputs) > 2 and gemm.inputs[2] and c is None):
        return None
    trans_b = gemm.attrs.get("transB", 0)
    if w.shape[0 if trans_b else 1] != s.shape[0]:
        return None
    alpha, beta = gemm.attrs.get("alpha", 1.0), gemm.attrs.get("beta", 1.0)
    w_new = w.astype(np.float64) * alpha * (s.reshape(-1, 1) if trans_b else s.reshape(1, -1))
    c_new = shift if c is None else beta * c.astype(np.float64) * s + shift
    hint = gemm.name or gemm.outputs[0]
    gemm.inputs[1:] = [add_constant(graph, f"{hint}_bn_weight", w_new.astype(w.dtype)),
                       add_constant(graph, f"{hint}_bn_bias", c_new.astype(w.dtype))]
    gemm.attrs["alpha"], gemm.attrs["beta"] = 1.0, 1.0
    return gemm


def _scale_matmul(graph: ir.Graph, matmul: ir.Node, s: np.ndarray, last_axis: bool = False) -> np.dtype | None:
    """Scale the output channels of a rank-2 MatMul's constant (K, M) weight; its dtype, or None.
    ``last_axis``: the channels are the output's last axis whatever its rank (a Flatten follows)."""
    w = constant(graph, matmul.inputs[1])
    out = graph.values.get(matmul.outputs[0])
    rank = len(out.shape) if out is not None and out.shape is not None else None
    # BatchNormalization's channel axis is 1: the MatMul's last axis only when its output is 2-D.
    if w is None or w.ndim != 2 or w.shape[1] != s.shape[0] or (rank != 2 and not last_axis):
        return None
    hint = matmul.name or matmul.outputs[0]
    matmul.inputs[1] = add_constant(graph, f"{hint}_bn_weight", (w.astype(np.float64) * s).astype(w.dtype))
    return w.dtype


def _into_matmul(graph: ir.Graph, matmul: ir.Node, s: np.ndarray, shift: np.ndarray,
                 last_axis: bool = False) -> ir.Node | None:
    dtype = _scale_matmul(graph, matmul, s, last_axis)
    if dtype is None:
        return None
    hint = matmul.name or matmul.outputs[0]
    bias = add_constant(graph, f"{hint}_bn_bias", shift.astype(dtype))
    add = ir.Node("Add", [matmul.outputs[0], bias], [""], name=f"{hint}_bn_add")
    graph.nodes.insert(graph.nodes.index(matmul) + 1, add)
    return add


def _into_matmul_add(graph: ir.Graph, add: ir.Node, s: np.ndarray, shift: np.ndarray,
                     last_axis: bool = False) -> ir.Node | None:
    """MatMul -> Add(constant bias) -> BatchNormalization: scale the weight, rewrite the bias."""
    made = producers(graph)
    for side in (0, 1):
        matmul = made.get(add.inputs[side])
        bias = constant(graph, add.inputs[1 - side])
        if matmul is None or matmul.op_type != "MatMul" or bias is None or bias.shape[-1:] not in ((1,), s.shape):
            continue
        if bias.ndim > 2 or bias.size != bias.shape[-1]:
            continue
        if not _sole_reader(graph, add.inputs[side], add):
            continue
        dtype = _scale_matmul(graph, matmul, s, last_axis)
        if dtype is None:
            return None
        new_bias = bias.reshape(-1).astype(np.float64) * s + shift
        add.inputs[1 - side] = add_constant(graph, f"{add.name or add.outputs[0]}_bn_bias", new_bias.astype(dtype))
        return add
    return None
