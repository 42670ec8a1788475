"""Graph editing shared by the passes: copying, use/def maps, and rewiring that respects subgraphs.

Nested graphs (If branches, Loop/Scan bodies) read values of enclosing graphs by name. Every
helper here counts such a capture as a use, and every rename reaches into nested graphs, so a
pass built on them never drops or breaks an outer-scope capture.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Callable, Iterator

import numpy as np

from exporter import ir


def copy_graph(graph: ir.Graph) -> ir.Graph:
    """A copy whose nodes, value records and nested graphs may be edited freely (arrays are shared)."""
    nodes = []
    for node in graph.nodes:
        attrs = {k: copy_graph(v) if isinstance(v, ir.Graph) else v for k, v in node.attrs.items()}
        nodes.append(ir.Node(node.op_type, list(node.inputs), list(node.outputs), attrs, node.name, node.domain))
    values = {n: dataclasses.replace(v) for n, v in graph.values.items()}
    return ir.Graph(graph.name, nodes, list(graph.inputs), list(graph.outputs), values)


def copy_model(model: ir.Model) -> ir.Model:
    return ir.Model(
        copy_graph(model.graph),
        dict(model.opset_imports),
        model.producer,
        dict(model.metadata),
        {k: ir.Signature(dict(s.inputs), dict(s.outputs)) for k, s in model.signatures.items()},
    )


def all_graphs(graph: ir.Graph) -> Iterator[ir.Graph]:
    """``graph`` and every graph nested in it, innermost first (so a pass sees bodies before their owners)."""
    for node in graph.nodes:
        for sub in node.subgraphs():
            yield from all_graphs(sub)
    yield graph


def op_counts(graph: ir.Graph) -> Counter:
    """Nodes per op type, nested graphs included."""
    counts: Counter = Counter()
    for g in all_graphs(graph):
        counts.update(node.op_type for node in g.nodes)
    return counts


def node_reads(node: ir.Node) -> list[str]:
    """Names a node reads from its graph: its inputs and the captures of its nested graphs."""
    names = [n for n in node.inputs if n]
    for sub in node.subgraphs():
        names.extend(sub.free_names())
    return names


def readers(graph: ir.Graph) -> dict[str, list[ir.Node]]:
    """Value name -> nodes of ``graph`` that read it (directly or through a nested graph's capture)."""
    result: dict[str, list[ir.Node]] = {}
    for node in graph.nodes:
        for name in dict.fromkeys(node_reads(node)):
            result.setdefault(name, []).append(node)
    return result


def producers(graph: ir.Graph) -> dict[str, ir.Node]:
    return {out: node for node in graph.nodes for out in node.outputs if out}


def constant(graph: ir.Graph, name: str, outer: dict[str, np.ndarray] | None = None) -> np.ndarray | None:
    """The constant value of ``name`` in ``graph`` (or captured from ``outer``), else None."""
    value = graph.values.get(name)
    if value is not None and value.data is not None:
        return value.data
    if outer is not None and name not in _defined(graph):
        return outer.get(name)
    return None


def _defined(graph: ir.Graph) -> set[str]:
    return set(graph.inputs) | {o for node in graph.nodes for o in node.outputs}


def fresh_name(graph: ir.Graph, hint: str) -> str:
    taken = set(graph.values) | {o for g in all_graphs(graph) for node in g.nodes for o in node.outputs}
    name, i = hint, 0
    while name in taken:
        i += 1
        name = f"{hint}_{i}"
    return name


def add_constant(graph: ir.Graph, hint: str, data: np.ndarray) -> str:
    name = fresh_name(graph, hint)
    graph.values[name] = ir.Value(name, data=np.ascontiguousarray(data))
    return name


def rename_uses(graph: ir.Graph, old: str, new: str) -> None:
    """Make every reader of ``old`` in ``graph`` (nested graphs' captures included) read ``new``."""
    for node in graph.nodes:
        node.inputs = [new if n == old else n for n in node.inputs]
        for sub in node.subgraphs():
            if old not in _defined(sub) and (old not in sub.values or sub.values[old].data is None):
                rename_uses(sub, old, new)
                sub.outputs = [new if n == old else n for n in sub.outputs]


def rename_value(graph: ir.Graph, old: str, new: str) -> None:
    """Rename a value defined in ``graph``: its producer's output, its readers and the graph outputs."""
    for node in graph.nodes:
        node.outputs = [new if n == old else n for n in node.outputs]
    rename_uses(graph, old, new)
    graph.outputs = [new if n == old else n for n in graph.outputs]
    record = graph.values.pop(old, None)
    if record is not None and (new not in graph.values or graph.values[new].dtype is None):
        graph.values[new] = dataclasses.replace(record, name=new)


def bypass(graph: ir.Graph, node: ir.Node, old: str, new: str) -> bool:
    """Rewire readers of ``old`` (an output of ``node``) to ``new``, so ``node`` can be removed.

    When ``old`` is an output of the graph, the name must survive: if ``new`` is produced by a
    node of this graph and is not itself public, that producer takes the name ``old`` instead.
    Returns False (and changes nothing) when the rewiring is not possible.
    """
    if old in graph.outputs:
        made = producers(graph)
        if new not in made or new in graph.outputs or new in graph.inputs or made[new] is node:
            return False
        rename_value(graph, new, old)
        return True
    rename_uses(graph, old, new)
    return True


def remove_nodes(graph: ir.Graph, doomed: list[ir.Node]) -> None:
    ids = {id(n) for n in doomed}
    graph.nodes = [n for n in graph.nodes if id(n) not in ids]


def fuse_into_producers(model: ir.Model, domain: str,
                        absorb: Callable[[ir.Graph, ir.Node], bool]) -> tuple[ir.Model, int]:
    """The driver of a pass that fuses a node into the producer of its input: ``absorb(graph,
    node)`` rewrites the producer in place (taking over ``node``'s outputs) where ``node``
    qualifies and says so; those nodes are then removed, and ``domain`` is imported when any was.
    Returns the new model (the input is left as it was) and how many nodes were fused."""
    model = copy_model(model)
    fused = 0
    for graph in all_graphs(model.graph):
        doomed = [node for node in graph.nodes if absorb(graph, node)]
        remove_nodes(graph, doomed)
        fused += len(doomed)
    if fused:
        model.opset_imports.setdefault(domain, 1)
    return model, fused


def static_shape(graph: ir.Graph, name: str) -> tuple[int, ...] | None:
    """The fully known shape of ``name`` (constant data or a declared shape without -1), else None."""
    value = graph.values.get(name)
    if value is None:
        return None
    if value.data is not None:
        return tuple(value.data.shape)
    if value.shape is not None and all(d >= 0 for d in value.shape):
        return tuple(value.shape)
    return None
