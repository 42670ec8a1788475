"""Checkpoints and graph files, without pickle.

Files in a checkpoint directory:

A checkpoint is named by its prefix, as in TensorFlow 1.x: ``Saver.save`` returns ``<path>-<step>``
and ``latest_checkpoint`` the newest such prefix; ``checkpoint_format.checkpoint_file`` maps a
prefix to its file (an old flowstack path naming the file itself still works).

- ``<prefix>.ckpt``: a NumPy ``.npz`` archive (a zip of ``.npy`` members, read with
  ``np.load(allow_pickle=False)``): one member per variable, keyed by variable name, plus
  ``__meta__``, UTF-8 JSON as a uint8 array: ``{"format": "flowstack-checkpoint", "version": 1,
  "variables": {name: {"dtype": "float32", "shape": [..]}}, "crc32": {name: int}}`` (``crc32``,
  each variable's checksum, was appended later; readers check it where present). Written to a
  temporary file, fsynced, then renamed, so a crash never leaves a half-written checkpoint under
  its real name.
- ``checkpoint``: JSON ``{"model_checkpoint_path": ..., "all_model_checkpoint_paths": [...]}``,
  file names relative to the folder, naming the newest complete checkpoint (also replaced
  atomically; see ``trainer/checkpoint_index.py`` for how it is read without losing work).
- ``<prefix>.meta``: the meta graph (graph, collections, saver; ``trainer/meta_graph.py``).
- ``graph.npz``: the graph (see ``export_graph``): member ``__graph__`` is UTF-8 JSON with
  ``{"format": "flowstack-graph", "version": 1, "nodes": [...], "collections": {...}}``; each node
  is ``{"name", "op", "domain", "inputs": ["node:index" | null], "control_inputs": [names],
  "attrs": {...}, "device", "outputs": [{"dtype", "shape"}]}``; an array-valued attribute is
  ``{"__array__": key}`` naming another member of the archive. ``loops`` and ``conds`` record each
  while_loop's and cond's structure by node name (see WhileLoop.to_dict / cond) so an exporter
  can rebuild functional Loop / If ops. ``import_graph`` rebuilds the graph.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time

import numpy as np

from schemas.registry import TensorType
from trainer.checkpoint_format import (FORMAT_VERSION, CheckpointError, atomic_write, checkpoint_file, checkpoint_prefix,
                                       json_member, load_checkpoint, write_npz)
from trainer.checkpoint_index import (GRAPH_FILE, STATE_FILE, CheckpointWarning, checkpoint_history, checkpoint_members,
                                      checkpoint_state, latest_checkpoint, write_index)
from trainer.graph import TRAINER_DOMAIN, Graph, GraphError, GraphKeys, get_default_graph
from trainer.ops import concat, constant, group, make_op, placeholder
from trainer.variables import Variable, global_variables
from trainer.saved_slices import LogicalTensor, entries_from, slices_meta
from trainer.slot_names import stored_name

__all__ = ["CheckpointError", "CheckpointWarning", "GRAPH_FILE", "STATE_FILE", "Saver", "SaverDef", "checkpoint_state",
           "export_graph", "graph_from_dict", "graph_to_dict", "import_graph", "latest_checkpoint", "load_checkpoint",
           "node_to_dict", "variable_from_node"]


class SaverDef:
    """``tf.train.SaverDef``'s checkpoint format versions, which scripts pass as ``Saver(write_version=...)``.
    A Saver here always writes flowstack's one-file checkpoint, and reads TensorFlow's V2 bundles too."""

    LEGACY, V1, V2 = 0, 1, 2
    CheckpointFormatVersion = {"LEGACY": 0, "V1": 1, "V2": 2}


# -- Saver ----------------------------------------------------------------------------------------
class Saver:
    """Saves and restores variables with Save/Restore ops; keeps the newest ``max_to_keep``.

    ``var_list`` is as in TensorFlow 1.x: None (every global variable), a list of variables
    (partitioned ones too), or a dict ``{name in the checkpoint: variable}``. The other arguments
    are TF 1.x's: ``keep_checkpoint_every_n_hours`` keeps, out of those rotation would delete, one
    checkpoint per that many hours (unlisted, never deleted); ``pad_step_number`` names steps
    ``-00000003``; ``sharded``, ``name``, ``restore_sequentially``, ``defer_build``,
    ``write_version``, ``save_relative_paths`` and ``filename`` change nothing here (a checkpoint is
    always one file, indexed by relative names).
    """

    def __init__(self, var_list=None, reshape: bool = False, sharded: bool = False, max_to_keep: int | None = 5,
                 keep_checkpoint_every_n_hours: float = 10000.0, name=None, restore_sequentially: bool = False,
                 saver_def=None, builder=None, defer_build: bool = False, allow_empty: bool = False,
                 write_version=None, pad_step_number: bool = False, save_relative_paths: bool = False,
                 filename=None, graph: Graph | None = None):
        unsupported = {"reshape": reshape, "saver_def": saver_def is not None, "builder": builder is not None}
        if any(unsupported.values()):
            raise ValueError(f"Saver: {', '.join(k for k, v in unsupported.items() if v)} not supported")
        self.graph = graph or get_default_graph()
        # One entry per logical variable: a partitioned variable's shards save as one tensor.
        self.entries = entries_from(var_list if var_list is not None else global_variables(self.graph))
        if not self.entries:
            raise ValueError("Saver: no variables to save" + (" (allow_empty=True is not supported)" if allow_empty else ""))
        self.var_list = [v for e in self.entries for v in e.variables]
        self.max_to_keep = max_to_keep
        self.pad_step_number = pad_step_number
        self._keep_every_secs = keep_checkpoint_every_n_hours * 3600.0
        self._next_keep_time = time.time() + self._keep_every_secs
        self._last_checkpoints: list[str] = []
        self._lock = threading.Lock()
        self._graph_written = None
        g = self.graph
        with g.as_default(), g.name_scope("save"):
            self.filename = placeholder(np.dtype(object), (), name="filename")
            names = [e.name for e in self.entries]
            slices = slices_meta(self.entries)
            self.save_op = g.create_op("Save", [self.filename] + [_whole(e) for e in self.entries],
                                       {"tensor_names": names, "slices": json.dumps(slices) if slices else ""},
                                       domain=TRAINER_DOMAIN, name="save_all")
            assigns = []
            for e in self.entries:
                r = g.create_op("Restore", [self.filename], {"tensor_name": e.name, "dtype": e.dtype.name,
                                                             "shape": list(e.shape)},
                                domain=TRAINER_DOMAIN, name="restore_" + e.name.replace("/", "_"))
                for v, value in zip(e.variables, _split(e, r.outputs[0])):
                    assigns.append(g.create_op("Assign", [v.tensor, value], {}, domain=TRAINER_DOMAIN))

            self.restore_op = group(*assigns, name="restore_all")

    def save(self, sess, save_path: str, global_step=None, latest_filename=None, meta_graph_suffix: str = "meta",
             write_meta_graph: bool = True, write_state: bool = True, strip_default_attrs: bool = False,
             save_debug_info: bool = False, write_graph: bool = True) -> str:
        """Save as TensorFlow 1.x does and return the checkpoint's prefix, ``save_path-<step>`` (or
        ``save_path``): the variables go to the prefix's file (``<prefix>.ckpt``, written atomically),
        the meta graph to ``<prefix>.meta`` (``write_meta_graph``), and the folder's ``checkpoint``
        index lists it (``write_state``). ``write_graph`` keeps the folder's ``graph.npz`` current
        for the exporter. ``strip_default_attrs`` and ``save_debug_info`` are TF's and change nothing."""
        if latest_filename not in (None, STATE_FILE):
            raise ValueError(f"Saver.save: latest_filename={latest_filename!r} is not supported; the index is "
                             f"always {STATE_FILE!r}")
        if global_step is not None and not isinstance(global_step, (int, np.integer)):
            global_step = int(sess.run(global_step))
        prefix = os.fspath(save_path)
        if global_step is not None:
            prefix += f"-{int(global_step):08d}" if self.pad_step_number else f"-{int(global_step)}"
        path = checkpoint_file(prefix, writing=True)
        with self._lock:
            sess.run(self.save_op, {self.filename: np.asarray(path, dtype=object)})
            directory = os.path.dirname(os.path.abspath(path))
            graph_path = os.path.join(directory, GRAPH_FILE)
            if write_graph and (self._graph_written != (graph_path, self.graph.version)):
                export_graph(self.graph, graph_path)  # once per saver, and again if the graph grew
                self._graph_written = (graph_path, self.graph.version)
            if write_meta_graph:
                self._write_meta_graph(f"{prefix}.{meta_graph_suffix}")
            kept = self._index(directory, os.path.basename(path)) if write_state else [os.path.basename(path)]
            here = {os.path.join(os.path.dirname(prefix), checkpoint_prefix(n)) for n in kept}
            self._last_checkpoints = [p for p in self._last_checkpoints if p in here and p != prefix] + [prefix]
        return prefix

    @property
    def last_checkpoints(self) -> list[str]:
        """The prefixes of the checkpoints this Saver wrote that rotation has kept, oldest first."""
        return list(self._last_checkpoints)

    def _write_meta_graph(self, path: str) -> None:
        from trainer.meta_graph import meta_graph_bytes  # it builds on this module

        data = meta_graph_bytes(self.graph, self)
        atomic_write(path, lambda f: f.write(data))

    def _index(self, directory: str, name: str) -> list[str]:
        """List the new checkpoint ``name`` in the index, then rotate: the checkpoint file is already
        complete on disk, the index is replaced atomically, and only then are the oldest deleted, so a
        kill at any moment leaves an index (or files) naming a complete checkpoint at least as new
        as the last one listed. Only files inside ``directory`` are ever deleted. Returns the names
        the index now lists."""
        names = [n for n in checkpoint_history(directory, expected=name) if n != name] + [name]
        keep = len(names) if not self.max_to_keep or self.max_to_keep <= 0 else self.max_to_keep
        write_index(directory, names[-keep:])
        for old in names[:-keep]:
            old_path = os.path.join(directory, old)
            if os.path.isfile(old_path) and os.path.getmtime(old_path) >= self._next_keep_time:
                self._next_keep_time += self._keep_every_secs  # as TF: one kept per period of training
                continue  # keep_checkpoint_every_n_hours: out of the index, but never deleted
            for file in checkpoint_members(old_path):
                os.unlink(file)
        return names[-keep:]

    def restore(self, sess, save_path: str) -> None:
        """Load every variable from the checkpoint ``save_path`` (a prefix as ``save`` returns, or its
        file); a missing or mismatching variable raises CheckpointError naming it, before any
        variable is changed."""
        if save_path is None:
            raise ValueError("Saver.restore: save_path is None (tf.train.latest_checkpoint found no checkpoint?)")
        meta, values = load_checkpoint(save_path)
        problems = []
        for e in self.entries:
            key = stored_name(e.name, values)
            if key not in values:
                problems.append(f"variable {e.name!r} is missing")
                continue
            a = values[key]
            if a.dtype != e.dtype or tuple(a.shape) != tuple(e.shape):
                problems.append(f"variable {e.name!r}: graph has {e.dtype.name}{tuple(e.shape)}, "
                                f"checkpoint has {a.dtype.name}{tuple(a.shape)}")
        if problems:
            raise CheckpointError(
                f"checkpoint {save_path!r} does not match the graph: " + "; ".join(problems)
                + ". If the model changed, train into a new checkpoint directory; to restore only the "
                "variables both have, pass them as Saver(var_list=[...])")
        sess.run(self.restore_op, {self.filename: np.asarray(checkpoint_file(save_path), dtype=object)})


