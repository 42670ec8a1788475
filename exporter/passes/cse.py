"""Common subexpression elimination: compute each distinct (op, inputs, attributes) once.

Identical constants (same dtype, shape and bytes) are merged first, so two nodes reading two
copies of one weight become identical too. A duplicate whose output is a graph output is kept
(the name is public). Nodes with nested graphs, random ops and stateful ops are never merged.
"""

from __future__ import annotations

import hashlib

import numpy as np

from exporter import ir
from exporter.passes.constant_folding import NONDETERMINISTIC
from exporter.passes.graph_edit import all_graphs, copy_model, remove_nodes, rename_uses
from schemas import get_schema, has_schema


def eliminate_common_subexpressions(model: ir.Model) -> tuple[ir.Model, int]:
    """Merge duplicate constants and nodes; returns the new model and how many were merged."""
    model = copy_model(model)
    merged = 0
    for graph in all_graphs(model.graph):
        merged += _merge_constants(graph) + _merge_nodes(graph)
    return model, merged


def _merge_constants(graph: ir.Graph) -> int:
    seen: dict[tuple, str] = {}
    merged = 0
    for name, value in list(graph.values.items()):
        if value.data is None or name in graph.outputs:
            continue
        data = np.asarray(value.data)
        if data.dtype == object:
            continue
        # The shape from data itself: np.ascontiguousarray makes a 0-d array 1-d, so a scalar 4 and
        # a vector [4] would share a key (nn.MultiheadAttention's export holds both).
        contents = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
        key = (data.dtype.str, data.shape, hashlib.sha1(contents).hexdigest())
        if key not in seen:
            seen[key] = name
            continue
        rename_uses(graph, name, seen[key])
        del graph.values[name]
        merged += 1
    return merged


def _merge_nodes(graph: ir.Graph) -> int:
    seen: dict[tuple, ir.Node] = {}
    doomed = []
    for node in graph.nodes:
        key = _key(node)
        if key is None:
            continue
        original = seen.get(key)
        if original is None:
            seen[key] = node
            continue
        if any(o in graph.outputs or (o and not n) for o, n in zip(node.outputs, original.outputs)):
            continue
        for old, new in zip(node.outputs, original.outputs):
            if old:
                rename_uses(graph, old, new)
        doomed.append(node)
    remove_nodes(graph, doomed)
    return len(doomed)


def _key(node: ir.Node) -> tuple | None:
    if node.op_type in NONDETERMINISTIC or any(True for _ in node.subgraphs()):
        return None
    if has_schema(node.op_type, node.domain) and get_schema(node.op_type, node.domain).stateful:
        return None
    attrs = []
    for name, value in sorted(node.attrs.items()):
        if isinstance(value, np.ndarray):
            value = ("tensor", value.dtype.str, value.shape, value.tobytes())
        elif isinstance(value, list):
            value = tuple(value)
        attrs.append((name, value))
    return (node.domain, node.op_type, tuple(node.inputs), len(node.outputs), tuple(attrs))
