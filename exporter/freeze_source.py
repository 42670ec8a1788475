"""Where a freeze starts: a live session or a checkpoint directory, opened with its graph and
variable values, and the tensors a signature names resolved in that graph.

Every way a directory can fail to hold a checkpoint (no graph, no state file, a missing or
corrupt shard, variables the graph has and the checkpoint lacks) is a ``FreezeError`` naming the
file and what to do.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["TRAINER_DOMAIN", "FreezeError", "FreezeSource", "open_source", "resolve_tensors"]

TRAINER_DOMAIN = "flowstack"  # trainer.graph.TRAINER_DOMAIN, without importing the trainer


class FreezeError(ValueError):
    """A graph, checkpoint or signature that cannot become an inference model; says what and why."""


@dataclass
class FreezeSource:
    """A trained graph and its variables' values, ready to freeze."""

    graph: Any  # trainer.Graph
    values: dict[str, np.ndarray]  # variable name -> value
    session: Any  # trainer.Session with the values loaded (for the trainer-side parity run)
    origin: str  # what was frozen, for the metadata
    step: int | None


def open_source(source) -> FreezeSource:
    """``source`` (a ``trainer.Session``, a checkpoint directory, a checkpoint prefix such as
    ``run/model.ckpt-5``, or an opened source) opened."""
    import trainer
    from trainer.checkpoint_utils import checkpoint_exists

    if isinstance(source, FreezeSource):
        return source
    if isinstance(source, trainer.Session):
        step = _global_step(source.graph, source.variable_values())
        return FreezeSource(source.graph, source.variable_values(), source, "session", step)
    source = os.fspath(source)
    if not os.path.isdir(source) and checkpoint_exists(source):
        return _open_checkpoint_prefix(source)
    return _open_checkpoint_dir(source)


def _open_checkpoint_prefix(prefix: str) -> FreezeSource:
    """A checkpoint named by its prefix (TF's way): the graph is the ``<prefix>.meta`` beside it, or
    the folder's graph file."""
    from trainer.checkpoint_format import checkpoint_file
    from trainer.saver import GRAPH_FILE

    meta = prefix + ".meta"
    graph_path = meta if os.path.isfile(meta) else os.path.join(os.path.dirname(prefix) or ".", GRAPH_FILE)
    if not os.path.exists(graph_path):
        raise FreezeError(f"checkpoint {prefix!r} has no graph: neither {meta!r} nor {graph_path!r} exists. "
                          "Save with Saver.save(...) (it writes both by default) or freeze the live session")
    return _open_checkpoint(checkpoint_file(prefix), graph_path, "re-save it")


def _open_checkpoint_dir(directory: str) -> FreezeSource:
    from trainer.checkpoint_format import checkpoint_file
    from trainer.saver import GRAPH_FILE, STATE_FILE

    if not os.path.isdir(directory):
        raise FreezeError(f"{directory}: no such checkpoint directory or checkpoint prefix")
    graph_path = os.path.join(directory, GRAPH_FILE)
    if not os.path.exists(graph_path):
        raise FreezeError(f"{graph_path}: missing; the checkpoint directory has no graph. "
                          "Save with Saver.save(..., write_graph=True) (the default) or freeze the live session")
    state_path = os.path.join(directory, STATE_FILE)
    try:
        with open(state_path) as f:
            newest = json.load(f)["model_checkpoint_path"]
    except (OSError, ValueError, KeyError) as exc:
        raise FreezeError(f"{state_path}: missing or unreadable ({exc}); it names the newest checkpoint. "
                          "Save a checkpoint into the directory first") from None
    # the index names files (or TF-style prefixes) in its own folder
    path = checkpoint_file(os.path.join(directory, os.path.basename(newest)))
    if not os.path.exists(path):
        raise FreezeError(f"checkpoint shard {newest!r} named by {state_path} is missing; restore the file, "
                          "or point the checkpoint file at a checkpoint that exists")
    return _open_checkpoint(path, graph_path, f"re-save it, or point {state_path} at an older checkpoint")


def _open_checkpoint(path: str, graph_path: str, remedy: str) -> FreezeSource:
    """The checkpoint file ``path`` with the graph in ``graph_path`` (a graph or meta graph file)."""
    import trainer
    from trainer.saved_slices import shard_values
    from trainer.saver import CheckpointError, load_checkpoint
    from trainer.slot_names import stored_name

    _check_archive(path, remedy)
    try:
        graph = trainer.import_graph(graph_path)
    except Exception as exc:
        raise FreezeError(f"{graph_path}: corrupt or unreadable graph ({type(exc).__name__}: {exc}); "
                          "save the graph again (Saver.save writes it)") from None
    try:
        meta, values = load_checkpoint(path)
        values = shard_values(meta, values)  # a partitioned variable is saved whole, by its logical name
    except CheckpointError as exc:
        raise FreezeError(f"{exc}; the shard is corrupt: {remedy}") from None
    variables = trainer.global_variables(graph)
    stored = {v: stored_name(v.op.name, values) for v in variables}  # a slot may hold its pre-TF name
    missing = [v.op.name for v in variables if stored[v] not in values]
    if missing:
        raise FreezeError(f"checkpoint {path!r} lacks variable(s) {missing} that the graph has; "
                          "it was written by another graph")
    session = trainer.Session(graph, devices=["CPU:0"])
    session.run([v.initializer for v in variables], {v.initial_value: values[stored[v]] for v in variables})
    match = re.search(r"-(\d+)\.ckpt$", path)
    step = _global_step(graph, values)
    return FreezeSource(graph, values, session, path, step if step is not None else (int(match.group(1)) if match else None))


def _check_archive(path: str, remedy: str) -> None:
    """A checkpoint shard is a zip archive; test it whole before NumPy reads it."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (OSError, zipfile.BadZipFile) as exc:
        bad = str(exc)
    if bad is not None:
        raise FreezeError(f"checkpoint shard {path!r} is corrupt ({bad}): {remedy}")


def _global_step(graph, values) -> int | None:
    from trainer.graph import GraphKeys

    steps = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if steps and steps[0].op.name in values:
        return int(values[steps[0].op.name])
    return None


def resolve_tensors(graph, tensors: Mapping[str, Any], role: str) -> dict:
    """``{public name: trainer Tensor}`` for a signature's ``{public name: tensor or 'node:0'}``."""
    if not tensors:
        raise FreezeError(f"no {role}s given: name at least one, as {{public_name: tensor or 'node:0'}}")
    return {public: _resolve(graph, t, public, role) for public, t in tensors.items()}


def _resolve(graph, t, public: str, role: str):
    from trainer import GraphError, Tensor

    if isinstance(t, Tensor):
        return t
    if hasattr(t, "as_tensor"):
        return t.as_tensor()
    try:
        return graph.tensor(str(t))
    except GraphError as exc:
        near = [n.name for n in graph.nodes if n.op_type == "Placeholder"] if role == "input" else []
        hint = f" (placeholders: {', '.join(near)})" if near else ""
        raise FreezeError(f"{role} {public!r}: {exc}{hint}") from None
