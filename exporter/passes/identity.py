"""Remove nodes that pass their input through unchanged.

Identity; Dropout in inference mode (no ``training_mode`` input, or a constant false one) whose
mask output nobody reads; Cast to the type the input already has; Reshape to the shape the input
already has. Readers of the output read the input instead.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import all_graphs, bypass, constant, copy_model, readers, remove_nodes, static_shape
from schemas import dtypes


def remove_identities(model: ir.Model) -> tuple[ir.Model, int]:
    """Drop pass-through nodes; returns the new model and how many nodes were removed."""
    model = copy_model(model)
    removed = 0
    for graph in all_graphs(model.graph):
        doomed = []
        for node in graph.nodes:
            if node.domain == "" and _passes_through(graph, node):
                if bypass(graph, node, node.outputs[0], node.inputs[0]):
                    doomed.append(node)
        remove_nodes(graph, doomed)
        removed += len(doomed)
    return model, removed


def _passes_through(graph: ir.Graph, node: ir.Node) -> bool:
    if not node.inputs or not node.inputs[0] or not node.outputs:
        return False
    if node.op_type == "Identity":
        return True
    if node.op_type == "Dropout":
        return _dropout_is_noop(graph, node)
    if node.op_type == "Cast":
        return _dtype(graph, node.inputs[0]) == node.attrs.get("to") is not None
    if node.op_type == "Reshape":
        return _reshape_is_noop(graph, node)
    return False


def _dropout_is_noop(graph: ir.Graph, node: ir.Node) -> bool:
    if len(node.outputs) > 1 and node.outputs[1] and (node.outputs[1] in graph.outputs or node.outputs[1] in readers(graph)):
        return False
    if len(node.inputs) < 3 or not node.inputs[2]:
        return True
    training = constant(graph, node.inputs[2])
    return training is not None and not bool(np.asarray(training).reshape(-1)[0])


def _dtype(graph: ir.Graph, name: str) -> int | None:
    value = graph.values.get(name)
    if value is None:
        return None
    if value.data is not None:
        return dtypes.from_numpy(value.data.dtype)
    return value.dtype or None


def _reshape_is_noop(graph: ir.Graph, node: ir.Node) -> bool:
    source = static_shape(graph, node.inputs[0])
    target = constant(graph, node.inputs[1]) if len(node.inputs) > 1 else None
    if source is None or target is None:
        return False
    target = [int(d) for d in np.asarray(target).reshape(-1)]
    if len(target) != len(source):
        return False
    allowzero = node.attrs.get("allowzero", 0)
    resolved = [s if (d == 0 and not allowzero) else d for d, s in zip(target, source)]
    if resolved.count(-1) == 1:
        known = int(np.prod([d for d in resolved if d != -1]))
        total = int(np.prod(source))
        if known == 0 or total % known:
            return False
        resolved[resolved.index(-1)] = total // known
    return tuple(resolved) == source
