"""Fold onnxruntime's quantization out of an imported model, so it never runs slower than float.

In pure NumPy integer arithmetic is slower than float32 BLAS, and every quantize/dequantize is a
pass over an activation: an onnxruntime-quantized model run as written costs 2-5x its float
model. At convert time, then:

- ``DequantizeLinear`` of constants (the weights, biases of QDQ models) becomes a float constant;
- ``DynamicQuantizeLinear`` -> ``MatMulInteger``/``ConvInteger`` -> ``Cast`` -> ``Mul(scales)``
  (``quantize_dynamic``) becomes ``MatMul``/``Conv`` on the float input with dequantized weights;
- a ``QuantizeLinear`` -> ``DequantizeLinear`` pair with the same constant scale and zero point
  (an activation's int8 round trip, QDQ and expanded QOperator models) becomes a ``Clip`` to the
  grid's range (which the activation fusion folds into the op before it), or nothing where the
  value is in that range already.

The result computes in float what onnxruntime approximates in int8: the weights keep their int8
values, the activations lose their rounding. ``convert`` reports the difference. The grids of the
folded weights are kept, so the file stores the weights as integers again once the model is
optimized (``exporter.quantized_storage``).
"""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import get_kernel
from exporter import ir
from exporter.passes.constant_folding import fold_constants
from exporter.passes.dead_code import eliminate_dead_code
from exporter.passes.graph_edit import (
    add_constant,
    bypass,
    constant,
    fresh_name,
    producers,
    readers,
    remove_nodes,
    rename_uses,
)
from exporter.quantized_storage import WeightGrid, dequantized_weight_grids
from schemas import get_schema

# The integer product ops of quantize_dynamic, the float op each stands for, and the axis of
# the weight a per-channel scale runs along (None: the scale broadcasts against the weight as is).
INTEGER_PRODUCTS = {"MatMulInteger": ("MatMul", None), "ConvInteger": ("Conv", 0)}
FLOAT = 1  # TensorProto.FLOAT, Cast's `to`
# Ops whose outputs hold only values of their (first) input: a grid's range survives them.
RANGE_PRESERVING = {"MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Gather"}
# Ops whose outputs lie in a known interval, and ops whose outputs lie within their input's.
UNBOUNDED = (-np.inf, np.inf)
KNOWN_RANGES = {"Relu": (0.0, np.inf), "Abs": (0.0, np.inf), "Exp": (0.0, np.inf), "Sigmoid": (0.0, 1.0),
                "Softmax": (0.0, 1.0), "Erf": (-1.0, 1.0), "Tanh": (-1.0, 1.0)}
AVERAGING = {"GlobalAveragePool", "AveragePool", "ReduceMean"}
MAX_HOISTS = 8
QUANTIZATION_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", *INTEGER_PRODUCTS}


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


def _grid_range(graph: ir.Graph, dequantize: ir.Node) -> tuple[float, float] | None:
    """The [low, high] a per-tensor grid represents (quantizing saturates to it), else None."""
    scale = constant(graph, dequantize.inputs[1])
    zero_name = dequantize.inputs[2] if len(dequantize.inputs) > 2 else ""
    zero_point = constant(graph, zero_name) if zero_name else np.zeros((), np.uint8)
    if scale is None or zero_point is None or scale.size != 1 or zero_point.dtype.kind not in "iu":
        return None
    info = np.iinfo(zero_point.dtype)
    zero, step = float(zero_point.reshape(())), float(scale.reshape(()))
    return (info.min - zero) * step, (info.max - zero) * step


def _shift_or_scale(graph: ir.Graph, made: dict[str, ir.Node], node: ir.Node, depth: int) -> tuple[float, float]:
    """Bounds of ``Add``/``Mul`` of a value and a scalar constant (a GELU's ``1 + erf``, ``0.5 *``)."""
    for side in (0, 1):
        c = constant(graph, node.inputs[1 - side])
        if c is not None and c.size == 1:
            k = float(c.reshape(()))
            low, high = _bounds(graph, made, node.inputs[side], depth + 1)
            if node.op_type == "Add":
                return low + k, high + k
            return (low * k, high * k) if k >= 0 else (high * k, low * k)
    return UNBOUNDED