def _whole(entry: LogicalTensor):
    """The logical value of a checkpoint entry: the variable, or its shards concatenated."""
    if not entry.sliced:
        return entry.variables[0].tensor
    return concat([v.tensor for v in entry.variables], axis=entry.axis, name="concat_" + entry.name.replace("/", "_"))


def _split(entry: LogicalTensor, whole):
    """Each variable's part of a restored logical value, sliced where the shard lives."""
    if not entry.sliced:
        return [whole]
    parts = []
    g = whole.graph
    for v in entry.variables:
        info = v.save_slice_info
        start = info.var_offset[entry.axis]
        with g.colocate_with(v.node):
            ints = [constant(np.asarray([x], np.int64)) for x in (start, start + info.var_shape[entry.axis], entry.axis)]
            parts.append(make_op("Slice", [whole, *ints]).outputs[0])
    return parts


# -- graph files ----------------------------------------------------------------------------------
def _encode_attr(value, key: str, arrays: dict):
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return _encode_strings(value, key)
        arrays[key] = value
        return {"__array__": key}
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _encode_strings(value: np.ndarray, key: str) -> dict:
    """A string tensor (an object array of str, or of bytes) as JSON: text as it is, bytes in base64."""
    flat = value.reshape(-1).tolist()
    if all(isinstance(v, str) for v in flat):
        return {"__strings__": flat, "shape": list(value.shape)}
    if all(isinstance(v, bytes) for v in flat):
        return {"__bytes__": [base64.b64encode(v).decode("ascii") for v in flat], "shape": list(value.shape)}
    raise GraphError(f"attribute {key}: only arrays of numbers, of str or of bytes can be stored")


