"""The in-memory graph IR for inference graphs: what importers and freeze produce, and what the
passes and the .flow writer consume.

Values are named; a node refers to its inputs and outputs by name ("" = an omitted optional
input). Constants are values with data. Graph attributes hold nested ``Graph`` objects whose
nodes may read names of enclosing graphs (outer-scope captures, as in ONNX).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np


@dataclass
class Value:
    name: str
    dtype: int | None = None  # schemas.dtypes code; None = unknown
    shape: tuple[int, ...] | None = None  # -1 = unknown dim; None = unknown rank
    data: np.ndarray | None = None  # constants only


@dataclass
class Node:
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    domain: str = ""

    def subgraphs(self) -> Iterator["Graph"]:
        for value in self.attrs.values():
            if isinstance(value, Graph):
                yield value


@dataclass
class Graph:
    name: str = "main"
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    values: dict[str, Value] = field(default_factory=dict)

    def value(self, name: str) -> Value:
        if name not in self.values:
            self.values[name] = Value(name)
        return self.values[name]

    def constants(self) -> dict[str, np.ndarray]:
        return {n: v.data for n, v in self.values.items() if v.data is not None}

    def free_names(self) -> list[str]:
        """Names this graph (and its nested graphs) read but does not define: its outer captures."""
        defined = set(self.inputs) | set(self.constants())
        free: list[str] = []
        for node in self.nodes:
            needed = [n for n in node.inputs if n] + [n for g in node.subgraphs() for n in g.free_names()]
            for name in needed:
                if name not in defined and name not in free:
                    free.append(name)
            defined.update(node.outputs)
        for name in self.outputs:
            if name not in defined and name not in free:
                free.append(name)
        return free


@dataclass
class Signature:
    inputs: dict[str, str]  # public name -> value name
    outputs: dict[str, str]


@dataclass
class Model:
    graph: Graph
    opset_imports: dict[str, int] = field(default_factory=lambda: {"": 21})
    producer: str = "flowstack"
    metadata: dict[str, str] = field(default_factory=dict)
    signatures: dict[str, Signature] = field(default_factory=dict)
