"""The ``checkpoint`` index of a checkpoint folder, read so that a run never loses work.

The index is JSON ``{"model_checkpoint_path": name, "all_model_checkpoint_paths": [names]}``, oldest
first (a folder TensorFlow wrote has its text-format ``CheckpointState`` there instead, read alike), each entry a file name relative to the index's folder (so a copied or moved folder stays
whole); an entry without the ``.ckpt`` suffix is read as a TF-style prefix of that file. What this
module returns to users (``latest_checkpoint``, ``checkpoint_state``) are TensorFlow's checkpoint
prefixes (``dir/model-3``, the file less its suffix). Reading it, a run only ever looks inside that folder:

- an entry that points elsewhere (an absolute path written by an older Saver, then the folder was
  copied) is taken as the file of the same name in this folder, with a warning;
- a missing or unreadable index is rebuilt from the checkpoint files present, with a warning;
- a complete checkpoint newer than the index's newest entry (a save interrupted between writing
  the file and replacing the index) is listed after it;
- ``latest_checkpoint`` returns the newest *intact* checkpoint (every byte read and checked), and
  warns naming each newer one it skipped and why; the folder's unlisted checkpoint files come last.

``remove_leftovers`` deletes the temporary files of writers killed mid-save, and only those.
"""

from __future__ import annotations

import json
import os
import re
import warnings

from trainer.checkpoint_format import (CHECKPOINT_SUFFIX, TF_INDEX_SUFFIX, atomic_write, checkpoint_damage,
                                       checkpoint_file, checkpoint_prefix, is_temp_file)
from trainer.tf_bundle import tf_checkpoint_state

__all__ = ["CHECKPOINT_SUFFIX", "GRAPH_FILE", "META_SUFFIX", "STATE_FILE", "CheckpointWarning", "checkpoint_files", "checkpoint_members",
           "checkpoint_history", "checkpoint_state", "latest_checkpoint", "remove_leftovers", "step_of", "write_index"]

STATE_FILE = "checkpoint"
GRAPH_FILE = "graph.npz"
META_SUFFIX = ".meta"  # Saver.save's meta graph beside each checkpoint: <prefix>.meta
_STEP = re.compile(r"-(\d+)(?:\.ckpt|\.index)$")
_DATA_SHARD = re.compile(r"\.data-\d{5}-of-\d{5}$")


class CheckpointWarning(UserWarning):
    """A checkpoint folder needed repair on reading: a skipped checkpoint, a rebuilt index."""


def _warn(message: str) -> None:
    warnings.warn(message, CheckpointWarning, stacklevel=3)


def step_of(name: str) -> int | None:
    """The global step in a checkpoint name ``<prefix>-<step>.ckpt``, or None."""
    match = _STEP.search(name)
    return int(match.group(1)) if match else None


def write_index(directory: str, names: list[str]) -> None:
    """Atomically replace ``directory``'s index with ``names`` (oldest first, file names only)."""
    state = {"model_checkpoint_path": names[-1] if names else None, "all_model_checkpoint_paths": list(names)}
    atomic_write(os.path.join(directory, STATE_FILE), lambda f: f.write(json.dumps(state, indent=1).encode()))


def _is_checkpoint_name(name: str) -> bool:
    return name.endswith((CHECKPOINT_SUFFIX, TF_INDEX_SUFFIX)) and not name.startswith(".")


def checkpoint_members(path: str) -> list[str]:
    """Every file of the checkpoint whose file is ``path`` that exists: that file, its meta graph and,
    for a TensorFlow bundle, its data shards (what rotation deletes together)."""
    prefix = checkpoint_prefix(path)
    members = [path, prefix + META_SUFFIX]
    if path.endswith(TF_INDEX_SUFFIX):
        directory, stem = os.path.split(prefix)
        try:
            names = os.listdir(directory or ".")
        except OSError:
            names = []
        members += [os.path.join(directory, n) for n in names
                    if n.startswith(stem + ".data-") and _DATA_SHARD.search(n) and len(n) == len(stem) + 20]
    return [m for m in members if os.path.isfile(m)]


def _is_own_final_name(name: str) -> bool:
    return name in (STATE_FILE, GRAPH_FILE) or _is_checkpoint_name(name) or name.endswith(META_SUFFIX)


def checkpoint_files(directory: str) -> list[str]:
    """The checkpoint files in ``directory``, oldest first (by step, then modification time)."""
    try:
        names = [n for n in os.listdir(directory) if _is_checkpoint_name(n)]
    except OSError:
        return []
    files = [n for n in names if os.path.isfile(os.path.join(directory, n))]
    return sorted(files, key=lambda n: (step_of(n) if step_of(n) is not None else -1,
                                        os.path.getmtime(os.path.join(directory, n)), n))


