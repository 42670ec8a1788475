"""Remove what no output needs: nodes, unread trailing optional outputs, constants, stale value records.

A value read only by a nested graph (an If branch capturing it) is live. Stateful ops are kept
whatever reads them: running them is the point.
"""

from __future__ import annotations

from exporter import ir
from exporter.passes.graph_edit import copy_model, node_reads
from schemas import get_schema, has_schema


def eliminate_dead_code(model: ir.Model) -> tuple[ir.Model, int]:
    """Drop dead nodes, outputs and constants; returns the new model and how many went."""
    model = copy_model(model)
    return model, _sweep(model.graph)


def _sweep(graph: ir.Graph) -> int:
    removed = 0
    for node in graph.nodes:
        for sub in node.subgraphs():
            removed += _sweep(sub)
    live = set(graph.outputs)
    kept: list[ir.Node] = []
    for node in reversed(graph.nodes):
        if not any(o in live for o in node.outputs if o) and not _stateful(node):
            removed += 1
            continue
        removed += _trim_outputs(node, live)
        live.update(node_reads(node))
        kept.append(node)
    graph.nodes = kept[::-1]
    referenced = live | set(graph.inputs) | {o for node in graph.nodes for o in node.outputs}
    for name in [n for n in graph.values if n not in referenced]:
        if graph.values[name].data is not None:
            removed += 1
        del graph.values[name]
    return removed


def _stateful(node: ir.Node) -> bool:
    return has_schema(node.op_type, node.domain) and get_schema(node.op_type, node.domain).stateful


def _trim_outputs(node: ir.Node, live: set[str]) -> int:
    """Drop unread trailing optional outputs (a Dropout mask, BatchNorm's running statistics)."""
    if not has_schema(node.op_type, node.domain):
        return 0
    params = get_schema(node.op_type, node.domain).outputs
    trimmed = 0
    while len(node.outputs) > 1 and node.outputs[-1] not in live:
        i = len(node.outputs) - 1
        if i >= len(params) or not params[i].optional or params[i].variadic:
            break
        node.outputs.pop()
        trimmed += 1
    return trimmed
