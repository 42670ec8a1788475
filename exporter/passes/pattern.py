"""Reading op chains out of a graph: the lookups the pattern-recognition passes share.

A ``ChainReader`` answers "which node of this op type makes this value", "which one node reads it"
and "is this a scalar constant close to c", so a pass states a pattern as a walk over the graph
and gives up (None) at the first step that does not fit.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from exporter import ir
from exporter.passes.graph_edit import all_graphs, constant, copy_model, producers, readers

# Exporters write constants such as sqrt(2) or 1/sqrt(2) in float32: a relative 1e-6 tells them
# from a different constant (a GELU with the wrong constant must not match).
CONSTANT_RTOL = 1e-6


class ChainReader:
    """Producer and reader lookups over one graph, computed once (rebuild after editing the graph)."""

    def __init__(self, graph: ir.Graph):
        self.graph = graph
        self.made = producers(graph)
        self.read = readers(graph)

    def producer(self, name: str, *op_types: str) -> ir.Node | None:
        """The standard-domain node of one of ``op_types`` that makes ``name``, else None."""
        node = self.made.get(name)
        if node is None or node.domain != "" or node.op_type not in op_types:
            return None
        return node

    def sole_reader(self, name: str, *op_types: str) -> ir.Node | None:
        """The one standard-domain node (of ``op_types``) that reads ``name``, where nothing else
        does and ``name`` is no graph output: a value the rewrite may drop."""
        if name in self.graph.outputs:
            return None
        nodes = self.read.get(name, [])
        if len(nodes) != 1 or nodes[0].domain != "" or nodes[0].op_type not in op_types:
            return None
        return nodes[0]

    def only_read_by(self, name: str, node: ir.Node) -> bool:
        return name not in self.graph.outputs and [id(n) for n in self.read.get(name, [])] == [id(node)]

    def scalar(self, name: str) -> float | None:
        """The value of a one-element float constant, else None."""
        data = constant(self.graph, name) if name else None
        if data is None or data.size != 1 or data.dtype.kind != "f":
            return None
        return float(np.asarray(data).reshape(-1)[0])

    def is_scalar(self, name: str, value: float) -> bool:
        got = self.scalar(name)
        return got is not None and math.isclose(got, value, rel_tol=CONSTANT_RTOL)

    def operand_besides(self, node: ir.Node, name: str) -> str | None:
        """The other input of the binary ``node`` that reads ``name`` (None if it reads it twice or not at all)."""
        if len(node.inputs) != 2 or node.inputs.count(name) != 1:
            return None
        return node.inputs[1] if node.inputs[0] == name else node.inputs[0]

    def scaled_by(self, node: ir.Node | None, value: float) -> str | None:
        """For a Mul by the scalar ``value`` (either side), the other operand; else None."""
        if node is None or node.op_type != "Mul" or len(node.inputs) != 2:
            return None
        a, b = node.inputs
        if self.is_scalar(b, value):
            return a
        if self.is_scalar(a, value):
            return b
        return None


def replace_chain(graph: ir.Graph, chain: list[ir.Node], new: ir.Node) -> None:
    """Put ``new`` where the last node of ``chain`` stood and drop the chain (its inner values are
    read by the chain alone, and ``new`` produces the last node's output)."""
    doomed = {id(n) for n in chain}
    last = max(i for i, n in enumerate(graph.nodes) if id(n) in doomed)
    graph.nodes = [new if i == last else n for i, n in enumerate(graph.nodes) if i == last or id(n) not in doomed]


# A pattern: from one candidate node, the chain it heads and the node replacing it, or None.
Matcher = Callable[["ChainReader", ir.Node], "tuple[list[ir.Node], ir.Node] | None"]


def rewrite_matches(model: ir.Model, match: Matcher) -> tuple[ir.Model, int]:
    """A copy of ``model`` with every chain ``match`` finds (in every graph, subgraphs included)
    replaced by its node; returns the copy and how many were replaced."""
    model = copy_model(model)
    found = 0
    for graph in all_graphs(model.graph):
        reader = ChainReader(graph)
        matches = [m for m in (match(reader, node) for node in graph.nodes) if m is not None]
        for chain, node in matches:
            replace_chain(graph, chain, node)
        found += len(matches)
    return model, found