def _bounds(graph: ir.Graph, made: dict[str, ir.Node], name: str, depth: int = 0) -> tuple[float, float]:
    """What ``name`` is known to lie within (a small interval analysis; unknown: unbounded)."""
    value = constant(graph, name)
    if value is not None and value.size and value.dtype.kind in "fiu":
        return float(value.min()), float(value.max())
    node = made.get(name)
    if node is None or node.domain or depth > 16:
        return UNBOUNDED
    if node.op_type == "Where" and len(node.inputs) == 3:
        (a, b), (c, d) = (_bounds(graph, made, n, depth + 1) for n in node.inputs[1:])
        return min(a, c), max(b, d)
    if node.op_type in KNOWN_RANGES:
        return KNOWN_RANGES[node.op_type]
    if node.op_type == "DequantizeLinear":
        return _grid_range(graph, node) or UNBOUNDED
    if node.op_type in ("Add", "Mul") and len(node.inputs) == 2:
        return _shift_or_scale(graph, made, node, depth)
    if node.op_type in RANGE_PRESERVING | AVERAGING:
        return _bounds(graph, made, node.inputs[0], depth + 1)
    return UNBOUNDED


def bypass_round_trips(graph: ir.Graph) -> int:
    """Replace ``DequantizeLinear(QuantizeLinear(x, s, z), s, z)`` by what is left of it without the
    rounding. onnxruntime folds a Relu (or Relu6) into the grid that follows it, one whose range
    starts at 0: where ``x`` may be negative, the pair becomes ``Clip(x, 0, high)``, which the
    activation fusion puts back into the op before it. Elsewhere the readers read ``x``: the float
    model's value where onnxruntime would saturate. A pair on two grids (a rescale) stays."""
    made = producers(graph)
    clips: dict[int, tuple[float, float]] = {}
    bypasses: list[ir.Node] = []
    for node in graph.nodes:  # decided on the graph as it is, then applied
        source = made.get(node.inputs[0]) if node.op_type == "DequantizeLinear" and not node.domain else None
        if source is None or source.op_type != "QuantizeLinear" or source.domain:
            continue
        bounds = _grid_range(graph, node)
        if bounds is None or not _same_parameters(graph, source, node):
            continue
        value = source.inputs[0]
        if bounds[0] < 0 or value in graph.inputs or _bounds(graph, made, value)[0] >= 0:
            bypasses.append(node)
        else:
            clips[id(node)] = bounds
    for index, node in enumerate(graph.nodes):
        if id(node) in clips:
            low, high = (add_constant(graph, f"{node.outputs[0]}/{end}", np.asarray(v, np.float32))
                         for end, v in zip(("low", "high"), clips[id(node)]))
            graph.nodes[index] = ir.Node("Clip", [made[node.inputs[0]].inputs[0], low, high], list(node.outputs),
                                         name=node.name)
    bypassed = [node for node in bypasses if bypass(graph, node, node.outputs[0], made[node.inputs[0]].inputs[0])]
    remove_nodes(graph, bypassed)
    return len(clips) + len(bypassed)


def _hoistable(graph: ir.Graph, node: ir.Node, outs: list[ir.Node]) -> bool:
    """``node`` is range-preserving and every reader dequantizes its output on one per-tensor grid."""
    if node.op_type not in RANGE_PRESERVING or node.domain or not outs or node.outputs[0] in graph.outputs:
        return False
    if not all(r.op_type == "DequantizeLinear" and not r.domain and r.inputs[0] == node.outputs[0] for r in outs):
        return False
    scale = constant(graph, outs[0].inputs[1])
    return scale is not None and scale.size == 1 and all(_same_parameters(graph, outs[0], r) for r in outs)


