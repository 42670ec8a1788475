"""Recognise RMS normalization written out op by op, and make it one ``RMSNormalization``.

Llama's ``LlamaRMSNorm``, T5's ``T5LayerNorm`` and their kin (Mistral, Qwen, Gemma's scale aside)
normalize by the root mean square, without subtracting the mean; PyTorch exports them as

    ms = ReduceMean(Pow(x, 2), trailing axes); r = 1 / Sqrt(ms + eps)   (torch.rsqrt)
    y = gamma * (x * r)

seven nodes, five passes over the activations and four small ones; ``x / Sqrt(ms + eps)`` and
``Reciprocal(Sqrt(...))`` are taken too, the square as ``Pow(x, 2)`` or ``x * x``. ONNX's
``RMSNormalization`` (opset 23) computes the same in one node. Applies where the mean reduces the
trailing axes with keepdims, eps is a non-negative scalar constant added before the square root,
gamma a float constant of the normalized shape, the root divides the same x that was squared, and
every value inside the chain is read by the chain alone. A chain that subtracts the mean first is
a layer norm, which ``recognize_layer_norms`` (run before this pass) takes.
"""

from __future__ import annotations

from exporter import ir
from exporter.passes.pattern import ChainReader, rewrite_matches
from exporter.passes.recognize_layer_norm import normalized_shape, trailing_axes


def recognize_rms_norms(model: ir.Model) -> tuple[ir.Model, int]:
    """Replace Pow/ReduceMean/Add/Sqrt/Div/Mul/Mul chains by RMSNormalization."""
    return rewrite_matches(model, _match)


def _square_of(reader: ChainReader, name: str) -> tuple[ir.Node, str] | None:
    """``name`` as Pow(x, 2) or x * x: the node and x."""
    node = reader.producer(name, "Pow", "Mul")
    if node is None or len(node.inputs) != 2:
        return None
    if node.op_type == "Pow":
        return (node, node.inputs[0]) if reader.is_scalar(node.inputs[1], 2.0) else None
    return (node, node.inputs[0]) if node.inputs[0] == node.inputs[1] else None


def _normalized(reader: ChainReader, root: ir.Node, x: str) -> list[ir.Node] | None:
    """From Sqrt(ms + eps) on: x / root, or x * (1 / root) or x * Reciprocal(root) (either order)."""
    inverse = reader.sole_reader(root.outputs[0], "Div", "Reciprocal")
    if inverse is None:
        return None
    if inverse.op_type == "Div" and inverse.inputs == [x, root.outputs[0]]:
        return [inverse]
    if inverse.op_type == "Div" and not (inverse.inputs[1] == root.outputs[0]
                                         and reader.is_scalar(inverse.inputs[0], 1.0)):
        return None
    times = reader.sole_reader(inverse.outputs[0], "Mul")
    if times is None or reader.operand_besides(times, inverse.outputs[0]) != x:
        return None
    return [inverse, times]


def _match(reader: ChainReader, mean: ir.Node) -> tuple[list[ir.Node], ir.Node] | None:
    if (mean.domain, mean.op_type) != ("", "ReduceMean") or not reader.only_read_by(mean.inputs[0], mean):
        return None
    squared = _square_of(reader, mean.inputs[0])
    if squared is None:
        return None
    square, x = squared
    value = reader.graph.values.get(x)
    rank = len(value.shape) if value is not None and value.shape is not None else None
    axis = trailing_axes(reader, mean, rank)
    plus_eps = reader.sole_reader(mean.outputs[0], "Add")
    if axis is None or plus_eps is None:
        return None
    epsilon = reader.scalar(reader.operand_besides(plus_eps, mean.outputs[0]) or "")
    root = reader.sole_reader(plus_eps.outputs[0], "Sqrt")
    if epsilon is None or epsilon < 0 or root is None:
        return None
    normalize = _normalized(reader, root, x)
    if normalize is None:
        return None
    scale = reader.sole_reader(normalize[-1].outputs[0], "Mul")
    gamma = reader.operand_besides(scale, normalize[-1].outputs[0]) if scale is not None else None
    if gamma is None or not normalized_shape(reader, gamma, x, axis):
        return None
    chain = [square, mean, plus_eps, root, *normalize, scale]
    out = scale.outputs[0]
    node = ir.Node("RMSNormalization", [x, gamma], [out], {"axis": axis, "epsilon": epsilon},
                   scale.name or f"{out}_rms_norm")
    return chain, node
