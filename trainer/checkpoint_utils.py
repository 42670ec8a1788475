"""``tf.train``'s checkpoint helpers: find, list, wait for and remove checkpoints, and read
variables without a graph. Checkpoints are named by their prefix (``dir/model.ckpt-3``), as in
TensorFlow 1.x; ``checkpoint_format.checkpoint_file`` maps one to its file."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from trainer.checkpoint_format import checkpoint_file
from trainer.checkpoint_format import checkpoint_prefix as prefix_of  # tf.train's parameters are called checkpoint_prefix
from trainer.checkpoint_index import checkpoint_history, write_index
from trainer.graph import get_default_graph
from trainer.ops import constant
from trainer.saver import CheckpointError, checkpoint_state, latest_checkpoint, load_checkpoint
from trainer.variables import Variable, global_variables

__all__ = [
    "CheckpointReader", "CheckpointState", "checkpoint_exists", "checkpoints_iterator", "get_checkpoint_mtimes",
    "get_checkpoint_state", "init_from_checkpoint", "list_variables", "load_checkpoint_reader", "load_variable",
    "remove_checkpoint", "update_checkpoint_state", "wait_for_new_checkpoint",
]


@dataclass
class CheckpointState:
    model_checkpoint_path: str
    all_model_checkpoint_paths: list[str] = field(default_factory=list)


def get_checkpoint_state(checkpoint_dir: str, latest_filename=None) -> CheckpointState | None:
    """The newest checkpoint of ``checkpoint_dir`` and all listed ones, or None when there is none."""
    state = checkpoint_state(checkpoint_dir)
    return None if state is None else CheckpointState(**state)


def checkpoint_exists(checkpoint_prefix: str) -> bool:
    """Whether the checkpoint named ``checkpoint_prefix`` (or its file) exists."""
    return os.path.isfile(checkpoint_file(checkpoint_prefix))


def _name_in(save_dir: str, path: str) -> str:
    """The file name, in ``save_dir``, of the checkpoint ``path`` (a prefix or file in that folder)."""
    directory = os.path.dirname(os.fspath(path))
    if directory and os.path.realpath(directory) != os.path.realpath(save_dir):
        raise ValueError(f"checkpoint {path!r} is not in {save_dir!r}: a folder's checkpoint index lists only "
                         f"the checkpoints in that folder")
    return os.path.basename(checkpoint_file(os.path.join(save_dir, os.path.basename(path))))


def update_checkpoint_state(save_dir: str, model_checkpoint_path: str, all_model_checkpoint_paths=None,
                            latest_filename=None, all_model_checkpoint_timestamps=None,
                            last_preserved_timestamp=None) -> None:
    """Replace ``save_dir``'s ``checkpoint`` index (atomically): ``model_checkpoint_path`` newest,
    after ``all_model_checkpoint_paths`` (prefixes, in ``save_dir`` or relative to it)."""
    if latest_filename is not None:
        raise ValueError("update_checkpoint_state: latest_filename= is not supported; the index is 'checkpoint'")
    newest = _name_in(save_dir, model_checkpoint_path)
    names = [_name_in(save_dir, p) for p in all_model_checkpoint_paths or ()]
    write_index(save_dir, [n for n in dict.fromkeys(names) if n != newest] + [newest])


def remove_checkpoint(checkpoint_prefix: str, checkpoint_format_version=None, meta_graph_suffix: str = "meta") -> None:
    """Delete the checkpoint ``checkpoint_prefix`` and its meta graph. Unlike TensorFlow, it is
    also taken out of its folder's index, so ``latest_checkpoint`` does not warn about it later."""
    path = checkpoint_file(checkpoint_prefix)
    for file in (path, f"{prefix_of(path)}.{meta_graph_suffix}"):
        if os.path.isfile(file):
            os.unlink(file)
    directory, name = os.path.split(os.path.abspath(path))
    listed = checkpoint_history(directory)
    if name in listed:
        write_index(directory, [n for n in listed if n != name])


def get_checkpoint_mtimes(checkpoint_prefixes) -> list[float]:
    """The modification time of each checkpoint that exists (missing ones are skipped, as in TF)."""
    files = [checkpoint_file(p) for p in checkpoint_prefixes]
    return [os.path.getmtime(f) for f in files if os.path.isfile(f)]


