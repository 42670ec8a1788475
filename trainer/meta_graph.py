"""TensorFlow 1.x meta graphs: a graph, its collections and its saver in one file, without pickle.

``Saver.save`` writes one beside each checkpoint (``<prefix>.meta``, TF's default
``write_meta_graph=True``), so the canonical "restore in another script" works unchanged::

    saver = tf.train.import_meta_graph("model.ckpt-3.meta")
    saver.restore(sess, tf.train.latest_checkpoint("./"))
    y = tf.get_default_graph().get_tensor_by_name("y:0")
    train_op = tf.get_collection("train_op")[0]

The file is the graph file of ``trainer/saver.py`` (an ``.npz`` whose ``__graph__`` member is UTF-8
JSON) with two more keys in that JSON:

- ``"meta_collections"``: ``{key: [item, ...]}`` for every collection whose items can be named:
  ``{"variable": op name}``, ``{"tensor": "op:0"}``, ``{"op": op name}``, ``{"partitioned":
  {name, shape, dtype, axis, variables: [shard op names]}}``, ``{"value": str | int | float | bool}`` or
  ``{"queue_runner": {queue, enqueue_ops, close_op, cancel_op}}`` (op names, as TensorFlow's
  QueueRunnerDef). Items of other kinds (Python objects, a runner feeding Python values) are left
  out, with a logged warning, as TensorFlow does.
- ``"saver"``: ``{"variables": {name in the checkpoint: [variable op names]}}`` (several: the
  shards of a partitioned variable) for the saver that wrote the file, so ``import_meta_graph``
  returns a Saver restoring the same checkpoint names.
- ``"slice_infos"``: ``{shard op name: SaveSliceInfo.to_dict()}``, where each shard of a
  partitioned variable sits in it.
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass, field

import numpy as np

from trainer import tf_logging
from trainer.checkpoint_format import atomic_write, json_member, write_npz
from trainer.graph import Graph, GraphError, Node, Tensor, get_default_graph
from trainer.partitioned_variables import PartitionedVariable, SaveSliceInfo
from trainer.queues import QueueRunner
from trainer.saver import Saver, graph_from_dict, graph_to_dict, variable_from_node
from trainer.variables import Variable, global_variables

__all__ = ["MetaGraphDef", "MetaGraphError", "export_meta_graph", "import_meta_graph", "meta_graph_bytes", "meta_graph_dict"]


class MetaGraphError(GraphError):
    """A meta graph file that is missing, damaged, or does not fit the graph it is imported into."""


@dataclass
class MetaGraphDef:
    """What ``export_meta_graph`` returns and ``import_meta_graph`` takes: the file's JSON
    description and the arrays its attributes refer to."""

    description: dict
    arrays: dict = field(default_factory=dict)


# -- collection items ------------------------------------------------------------------------------
_ENCODERS = (  # (kinds, item -> (kind, JSON value)); a collection item takes the first that fits
    (Variable, lambda item: ("variable", item.node.name)),
    (Tensor, lambda item: ("tensor", item.name)),
    (Node, lambda item: ("op", item.name)),
    (PartitionedVariable, lambda item: ("partitioned", {
        "name": item.name, "shape": list(item.shape), "dtype": np.dtype(item.dtype).name, "axis": item.axis,
        "variables": [v.node.name for v in item]})),
    ((str, bool, int, float), lambda item: ("value", item)),
    # a runner of graph ops only: one feeding Python values each run (feed_fn) cannot be written
    (QueueRunner, lambda item: ("queue_runner", None if item.feed_fn is not None else {
        "queue": item.queue.node.name, "enqueue_ops": [_op_name(op) for op in item.enqueue_ops],
        "close_op": _op_name(item.close_op), "cancel_op": _op_name(item.cancel_op)})),
)


def _op_name(op) -> str:
    return op.node.name if isinstance(op, Tensor) else op.name


def _encode_item(item) -> dict | None:
    for kinds, encode in _ENCODERS:
        if isinstance(item, kinds):
            kind, value = encode(item)
            return None if value is None else {kind: value}
    return None


def _variable(graph: Graph, name: str) -> Variable:
    node = graph.node(name)
    existing = getattr(node, "variable", None)
    return existing if existing is not None else variable_from_node(node, trainable=False)


_DECODERS = {
    "variable": _variable,
    "tensor": lambda graph, name: graph.tensor(name),
    "op": lambda graph, name: graph.node(name),
    "partitioned": lambda graph, d: PartitionedVariable(d["name"], d["shape"], d["dtype"],
                                                        [_variable(graph, n) for n in d["variables"]], d["axis"]),
    "value": lambda graph, value: value,
    "queue_runner": lambda graph, d: QueueRunner.from_graph(graph, d["queue"], d["enqueue_ops"], d["close_op"],
                                                            d["cancel_op"]),
}


_WARNED: set = set()  # (collection, item type) already reported: Saver.save writes a meta graph each save


def _warn_once(key: str, kind: str) -> None:
    if (key, kind) not in _WARNED:
        _WARNED.add((key, kind))
        tf_logging.warning("meta graph: collection %r holds a %s, which cannot be written; left out", key, kind)


def _collections(graph: Graph, keys) -> dict:
    out = {}
    for key in keys:
        items = []
        for item in graph.get_collection(key):
            encoded = _encode_item(item)
            if encoded is None:
                _warn_once(key, type(item).__name__)
            else:
                items.append(encoded)
        if items:
            out[key] = items
    return out


def _saver_record(saver: Saver | None) -> dict | None:
    if saver is None:
        return None
    return {"variables": {e.name: [v.node.name for v in e.variables] for e in saver.entries}}


def _slice_infos(graph: Graph) -> dict:
    """Where each shard of a partitioned variable sits, by shard op name (a saver needs it)."""
    return {v.node.name: v.save_slice_info.to_dict() for v in global_variables(graph) if v.save_slice_info is not None}


def _set_slice_infos(graph: Graph, infos: dict) -> None:
    for name, info in infos.items():
        _variable(graph, name).save_slice_info = SaveSliceInfo(
            info["full_name"], tuple(info["full_shape"]), tuple(info["var_offset"]), tuple(info["var_shape"]))


def meta_graph_dict(graph: Graph, saver: Saver | None = None, collection_list=None) -> tuple[dict, dict]:
    """(description, arrays) of ``graph``'s meta graph: graph, collections (``collection_list``, or
    all of them), and ``saver``'s variables."""
    desc, arrays = graph_to_dict(graph)
    keys = graph.get_all_collection_keys() if collection_list is None else list(collection_list)
    desc["meta_collections"] = _collections(graph, keys)
    desc["slice_infos"] = _slice_infos(graph)
    desc["saver"] = _saver_record(saver)
    return desc, arrays