def _decode_attr(value, arrays):
    if isinstance(value, dict):
        if "__array__" in value:
            return arrays[value["__array__"]]
        for marker, decode in (("__strings__", str), ("__bytes__", base64.b64decode)):
            if marker in value:
                out = np.empty(len(value[marker]), dtype=object)
                out[:] = [decode(v) for v in value[marker]]
                return out.reshape(value["shape"])
    return value


def node_to_dict(n, arrays: dict) -> dict:
    """One node's JSON-able record (``graph_to_dict``'s format); array attributes go into ``arrays``."""
    return {
        "name": n.name,
        "op": n.op_type,
        "domain": n.domain,
        "inputs": [None if t is None else t.name for t in n.inputs],
        "control_inputs": [c.name for c in n.control_inputs],
        "attrs": {k: _encode_attr(v, f"{n.name}/{k}", arrays) for k, v in n.attrs.items() if v is not None},
        "device": n.device,
        "outputs": [{"dtype": None if t.dtype is None else t.dtype.name,
                     "shape": None if t.shape is None else [-1 if d is None else d for d in t.shape]}
                    for t in n.outputs],
    }


def graph_to_dict(graph: Graph) -> tuple[dict, dict]:
    """The JSON-able description of ``graph`` and the arrays its attributes refer to."""
    arrays: dict = {}
    nodes = [node_to_dict(n, arrays) for n in graph.nodes]
    collections = {}
    for key in (GraphKeys.GLOBAL_VARIABLES, GraphKeys.TRAINABLE_VARIABLES, GraphKeys.GLOBAL_STEP,
                GraphKeys.MOVING_AVERAGE_VARIABLES):
        items = graph.get_collection(key)
        if items:
            collections[key] = [v.op.name for v in items]  # op names, as graph files always held
    for key in (GraphKeys.UPDATE_OPS,):
        items = graph.get_collection(key)
        if items:
            collections[key] = [getattr(v, "name", None) for v in items]
    loops = [loop.to_dict() for loop in graph.loops]
    return {"format": "flowstack-graph", "version": FORMAT_VERSION, "nodes": nodes,
            "collections": collections, "loops": loops, "conds": list(graph.conds)}, arrays


