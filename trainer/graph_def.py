"""TF1's GraphDef workflow: ``graph.as_graph_def()``, ``SerializeToString``/``ParseFromString``,
``tf.import_graph_def`` and ``tf.train.write_graph``, over flowstack's graph file format (the
``.npz`` of trainer/saver.py's ``graph_to_dict``), not TensorFlow's protocol buffers.

A script that freezes its model the TF1 way (``tf.graph_util.convert_variables_to_constants``,
write the bytes, read them back elsewhere and ``import_graph_def``) runs unchanged, and
``tf.lite.TFLiteConverter.from_frozen_graph`` converts the file to ``.flow``.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field

import numpy as np

from trainer.checkpoint_format import atomic_write, json_member, write_npz
from trainer.graph import Graph, GraphError, get_default_graph
from trainer.saver import FORMAT_VERSION, graph_from_dict, graph_to_dict

__all__ = ["GraphDef", "NodeDef", "import_graph_def", "write_graph"]

_MAX_BYTES = 2 << 30


@dataclass
class NodeDef:
    """A node as TF1 scripts read one: ``name``, ``op``, ``input`` (``"x"``, ``"x:1"``, ``"^ctrl"``), ``device``."""

    name: str
    op: str
    input: list[str] = field(default_factory=list)
    device: str = ""


def _tf_input(ref: str) -> str:
    name, _, index = ref.partition(":")
    return name if index in ("", "0") else ref


class GraphDef:
    """A serialized graph: its description (nodes, collections, loops) and the arrays it refers to."""

    def __init__(self, description: dict | None = None, arrays: dict | None = None):
        self.description = description if description is not None else \
            {"format": "flowstack-graph", "version": FORMAT_VERSION, "nodes": [], "collections": {}, "loops": [],
             "conds": []}
        self.arrays = dict(arrays or {})

    @property
    def node(self) -> list[NodeDef]:
        return [NodeDef(nd["name"], nd["op"], [_tf_input(i) for i in nd["inputs"] if i is not None]
                        + [f"^{c}" for c in nd["control_inputs"]], nd.get("device", ""))
                for nd in self.description["nodes"]]

    def SerializeToString(self) -> bytes:  # noqa: N802 - protobuf's name
        buffer = io.BytesIO()
        write_npz(buffer, {"__graph__": json_member(self.description), **self.arrays})
        return buffer.getvalue()

    def ParseFromString(self, data: bytes) -> int:  # noqa: N802 - protobuf's name
        """Read ``data`` (SerializeToString's bytes, or a file ``write_graph`` wrote) into this GraphDef."""
        if len(data) > _MAX_BYTES:
            raise ValueError(f"GraphDef: {len(data)} bytes is over the {_MAX_BYTES}-byte limit")
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as members:
                description = json.loads(bytes(members["__graph__"]).decode("utf-8"))
                arrays = {k: members[k] for k in members.files if k != "__graph__"}
        except Exception as e:  # noqa: BLE001 - truncated, damaged or foreign bytes: say so
            raise ValueError(f"GraphDef.ParseFromString: not a flowstack graph (a TensorFlow .pb cannot be read; "
                             f"export from flowstack, or convert an ONNX model with flowstack convert): "
                             f"{type(e).__name__}: {e}") from None
        if not isinstance(description, dict) or description.get("format") != "flowstack-graph":
            raise ValueError("GraphDef.ParseFromString: not a flowstack graph description")
        self.description, self.arrays = description, arrays
        return len(data)

    MergeFromString = ParseFromString

    def ByteSize(self) -> int:  # noqa: N802 - protobuf's name
        return len(self.SerializeToString())


def as_graph_def(graph: Graph) -> GraphDef:
    return GraphDef(*graph_to_dict(graph))


def _prefixed(description: dict, prefix: str) -> dict:
    """The description with every node name, and every string naming a node or its output, under ``prefix/``."""
    names = {nd["name"] for nd in description["nodes"]}

    def rename(value):
        if isinstance(value, str):
            node, sep, index = value.partition(":")
            return f"{prefix}/{node}{sep}{index}" if node in names else value
        if isinstance(value, list):
            return [rename(v) for v in value]
        if isinstance(value, dict):
            return {rename(k): rename(v) for k, v in value.items()}
        return value

    out = dict(description)
    out["nodes"] = [{**nd, "name": f"{prefix}/{nd['name']}", "inputs": rename(nd["inputs"]),
                     "control_inputs": rename(nd["control_inputs"])} for nd in description["nodes"]]
    for key in ("collections", "loops", "conds"):
        out[key] = rename(description.get(key, {} if key == "collections" else []))
    return out


def import_graph_def(graph_def: GraphDef, input_map: dict | None = None, return_elements=None, name: str | None = None,
                     op_dict=None, producer_op_list=None):
    """Build ``graph_def``'s nodes into the default graph under the name scope ``name`` (default
    ``import``; ``""`` for none). ``input_map`` (``{"x:0": tensor}``) feeds the imported nodes from
    tensors of this graph instead; ``return_elements`` names the tensors (``"y:0"``) or ops to return."""
    if not isinstance(graph_def, GraphDef):
        raise TypeError(f"import_graph_def takes a GraphDef, got {type(graph_def).__name__}")
    prefix = "import" if name is None else name.rstrip("/")
    description = _prefixed(graph_def.description, prefix) if prefix else graph_def.description
    graph = get_default_graph()
    known = len(graph.nodes)
    graph_from_dict(description, graph_def.arrays, graph, source="GraphDef")
    imported = graph.nodes[known:]

    def local(ref: str) -> str:
        return f"{prefix}/{ref}" if prefix else ref

    for ref, tensor in (input_map or {}).items():
        ref = ref if ":" in ref else f"{ref}:0"
        try:
            old = graph.tensor(local(ref))
        except (KeyError, GraphError):
            raise ValueError(f"import_graph_def: input_map names {ref!r}, which is not in the GraphDef") from None
        for node in imported:
            node.inputs = [tensor if t is old else t for t in node.inputs]
    if return_elements is None:
        return None
    found = []
    for ref in return_elements:
        try:
            found.append(graph.tensor(local(ref)) if ":" in ref else graph.node(local(ref)))
        except (KeyError, GraphError):
            raise ValueError(f"import_graph_def: return_elements names {ref!r}, which is not in the GraphDef") from None
    return found


def write_graph(graph_or_graph_def, logdir: str, name: str, as_text: bool = True) -> str:
    """Write the graph's GraphDef to ``logdir/name`` and return the path. The file is always the
    binary graph format (``as_text`` has no text form here); ``ParseFromString`` reads it back."""
    graph_def = graph_or_graph_def if isinstance(graph_or_graph_def, GraphDef) else as_graph_def(graph_or_graph_def)
    path = os.path.join(os.fspath(logdir), name)
    data = graph_def.SerializeToString()
    atomic_write(path, lambda f: f.write(data))
    return path