def _npz_bytes(desc: dict, arrays: dict) -> bytes:
    buf = io.BytesIO()
    write_npz(buf, {"__graph__": json_member(desc), **arrays})
    return buf.getvalue()


def meta_graph_bytes(graph: Graph, saver: Saver | None = None, collection_list=None) -> bytes:
    """The meta graph file's bytes (an ``.npz``)."""
    return _npz_bytes(*meta_graph_dict(graph, saver, collection_list))


def export_meta_graph(filename: str | None = None, meta_info_def=None, graph_def=None, saver_def=None,
                      collection_list=None, as_text: bool = False, graph: Graph | None = None,
                      export_scope=None, clear_devices: bool = False, clear_extraneous_savers: bool = False,
                      strip_default_attrs: bool = False, save_debug_info: bool = False,
                      saver: Saver | None = None) -> MetaGraphDef:
    """``tf.train.export_meta_graph``: write the default (or given) graph's meta graph to ``filename``
    (when given) and return it. ``saver`` names the Saver whose variables ``import_meta_graph``
    restores (default: every global variable)."""
    given = {"meta_info_def": meta_info_def, "graph_def": graph_def, "saver_def": saver_def,
             "export_scope": export_scope}
    unsupported = [k for k, v in given.items() if v is not None] + (["as_text"] if as_text else [])
    if unsupported:
        raise ValueError(f"export_meta_graph: {', '.join(unsupported)} not supported; export the default (or "
                         f"graph=) graph whole, in the binary format")
    graph = graph if graph is not None else get_default_graph()
    desc, arrays = meta_graph_dict(graph, saver, collection_list)
    if clear_devices:
        for nd in desc["nodes"]:
            nd["device"] = ""
    if filename is not None:
        data = _npz_bytes(desc, arrays)
        atomic_write(os.fspath(filename), lambda f: f.write(data))
    return MetaGraphDef(desc, arrays)


def _read(path: str) -> tuple[dict, dict]:
    if not os.path.isfile(path):
        raise MetaGraphError(f"meta graph {path!r} does not exist (Saver.save writes <prefix>.meta beside "
                             f"each checkpoint; was it saved with write_meta_graph=False?)")
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as data:
            desc = json.loads(bytes(data["__graph__"]).decode("utf-8"))
            arrays = {k: data[k] for k in data.files if k != "__graph__"}
    except Exception as e:  # noqa: BLE001 - truncated, damaged or foreign: say which file
        raise MetaGraphError(f"meta graph {path!r} is unreadable (damaged, or not written by flowstack): "
                             f"{type(e).__name__}: {e}") from None
    return desc, arrays


def import_meta_graph(meta_graph_or_file, clear_devices: bool = False, import_scope=None,
                      graph: Graph | None = None) -> Saver | None:
    """``tf.train.import_meta_graph``: rebuild a meta graph (a ``.meta`` file, or the MetaGraphDef
    ``export_meta_graph`` returned) into the default graph, with its collections; returns a Saver
    that restores its variables (None when it has none)."""
    if import_scope is not None:
        raise ValueError("import_meta_graph: import_scope= is not supported; import into an empty graph")
    if isinstance(meta_graph_or_file, MetaGraphDef):
        desc, arrays, source = meta_graph_or_file.description, meta_graph_or_file.arrays, "meta graph"
    else:
        path = os.fspath(meta_graph_or_file)
        (desc, arrays), source = _read(path), f"meta graph {path!r}"
    graph = graph if graph is not None else get_default_graph()
    known = len(graph.nodes)
    try:
        graph_from_dict(desc, arrays, graph, source=source)
        for key, items in desc.get("meta_collections", {}).items():
            present = graph.get_collection_ref(key)
            for item in items:
                ((kind, value),) = item.items()
                decoded = _DECODERS[kind](graph, value)
                if not any(decoded is p for p in present):
                    present.append(decoded)
        _set_slice_infos(graph, desc.get("slice_infos", {}))
        record = desc.get("saver")
        var_list = None if not record else {k: [_variable(graph, n) for n in names]
                                             for k, names in record["variables"].items()}
    except MetaGraphError:
        raise
    except (GraphError, KeyError, TypeError, ValueError, AttributeError) as e:
        raise MetaGraphError(f"{source} is damaged or does not fit this graph: {type(e).__name__}: {e}") from None
    if clear_devices:
        for node in graph.nodes[known:]:
            node.device = ""
    if var_list is None and not global_variables(graph):
        return None
    return Saver(var_list=var_list, graph=graph)