def export_graph(graph: Graph, path: str) -> None:
    """Write ``graph`` (structure, attributes, constants, variable collections) to ``path`` (.npz)."""
    desc, arrays = graph_to_dict(graph)
    members = {"__graph__": json_member(desc), **arrays}
    atomic_write(path, lambda f: write_npz(f, members))


def import_graph(path: str, graph: Graph | None = None) -> Graph:
    """Rebuild a graph written by ``export_graph`` (a checkpoint directory works too)."""
    if os.path.isdir(path):
        path = os.path.join(path, GRAPH_FILE)
    try:
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as data:
            desc = json.loads(bytes(data["__graph__"]).decode("utf-8"))
            arrays = {k: data[k] for k in data.files if k != "__graph__"}
    except Exception as e:  # noqa: BLE001 - a missing, truncated or foreign file: say which
        raise GraphError(f"graph file {path!r} is unreadable: {type(e).__name__}: {e}") from None
    return graph_from_dict(desc, arrays, graph, source=repr(path))


def variable_from_node(node, *, trainable: bool) -> Variable:
    """The Variable of an imported variable node (its initializer is the ``<name>/Assign`` node)."""
    v = Variable.__new__(Variable)
    v.node = node
    v.tensor = node.outputs[0]
    v.trainable = trainable
    v.initializer = node.graph.node(node.name + "/Assign")
    v.initial_value = v.initializer.inputs[1]
    node.variable = v
    return v


