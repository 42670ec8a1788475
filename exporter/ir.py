"""The in-memory graph IR for inference graphs: what importers and freeze produce, and what the
passes and the .flow writer consume.

Values are named; a node refers to its inputs and outputs by name ("" = an omitted optional
input). Constants are values with data. Graph attributes hold nested ``Graph`` objects whose
nodes may read names of enclosing graphs (outer-scope captures, as in ONNX).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Container, Iterator

import numpy as np

from schemas import dtypes


@dataclass(frozen=True)
class ElementType:
    """What a sequence or an optional holds: a tensor (``dtype`` a tensor code or None, ``shape``
    as on ``Value``), or, where ``dtype`` is SEQUENCE or OPTIONAL, a container of ``element``
    (None = unknown). ``str`` gives the text Optional's ``type`` attribute is kept as, and
    ``parse`` reads it back: ``tensor(FP32)[2,-1]``, ``seq(tensor(INT64))``, ``optional(seq(...))``.
    """

    dtype: int | None
    shape: tuple[int, ...] | None = None
    element: ElementType | None = None

    def __str__(self) -> str:
        if self.dtype in _CONTAINER_NAMES:
            return f"{_CONTAINER_NAMES[self.dtype]}({'?' if self.element is None else self.element})"
        dims = "" if self.shape is None else "[" + ",".join(str(d) for d in self.shape) + "]"
        return f"tensor({dtypes.NAMES.get(self.dtype or dtypes.UNDEFINED, self.dtype)}){dims}"

    @classmethod
    def parse(cls, text: str) -> ElementType:
        """The type ``text`` (as ``str`` writes it) describes; ValueError if it describes none."""
        match = _TYPE_TEXT.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} is not a type")
        container, inner, name, dims = match.groups()
        if container:
            return cls(_CONTAINER_CODES[container], element=None if inner == "?" else cls.parse(inner))
        if name not in _CODES_BY_NAME:
            raise ValueError(f"{text!r} names no element type")
        shape = None if dims is None else tuple(int(d) for d in dims.split(",") if d)
        return cls(_CODES_BY_NAME[name] or None, shape)


_CONTAINER_NAMES = {dtypes.SEQUENCE: "seq", dtypes.OPTIONAL: "optional"}
_CONTAINER_CODES = {v: k for k, v in _CONTAINER_NAMES.items()}
_CODES_BY_NAME = {name: code for code, name in dtypes.NAMES.items() if code not in _CONTAINER_NAMES}
_TYPE_TEXT = re.compile(r"(seq|optional)\((.*)\)|tensor\((\w+)\)(?:\[([-\d,]*)\])?")


@dataclass
class Value:
    name: str
    dtype: int | None = None  # schemas.dtypes code; None = unknown
    shape: tuple[int, ...] | None = None  # -1 = unknown dim; None = unknown rank
    data: np.ndarray | None = None  # constants only
    element: ElementType | None = None  # what a sequence / optional value (dtype SEQUENCE, OPTIONAL) holds


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


def unused_name(hint: str, taken: Container[str]) -> str:
    """``hint``, else ``hint_1``, ``hint_2``, ...: the first that is not in ``taken``.

    >>> unused_name("w", {"w", "w_1"})
    'w_2'
    """
    name, n = hint, 0
    while name in taken:
        n += 1
        name = f"{hint}_{n}"
    return name
