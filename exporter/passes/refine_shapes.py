"""Fill in the value shapes the importer left unknown, from the op registry's shape rules.

onnx's shape inference gives up at the first value whose shape depends on a computed tensor, and
everything downstream loses its dims: PyTorch writes ``F.pad`` with its pads computed by a
Constant -> ConstantOfShape -> Concat -> Reshape -> Slice -> Transpose -> Cast chain, so in Hugging
Face's MobileNetV2 (a Pad before every convolution) no activation after the first has a known
plane, and the channels-last rewrite, which needs known planes, leaves the whole network planar.
Once constant folding has turned such chains into constants (and ``fold_pads`` has moved the pads
into the convolutions), the registry's shape rules recover the dims. Only unknown dims (-1) and
unknown ranks and dtypes are filled in; a known dim is never changed, so the pass converges.
Nodes with nested graphs are left alone; fused nodes (the attention the recognisers write) are
typed by their own registry rules.

One pattern needs more than the rules see: ``Reshape(x, Shape(y))``, how PyTorch exports
``GroupNorm`` (``InstanceNormalization`` over a flattened view, then back to the input's shape,
PoolFormer's every norm). The target is a computed tensor whose values the rule cannot read, but
the output's shape is ``y``'s, dim for dim.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import all_graphs, constant, copy_model, producers
from schemas import dtypes, get_schema, has_schema
from schemas.registry import TensorType, infer_types


def refine_shapes(model: ir.Model) -> tuple[ir.Model, int]:
    """Refine unknown value shapes; returns the new model and how many values learned something."""
    model = copy_model(model)
    refined = 0
    for graph in all_graphs(model.graph):
        made = producers(graph)
        for node in graph.nodes:
            if has_schema(node.op_type, node.domain) and not any(node.subgraphs()):
                refined += _refine_outputs(graph, node, made)
    return model, refined


def _tensor_type(graph: ir.Graph, name: str) -> TensorType | None:
    if not name:
        return None
    value = graph.values.get(name)
    if value is None:
        return TensorType(None, None)
    if value.data is not None:
        return TensorType(value.data.dtype, tuple(value.data.shape))
    dtype = dtypes.to_numpy(value.dtype) if value.dtype is not None and _plain(value.dtype) else None
    shape = None if value.shape is None else tuple(None if d < 0 else d for d in value.shape)
    return TensorType(dtype, shape)


def _plain(code: int) -> bool:
    try:
        dtypes.to_numpy(code)
    except dtypes.DTypeError:
        return False
    return True


def _reshape_to_shape_of(graph: ir.Graph, node: ir.Node, made: dict[str, ir.Node]) -> TensorType | None:
    """``Reshape(x, Shape(y))``: ``y``'s shape (a known 0 in it would mean "copy x's dim": left alone)."""
    if node.op_type != "Reshape" or len(node.inputs) < 2:
        return None
    source = made.get(node.inputs[1])
    if source is None or (source.domain, source.op_type) != ("", "Shape") or source.attrs.get("start", 0) != 0 \
            or source.attrs.get("end") is not None:
        return None
    shape = _tensor_type(graph, source.inputs[0]).shape
    if shape is None or 0 in shape:
        return None
    return TensorType(_tensor_type(graph, node.inputs[0]).dtype, shape)


def _refine_outputs(graph: ir.Graph, node: ir.Node, made: dict[str, ir.Node]) -> int:
    reshaped = _reshape_to_shape_of(graph, node, made)
    if reshaped is not None:
        return int(_merge(graph, node.outputs[0], reshaped))
    schema = get_schema(node.op_type, node.domain)
    try:
        inferred = infer_types(
            schema,
            [_tensor_type(graph, n) for n in node.inputs],
            schema.resolve_attrs(node.attrs),
            input_values=[constant(graph, n) if n else None for n in node.inputs],
            num_outputs=len(node.outputs),
            name=node.name,
        )
    except Exception:  # a rule that cannot tell (or trips on what the importer kept) refines nothing
        return 0
    return sum(_merge(graph, name, found) for name, found in zip(node.outputs, inferred) if name)


def _merge(graph: ir.Graph, name: str, found: TensorType) -> bool:
    """Fill ``name``'s unknown dtype, rank and dims from ``found``; True where anything changed."""
    record = graph.value(name)
    if record.data is not None:
        return False
    changed = False
    if record.dtype is None and found.dtype is not None:
        try:
            record.dtype = dtypes.from_numpy(np.dtype(found.dtype))
            changed = True
        except dtypes.DTypeError:
            pass
    if found.shape is None:
        return changed
    if record.shape is None:
        record.shape = tuple(-1 if d is None else int(d) for d in found.shape)
        return True
    if len(record.shape) != len(found.shape):
        return changed
    shape = tuple(d if d >= 0 or f is None else int(f) for d, f in zip(record.shape, found.shape))
    if shape != record.shape:
        record.shape = shape
        changed = True
    return changed