def graph_from_dict(desc: dict, arrays: dict, graph: Graph | None = None, *, source: str = "graph") -> Graph:
    """Rebuild a graph from ``graph_to_dict``'s (description, arrays); ``source`` names it in errors."""
    if not isinstance(desc, dict) or desc.get("format") != "flowstack-graph" or desc.get("version", 0) > FORMAT_VERSION:
        raise GraphError(f"{source} is not a flowstack graph this reader understands")
    g = graph if graph is not None else Graph()  # an empty Graph is falsy (len 0)
    names = {nd["name"] for nd in desc["nodes"]}
    back_edges = []  # a loop's Merge names its NextIteration, which comes later
    late_controls = []  # and a loop gradient's nodes may wait on a StackPush made later too
    for nd in desc["nodes"]:
        inputs = []
        for k, i in enumerate(nd["inputs"]):
            if i is not None and i.partition(":")[0] in names and not g.has_node(i.partition(":")[0]):
                back_edges.append((nd["name"], k, i))
                i = next(j for j in nd["inputs"] if j is not None and g.has_node(j.partition(":")[0]))
            inputs.append(None if i is None else g.tensor(i))
        ctrl = [g.node(c) for c in nd["control_inputs"] if g.has_node(c)]
        late_controls.extend((nd["name"], c) for c in nd["control_inputs"] if not g.has_node(c))
        types = [TensorType(None if o["dtype"] is None else np.dtype(o["dtype"]),
                            None if o["shape"] is None else tuple(None if d < 0 else d for d in o["shape"]))
                 for o in nd["outputs"]]
        attrs = {k: _decode_attr(v, arrays) for k, v in nd["attrs"].items()}
        node = g.create_op(nd["op"], inputs, attrs, domain=nd["domain"], name=nd["name"],
                           num_outputs=len(types), output_types=types, control_inputs=ctrl, in_context=False)
        if node.name != nd["name"]:
            raise GraphError(f"node name {nd['name']!r} clashes with an existing node in the target graph")
        node.device = nd.get("device", "")
    for name, k, i in back_edges:
        g.node(name).inputs[k] = g.tensor(i)
    for name, c in late_controls:
        g.node(name).control_inputs.append(g.node(c))
    cols = desc.get("collections", {})
    trainable = set(cols.get(GraphKeys.TRAINABLE_VARIABLES, []))
    for name in cols.get(GraphKeys.GLOBAL_VARIABLES, []):
        v = variable_from_node(g.node(name), trainable=name in trainable)
        g.add_to_collection(GraphKeys.GLOBAL_VARIABLES, v)
        if v.trainable:
            g.add_to_collection(GraphKeys.TRAINABLE_VARIABLES, v)
        for key in (GraphKeys.GLOBAL_STEP, GraphKeys.MOVING_AVERAGE_VARIABLES):
            if name in cols.get(key, []):
                g.add_to_collection(key, v)
    for name in cols.get(GraphKeys.UPDATE_OPS, []):
        if name:
            g.add_to_collection(GraphKeys.UPDATE_OPS, g.node(name))
    g.imported_loops = desc.get("loops", [])  # structure records (names), for exporters
    g.imported_conds = desc.get("conds", [])
    return g
