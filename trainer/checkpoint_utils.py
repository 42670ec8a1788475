"""``tf.train``'s checkpoint helpers: find checkpoints and read variables without a graph."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from trainer.saver import CheckpointError, checkpoint_state, latest_checkpoint, load_checkpoint

__all__ = [
    "CheckpointReader", "CheckpointState", "checkpoint_exists", "get_checkpoint_state", "list_variables",
    "load_checkpoint_reader", "load_variable",
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
    return os.path.isfile(checkpoint_prefix) or os.path.isfile(checkpoint_prefix + ".ckpt")


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