def remove_leftovers(directory: str) -> list[str]:
    """Delete the temporary files that writers of this folder's checkpoints, index and graph left
    when killed mid-write (``.tmp-<name>-XXXXXXXX``); returns their names. Nothing else is touched."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        path = os.path.join(directory, name)
        if is_temp_file(name, _is_own_final_name) and os.path.isfile(path):
            os.unlink(path)
            removed.append(name)
    return sorted(removed)


def _entry_name(directory: str, entry: str) -> str:
    """The file name an index entry (a file or a prefix) means, inside ``directory``; warns when it
    pointed elsewhere."""
    name = os.path.basename(checkpoint_file(os.path.join(directory, os.path.basename(entry))))
    target = os.path.dirname(os.path.join(directory, entry))  # an absolute entry replaces directory
    if os.path.realpath(target) != os.path.realpath(directory):
        _warn(f"checkpoint index in {directory!r} names {entry!r}, outside that folder; using "
              f"{name!r} in the folder instead (a run reads and deletes only inside its own folder)")
    return name


def _read_index(directory: str) -> tuple[list[str] | None, str]:
    """(entries oldest first, '') from the index, or (None, why it is unusable)."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.exists(path):
        return None, "it is missing"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        state = json.loads(text) if text.lstrip().startswith("{") else tf_checkpoint_state(text)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, ValueError) as e:
        return None, f"it is unreadable ({type(e).__name__}: {e})"
    # A stale or hand-edited index is data, not code: a string where a list belongs would
    # otherwise be iterated letter by letter.
    if not isinstance(state, dict) or not isinstance(state.get("all_model_checkpoint_paths", []), list):
        return None, "it is not a checkpoint index"
    entries = [p for p in state.get("all_model_checkpoint_paths", []) if isinstance(p, str) and p]
    newest = state.get("model_checkpoint_path")
    if isinstance(newest, str) and newest and newest not in entries:
        entries.append(newest)  # the newest, even in an index that lists nothing else
    return entries, ""


def checkpoint_history(directory: str, *, expected: str | None = None) -> list[str]:
    """The checkpoint file names of ``directory``, oldest first, as the index and the folder say.

    ``expected`` is a checkpoint the caller has just written and not yet indexed (no warning for it).
    """
    entries, problem = _read_index(directory)
    present = checkpoint_files(directory)
    if entries is None:
        unexpected = [n for n in present if n != expected]
        if unexpected:
            _warn(f"checkpoint index {os.path.join(directory, STATE_FILE)!r} is unusable: {problem}; "
                  f"rebuilt it from the {len(unexpected)} checkpoint file(s) in the folder")
        return present
    names: list[str] = []
    for entry in entries:
        name = _entry_name(directory, entry)
        if name not in names:
            names.append(name)
    known = [step_of(n) for n in names if step_of(n) is not None]
    newest_step = max(known) if known else None
    for name in present:
        step = step_of(name)
        if name in names or step is None or (newest_step is not None and step <= newest_step):
            continue
        if name != expected:
            _warn(f"checkpoint {name!r} in {directory!r} is newer than the index's newest entry (a save was "
                  f"interrupted before the index was updated); listing it as the newest")
        names.append(name)
    return names


def latest_checkpoint(directory: str) -> str | None:
    """The prefix of the newest intact checkpoint in ``directory``, or None when there is none.

    Each candidate, newest first, is read whole and checked; one that is missing, truncated or
    corrupt is skipped with a warning naming it and why. When every listed one is damaged, the
    folder's unlisted checkpoint files (one a kill kept rotation from deleting) are tried last.
    """
    newest = _newest_intact(directory, checkpoint_history(directory))
    return None if newest is None else checkpoint_prefix(newest)


def _newest_intact(directory: str, names: list[str]) -> str | None:
    unlisted = [n for n in checkpoint_files(directory) if n not in names]
    skipped = []
    for name in reversed(unlisted + names):
        path = os.path.join(directory, name)
        why = checkpoint_damage(path)
        if why is None:
            if skipped:
                _warn(f"restoring {name!r} in {directory!r}; skipped newer checkpoint(s): " + "; ".join(skipped))
            return path
        skipped.append(f"{name!r}: {why}")
    if skipped:
        _warn(f"no intact checkpoint in {directory!r}; skipped: " + "; ".join(skipped))
    return None


def checkpoint_state(directory: str) -> dict | None:
    """``{model_checkpoint_path, all_model_checkpoint_paths}``: the newest intact checkpoint and
    every listed one that exists, as prefixes in ``directory`` (None when there is no usable one)."""
    names = checkpoint_history(directory)
    latest = _newest_intact(directory, names)
    if latest is None:
        return None
    listed = [os.path.join(directory, n) for n in names]
    return {"model_checkpoint_path": checkpoint_prefix(latest),
            "all_model_checkpoint_paths": [checkpoint_prefix(p) for p in listed if os.path.isfile(p)]}