def wait_for_new_checkpoint(checkpoint_dir: str, last_checkpoint: str | None = None, seconds_to_sleep: float = 1,
                            timeout: float | None = None) -> str | None:
    """The newest checkpoint of ``checkpoint_dir`` once it differs from ``last_checkpoint``; None
    when ``timeout`` seconds pass first (None: wait as long as it takes, as TensorFlow does)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        path = latest_checkpoint(checkpoint_dir)
        if path is not None and path != last_checkpoint:
            return path
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            return None
        time.sleep(seconds_to_sleep if left is None else min(seconds_to_sleep, left))


def checkpoints_iterator(checkpoint_dir: str, min_interval_secs: float = 0, timeout: float | None = None,
                         timeout_fn: Callable[[], bool] | None = None) -> Iterator[str]:
    """Yield each new checkpoint of ``checkpoint_dir`` as it appears, at most one per
    ``min_interval_secs``; ends when none comes within ``timeout`` seconds and ``timeout_fn`` (if
    given) returns True."""
    last = None
    while True:
        path = wait_for_new_checkpoint(checkpoint_dir, last, timeout=timeout)
        if path is None:
            if timeout_fn is None or timeout_fn():
                return
            continue
        started = time.monotonic()
        last = path
        yield path
        pause = started + min_interval_secs - time.monotonic()
        if pause > 0:
            time.sleep(pause)


def _file(ckpt_dir_or_file: str) -> str:
    if os.path.isdir(ckpt_dir_or_file):
        path = latest_checkpoint(ckpt_dir_or_file)
        if path is None:
            raise CheckpointError(f"no checkpoint in directory {ckpt_dir_or_file!r}")
        return path
    return ckpt_dir_or_file


def list_variables(ckpt_dir_or_file: str) -> list[tuple[str, list[int]]]:
    """(name, shape) of every variable in the checkpoint, sorted by name."""
    _, values = load_checkpoint(_file(ckpt_dir_or_file))
    return sorted((name, list(v.shape)) for name, v in values.items())


def load_variable(ckpt_dir_or_file: str, name: str) -> np.ndarray:
    """The value saved under ``name``; a variable's tensor name works too (``"w:0"`` reads ``"w"``, as
    in TensorFlow, whose checkpoints key variables by op name)."""
    if name.endswith(":0"):
        name = name[:-2]
    _, values = load_checkpoint(_file(ckpt_dir_or_file))
    if name not in values:
        raise CheckpointError(f"variable {name!r} is not in checkpoint {ckpt_dir_or_file!r}; it has "
                              f"{sorted(values)[:10]}")
    return values[name]


class CheckpointReader:
    """A checkpoint's variables, read once: ``get_tensor(name)``, ``get_variable_to_shape_map()``."""

    def __init__(self, path: str):
        self.path = path
        _, self._values = load_checkpoint(path)

    def has_tensor(self, name: str) -> bool:
        return name in self._values

    def get_tensor(self, name: str) -> np.ndarray:
        if name not in self._values:
            op_name = name.rpartition(":")[0]
            hint = (f"; checkpoints key variables by op name: ask for {op_name!r} (variable.op.name)"
                    if op_name in self._values else "")
            raise CheckpointError(f"variable {name!r} is not in checkpoint {self.path!r}{hint}")
        return self._values[name]

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        return {k: list(v.shape) for k, v in self._values.items()}

    def get_variable_to_dtype_map(self) -> dict[str, np.dtype]:
        return {k: v.dtype for k, v in self._values.items()}


def load_checkpoint_reader(ckpt_dir_or_file: str) -> CheckpointReader:
    """``tf.train.load_checkpoint``: a reader of the newest checkpoint in a directory, or of a file."""
    return CheckpointReader(_file(ckpt_dir_or_file))


# -- init_from_checkpoint -------------------------------------------------------------------------
def _scope(name: str) -> str:
    return "" if name == "/" else name


def _assignments(ckpt_name: str, current, variables: dict, values: dict, source: str) -> list[tuple[Variable, str]]:
    """(variable, checkpoint tensor name) pairs for one ``assignment_map`` entry, as TF 1.x reads it."""
    if not ckpt_name.endswith("/"):
        var = current if isinstance(current, Variable) else variables.get(current)
        if var is None:
            raise ValueError(f"init_from_checkpoint: variable {current!r} (for {ckpt_name!r}) is not in the graph")
        if ckpt_name not in values:
            raise ValueError(f"init_from_checkpoint: tensor {ckpt_name!r} is not in checkpoint {source!r}; it has "
                             f"{sorted(values)[:10]}")
        return [(var, ckpt_name)]
    if not isinstance(current, str) or not current.endswith("/"):
        raise ValueError(f"init_from_checkpoint: the scope {ckpt_name!r} maps to a scope ('scope/': 'other_scope/' "
                         f"or '/'), got {current!r}")
    pairs = []
    for name, var in variables.items():
        if name.startswith(_scope(current)):
            tensor = _scope(ckpt_name) + name[len(_scope(current)):]
            if tensor not in values:
                raise ValueError(f"init_from_checkpoint: tensor {tensor!r} (for variable {name!r}) is not in "
                                 f"checkpoint {source!r}")
            pairs.append((var, tensor))
    return pairs


def init_from_checkpoint(ckpt_dir_or_file: str, assignment_map: dict) -> None:
    """``tf.train.init_from_checkpoint``: the variables ``assignment_map`` names initialize from the
    checkpoint (a prefix, or a folder's newest) instead of their initializers.

    ``assignment_map`` is as in TF 1.x: ``{"ckpt_scope/": "scope/"}`` (``"/"`` for the root) maps
    every variable under ``scope/`` to the tensor of the same rest of the name under ``ckpt_scope/``;
    ``{"tensor name": variable or its name}`` maps one. The values are read now and become the
    initializers' values (TF reads them when the initializer runs; the result is the same).
    """
    source = _file(ckpt_dir_or_file)
    _, values = load_checkpoint(source)
    graph = get_default_graph()
    variables = {v.node.name: v for v in global_variables(graph)}
    for ckpt_name, current in assignment_map.items():
        for var, tensor in _assignments(ckpt_name, current, variables, values, source):
            value = values[tensor]
            if value.dtype != var.dtype or tuple(value.shape) != tuple(var.shape):
                raise ValueError(f"init_from_checkpoint: variable {var.node.name!r} is {var.dtype.name}{tuple(var.shape)}, "
                                 f"tensor {tensor!r} of {source!r} is {value.dtype.name}{tuple(value.shape)}")
            with graph.as_default():
                init = constant(value, name=f"{var.node.name}/init_from_checkpoint")
            var.initializer.inputs[1] = init
            var.initial_value = init
