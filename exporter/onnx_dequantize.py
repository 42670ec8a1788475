"""Fold onnxruntime's quantization out of an imported model, so it never runs slower than float.

In pure NumPy integer arithmetic is slower than float32 BLAS, and every quantize/dequantize is a
pass over an activation: an onnxruntime-quantized model run as written costs 2-5x its float
model. At convert time, then:

- ``DequantizeLinear`` of constants (the weights, biases of QDQ models) becomes a float constant;
- ``DynamicQuantizeLinear`` -> ``MatMulInteger``/``ConvInteger`` -> ``Cast`` -> ``Mul(scales)``
  (``quantize_dynamic``) becomes ``MatMul``/``Conv`` on the float input with dequantized weights;
- a ``QuantizeLinear`` -> ``DequantizeLinear`` pair with the same constant scale and zero point
  (an activation's int8 round trip, QDQ and expanded QOperator models) is bypassed.

The result computes in float what onnxruntime approximates in int8: the weights keep their int8
values, the activations lose their rounding. ``convert`` reports the difference.
"""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import get_kernel
from exporter import ir
from exporter.passes.dead_code import eliminate_dead_code
from exporter.passes.graph_edit import add_constant, bypass, constant, copy_model, producers, remove_nodes
from schemas import get_schema

# The integer product ops of quantize_dynamic, the float op each stands for, and the axis of
# the weight a per-channel scale runs along (None: the scale broadcasts against the weight as is).
INTEGER_PRODUCTS = {"MatMulInteger": ("MatMul", None), "ConvInteger": ("Conv", 0)}
FLOAT = 1  # TensorProto.FLOAT, Cast's `to`


def _evaluate(node: ir.Node, args: list) -> np.ndarray:
    schema = get_schema(node.op_type, node.domain)
    args = args + [None] * ((schema.max_inputs or len(args)) - len(args))
    return np.asarray(get_kernel(node.op_type, node.domain)(*args, xp=np, **schema.resolve_attrs(node.attrs)))


def fold_constant_dequantization(graph: ir.Graph) -> int:
    """Replace every ``DequantizeLinear`` whose inputs are all constants by its float value."""
    doomed = []
    for node in graph.nodes:
        if node.op_type != "DequantizeLinear" or node.domain:
            continue
        args = [constant(graph, name) if name else None for name in node.inputs]
        if any(name and arg is None for name, arg in zip(node.inputs, args)):
            continue
        graph.values[node.outputs[0]] = ir.Value(node.outputs[0], data=_evaluate(node, args))
        doomed.append(node)
    remove_nodes(graph, doomed)
    return len(doomed)


def _same_parameters(graph: ir.Graph, quantize: ir.Node, dequantize: ir.Node) -> bool:
    """Whether both nodes quantize on one grid: equal constant scales and zero points, one axis."""
    if quantize.attrs.get("axis", 1) != dequantize.attrs.get("axis", 1):
        return False
    for index in (1, 2):
        names = [n.inputs[index] if index < len(n.inputs) else "" for n in (quantize, dequantize)]
        if not any(names):
            continue
        x, y = (constant(graph, n) if n else None for n in names)
        if x is None or y is None or x.dtype != y.dtype or not np.array_equal(x, y):
            return False
    return True


def bypass_round_trips(graph: ir.Graph) -> int:
    """Bypass ``DequantizeLinear(QuantizeLinear(x, s, z), s, z)``: its readers read ``x``."""
    made = producers(graph)
    bypassed = []
    for node in graph.nodes:
        if node.op_type != "DequantizeLinear" or node.domain:
            continue
        source = made.get(node.inputs[0])
        if source is None or source.op_type != "QuantizeLinear" or source.domain:
            continue
        if not _same_parameters(graph, source, node):
            continue
        if bypass(graph, node, node.outputs[0], source.inputs[0]):
            bypassed.append(node)
    remove_nodes(graph, bypassed)
    return len(bypassed)


def _dynamic_product(graph: ir.Graph, made: dict[str, ir.Node], node: ir.Node) -> ir.Node | None:
    """The float MatMul/Conv that ``node`` (the final scale Mul of quantize_dynamic's pattern)
    computes, with dequantized weights; None where ``node`` is not that pattern."""
    if node.op_type != "Mul" or node.domain or len(node.inputs) != 2:
        return None
    for product_side in (0, 1):
        cast = made.get(node.inputs[product_side])
        scales = made.get(node.inputs[1 - product_side])
        if cast is None or scales is None or cast.op_type != "Cast" or cast.attrs.get("to") != FLOAT:
            continue
        integer = made.get(cast.inputs[0])
        if integer is None or integer.op_type not in INTEGER_PRODUCTS or scales.op_type != "Mul":
            continue
        dynamic = made.get(integer.inputs[0])
        if dynamic is None or dynamic.op_type != "DynamicQuantizeLinear":
            continue
        inputs = list(integer.inputs) + [""] * (4 - len(integer.inputs))
        if inputs[2] != dynamic.outputs[2] or dynamic.outputs[1] not in scales.inputs:
            continue
        weight_scale = constant(graph, next((n for n in scales.inputs if n != dynamic.outputs[1]), dynamic.outputs[1]))
        weight = constant(graph, inputs[1])
        weight_zero = constant(graph, inputs[3]) if inputs[3] else np.zeros((), np.int8)
        if weight is None or weight_scale is None or weight_zero is None:
            continue
        float_op, axis = INTEGER_PRODUCTS[integer.op_type]
        shape = [1] * weight.ndim
        per_channel = axis is not None and weight_zero.size > 1
        zero = weight_zero.reshape([-1 if i == axis else 1 for i in range(weight.ndim)]) if per_channel else weight_zero
        scale = weight_scale.reshape(-1) if axis is not None and weight_scale.size > 1 else weight_scale
        if axis is not None and scale.size > 1:
            shape[axis] = scale.size
            scale = scale.reshape(shape)
        dequantized = ((weight.astype(np.float32) - zero.astype(np.float32)) * scale.astype(np.float32))
        name = add_constant(graph, f"{inputs[1]}/dequantized", dequantized.astype(np.float32))
        return ir.Node(float_op, [dynamic.inputs[0], name], list(node.outputs), dict(integer.attrs), name=integer.name)
    return None


def rewrite_dynamic_products(graph: ir.Graph) -> int:
    made = producers(graph)
    rewritten = 0
    for index, node in enumerate(graph.nodes):
        replacement = _dynamic_product(graph, made, node)
        if replacement is not None:
            graph.nodes[index] = replacement
            rewritten += 1
    return rewritten


def dequantize_imported(model: ir.Model) -> tuple[ir.Model, int]:
    """``model`` with onnxruntime's quantization folded to float (see the module doc); the
    input is left as it was. Returns the model and how many rewrites were made."""
    model = copy_model(model)
    graph = model.graph
    changes = rewrite_dynamic_products(graph) + fold_constant_dequantization(graph)
    changes += bypass_round_trips(graph)
    if changes:
        model, _ = eliminate_dead_code(model)
    return model, changes
