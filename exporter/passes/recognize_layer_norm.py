"""Recognise layer normalization written out op by op, and make it one ``LayerNormalization``.

Before opset 17 ONNX had no LayerNormalization, and PyTorch exports ``nn.LayerNorm`` there as

    mean = ReduceMean(x, trailing axes); d = x - mean; var = ReduceMean(d ^ 2, same axes)
    y = d / Sqrt(var + eps) * gamma (+ beta)

nine nodes, seven passes over the activations. Applies where both means reduce the same trailing
axes with keepdims, the exponent is 2 (or d * d), eps, gamma and beta are constants with gamma
and beta of the normalized shape, and every value inside the chain is read by the chain alone.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import constant
from exporter.passes.pattern import ChainReader, rewrite_matches


def recognize_layer_norms(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul(/Add) chains by LayerNormalization."""
    return rewrite_matches(model, _match)


def trailing_axes(reader: ChainReader, mean: ir.Node, rank: int | None) -> int | None:
    """The first axis (negative) of ``mean``'s reduction when it reduces the trailing axes with keepdims."""
    if mean.attrs.get("keepdims", 1) != 1 or len(mean.inputs) < 2:
        return None
    axes = constant(reader.graph, mean.inputs[1])
    if axes is None or axes.ndim != 1 or not axes.size:
        return None
    if any(a >= 0 for a in axes.tolist()):
        if rank is None:
            return None
        axes = np.array([a - rank if a >= 0 else a for a in axes.tolist()])
    k = len(axes)
    return -k if sorted(axes.tolist()) == list(range(-k, 0)) else None


def _squares(reader: ChainReader, node: ir.Node | None, d: str) -> bool:
    if node is None:
        return False
    if node.op_type == "Pow":
        return node.inputs[0] == d and reader.is_scalar(node.inputs[1], 2.0)
    return node.op_type == "Mul" and node.inputs == [d, d]


def _match(reader: ChainReader, mean: ir.Node) -> tuple[list[ir.Node], ir.Node] | None:
    if (mean.domain, mean.op_type) != ("", "ReduceMean"):
        return None
    x = mean.inputs[0]
    value = reader.graph.values.get(x)
    rank = len(value.shape) if value is not None and value.shape is not None else None
    axis = trailing_axes(reader, mean, rank)
    sub = reader.sole_reader(mean.outputs[0], "Sub")
    if axis is None or sub is None or sub.inputs != [x, mean.outputs[0]]:
        return None
    d = sub.outputs[0]
    d_readers = reader.read.get(d, [])
    square = next((n for n in d_readers if n.op_type in ("Pow", "Mul")), None)
    div = next((n for n in d_readers if n.op_type == "Div"), None)
    if d in reader.graph.outputs or len(d_readers) != 2 or not _squares(reader, square, d) or div is None:
        return None
    var = reader.sole_reader(square.outputs[0], "ReduceMean")
    if var is None or trailing_axes(reader, var, rank) != axis or var.inputs[0] != square.outputs[0]:
        return None
    plus_eps = reader.sole_reader(var.outputs[0], "Add")
    eps_name = reader.operand_besides(plus_eps, var.outputs[0]) if plus_eps is not None else None
    epsilon = reader.scalar(eps_name) if eps_name is not None else None
    root = reader.sole_reader(plus_eps.outputs[0], "Sqrt") if plus_eps is not None else None
    if epsilon is None or epsilon < 0 or root is None or div.inputs != [d, root.outputs[0]]:
        return None
    if not reader.only_read_by(root.outputs[0], div):
        return None
    scale = reader.sole_reader(div.outputs[0], "Mul")
    gamma = reader.operand_besides(scale, div.outputs[0]) if scale is not None else None
    if gamma is None or not normalized_shape(reader, gamma, x, axis):
        return None
    chain = [mean, sub, square, var, plus_eps, root, div, scale]
    inputs = [x, gamma]
    shift = reader.sole_reader(scale.outputs[0], "Add")
    beta = reader.operand_besides(shift, scale.outputs[0]) if shift is not None else None
    if beta is not None and normalized_shape(reader, beta, x, axis):
        chain.append(shift)
        inputs.append(beta)
    out = chain[-1].outputs[0]
    node = ir.Node("LayerNormalization", inputs, [out], {"axis": axis, "epsilon": epsilon},
                   chain[-1].name or f"{out}_layer_norm")
    return chain, node


def normalized_shape(reader: ChainReader, name: str, x: str, axis: int) -> bool:
    """Whether ``name`` is a float constant of the normalized shape: -axis dims, each 1 or, where
    ``x``'s shape is known, that dim of ``x``."""
    data = constant(reader.graph, name)
    if data is None or data.dtype.kind != "f" or data.ndim != -axis:
        return False
    value = reader.graph.values.get(x)
    known = value.shape[axis:] if value is not None and value.shape is not None else (-1,) * -axis
    return all(d == 1 or k < 0 or d == k for d, k in zip(data.shape, known))
