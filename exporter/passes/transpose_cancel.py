"""Cancel layout shuffles: Transpose pairs and Reshape chains.

``Transpose(Transpose(x, p), q)`` is ``Transpose(x, p∘q)``, and nothing at all when that is the
identity permutation; ``Reshape(Reshape(x, a), b)`` is ``Reshape(x, b)`` when ``b`` does not copy
dimensions (a 0 entry) from the intermediate shape. The first node of a pair is left for dead
code elimination, as other nodes may still read it.
"""

from __future__ import annotations

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import all_graphs, bypass, constant, copy_model, producers, remove_nodes


def cancel_transposes(model: ir.Model) -> tuple[ir.Model, int]:
    """Compose or remove Transpose pairs and shorten Reshape chains; returns the model and rewrites."""
    model = copy_model(model)
    changed = 0
    for graph in all_graphs(model.graph):
        doomed = []
        for node in graph.nodes:
            if node.domain != "" or not node.inputs or not node.inputs[0]:
                continue
            if node.op_type == "Transpose":
                result = _transpose(graph, node)
            elif node.op_type == "Reshape":
                result = _reshape(graph, node)
            else:
                continue
            if result == "removed":
                doomed.append(node)
            changed += result is not None
        remove_nodes(graph, doomed)
    return model, changed


def _perm(graph: ir.Graph, node: ir.Node) -> list[int] | None:
    perm = node.attrs.get("perm")
    if perm is not None:
        return [int(p) for p in perm]
    value = graph.values.get(node.inputs[0])
    if value is not None and value.shape is not None:
        return list(range(len(value.shape)))[::-1]
    return None


def _transpose(graph: ir.Graph, node: ir.Node) -> str | None:
    perm = _perm(graph, node)
    if perm is None:
        return None
    if perm == list(range(len(perm))):
        return "removed" if bypass(graph, node, node.outputs[0], node.inputs[0]) else None
    first = producers(graph).get(node.inputs[0])
    if first is None or first.op_type != "Transpose" or first.domain != "":
        return None
    inner = _perm(graph, first)
    if inner is None or len(inner) != len(perm):
        return None
    composed = [inner[p] for p in perm]
    if composed == list(range(len(composed))):
        return "removed" if bypass(graph, node, node.outputs[0], first.inputs[0]) else None
    node.inputs[0] = first.inputs[0]
    node.attrs = {**node.attrs, "perm": composed}
    return "rewired"


def _reshape(graph: ir.Graph, node: ir.Node) -> str | None:
    first = producers(graph).get(node.inputs[0])
    if first is None or first.op_type != "Reshape" or first.domain != "" or len(node.inputs) < 2:
        return None
    target = constant(graph, node.inputs[1])
    if target is None:
        return None
    if not node.attrs.get("allowzero", 0) and np.any(np.asarray(target) == 0):
        return None
    node.inputs[0] = first.inputs[0]
    return "rewired"