def hoist_dequantization(graph: ir.Graph) -> int:
    """``DequantizeLinear(R(q))`` -> ``R(DequantizeLinear(q))`` for a range-preserving ``R`` (an
    int8 MaxPool, Reshape or Transpose of QOperator models, the Gather of a quantized embedding
    table) whose readers all dequantize on one per-tensor grid: the same values, and then
    ``DequantizeLinear(q)`` meets the ``QuantizeLinear`` that made ``q`` or folds into a constant.
    Repeated until no op is left to hoist over (a Reshape then a Transpose take two rounds)."""
    total = 0
    for _ in range(MAX_HOISTS):
        uses = readers(graph)
        nodes: list[ir.Node] = []
        dropped: set[int] = set()
        for node in graph.nodes:
            if id(node) in dropped:
                continue
            outs = uses.get(node.outputs[0], []) if node.outputs and node.inputs else []
            if _hoistable(graph, node, outs):
                restored = fresh_name(graph, f"{node.inputs[0]}/dequantized")
                nodes.append(ir.Node("DequantizeLinear", [node.inputs[0], *outs[0].inputs[1:]], [restored],
                                     dict(outs[0].attrs), name=f"{node.name}/dequantize"))
                node.inputs[0] = restored
                graph.values[node.outputs[0]] = ir.Value(node.outputs[0])  # float now
                for reader in outs:
                    rename_uses(graph, reader.outputs[0], node.outputs[0])
                    dropped.add(id(reader))
            nodes.append(node)
        graph.nodes = nodes
        total += len(dropped)
        if not dropped:
            break
    return total


def _dynamic_product(graph: ir.Graph, made: dict[str, ir.Node], node: ir.Node,
                     grids: list[WeightGrid] | None) -> ir.Node | None:
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
        grid = WeightGrid.of(weight_scale.reshape(-1), weight_zero.reshape(-1), weight)
        if grids is not None and grid is not None:
            grids.append(grid)
        name = add_constant(graph, f"{inputs[1]}/dequantized", dequantized.astype(np.float32))
        return ir.Node(float_op, [dynamic.inputs[0], name], list(node.outputs), dict(integer.attrs), name=integer.name)
    return None


def _absorb_bias(graph: ir.Graph, conv: ir.Node) -> ir.Node | None:
    """quantize_dynamic adds a convolution's bias after it (``Add(y, b[1, M, 1, 1])``): the Add
    that alone reads ``conv``'s output with such a constant, which ``conv`` can take as its B."""
    uses = [n for n in graph.nodes if conv.outputs[0] in n.inputs]
    if len(uses) != 1 or uses[0].op_type != "Add" or uses[0].domain or conv.outputs[0] in graph.outputs:
        return None
    add = uses[0]
    bias = constant(graph, add.inputs[1] if add.inputs[0] == conv.outputs[0] else add.inputs[0])
    weight = constant(graph, conv.inputs[1])
    if bias is None or weight is None or bias.dtype != np.float32 or bias.size != weight.shape[0]:
        return None
    if bias.ndim > 1 and bias.shape != (1, weight.shape[0]) + (1,) * (bias.ndim - 2):
        return None
    conv.inputs.append(add_constant(graph, f"{conv.inputs[1]}/bias", bias.reshape(-1)))
    conv.outputs = list(add.outputs)
    return add


def rewrite_dynamic_products(graph: ir.Graph, grids: list[WeightGrid] | None = None) -> int:
    made = producers(graph)
    rewritten = []
    for index, node in enumerate(graph.nodes):
        replacement = _dynamic_product(graph, made, node, grids)
        if replacement is not None:
            graph.nodes[index] = replacement
            rewritten.append(replacement)
    absorbed = [_absorb_bias(graph, node) for node in rewritten if node.op_type == "Conv"]
    remove_nodes(graph, [add for add in absorbed if add is not None])
    return len(rewritten)


def dequantize_imported(model: ir.Model) -> tuple[ir.Model, int, list[WeightGrid]]:
    """``model`` with onnxruntime's quantization folded to float (see the module doc); the
    input is left as it was. Returns the model, how many rewrites were made and the integer
    grids of the weights folded (``exporter.quantized_storage`` stores them back on those)."""
    if not any(node.op_type in QUANTIZATION_OPS and not node.domain for node in model.graph.nodes):
        return model, 0, []
    grids = dequantized_weight_grids(model.graph)
    model, _ = fold_constants(model)  # quantize_dynamic's reshaped biases become constants to absorb
    graph = model.graph
    changes = rewrite_dynamic_products(graph, grids) + hoist_dequantization(graph)
    grids += dequantized_weight_grids(graph)  # those hoisted over a Gather read constants now
    changes += fold_constant_dequantization(graph) + bypass_round_trips(graph)
    if changes:
        model, _ = eliminate_dead_code(model)
    return model, changes, grids
