"""The checkpoint file format, and atomic writes (see ``trainer/saver.py`` for the layout).

A leaf module: the Save/Restore kernels (``trainer/kernels/training.py``), the ``Saver`` and the
exporter all read and write checkpoints through it.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile

import numpy as np

__all__ = ["FORMAT_VERSION", "CheckpointError", "atomic_write", "check_value", "json_member", "load_checkpoint",
           "write_npz"]

FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that is missing, corrupt, or does not match the graph; names the variable."""


def atomic_write(path: str, write) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def json_member(obj) -> np.ndarray:
    return np.frombuffer(json.dumps(obj).encode("utf-8"), dtype=np.uint8)


def write_npz(f, arrays: dict) -> None:
    # np.savez into a file object; members are plain .npy (no object arrays, so no pickle).
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
        for key, arr in arrays.items():
            buf = io.BytesIO()
            arr = np.asarray(arr)
            np.lib.format.write_array(buf, arr if arr.flags.c_contiguous else arr.copy(order="C"),
                                      allow_pickle=False)
            z.writestr(key + ".npy", buf.getvalue())


def load_checkpoint(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, {variable name: array}) of a checkpoint file."""
    if not os.path.exists(path):
        raise CheckpointError(f"checkpoint {path!r} does not exist")
    if not zipfile.is_zipfile(path):  # np.load would read a bare .npy as an array, not an archive
        raise CheckpointError(f"checkpoint {path!r} is unreadable: not a checkpoint archive "
                              f"(truncated, or not written by Saver)")
    try:
        # Our own handle: np.load leaks the file it opened when the archive turns out corrupt.
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as data:
            meta = json.loads(bytes(data["__meta__"]).decode("utf-8"))
            values = {k: data[k] for k in meta["variables"]}
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f"checkpoint {path!r} is unreadable: {e}") from None
    if meta.get("format") != "flowstack-checkpoint" or meta.get("version", 0) > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path!r}: unsupported format {meta.get('format')!r} "
                              f"version {meta.get('version')} (this reader knows version {FORMAT_VERSION})")
    return meta, values


def check_value(name, value, dtype, shape, path):
    if value.dtype != np.dtype(dtype) or list(value.shape) != list(shape or []):
        raise CheckpointError(
            f"variable {name!r}: the graph expects {np.dtype(dtype).name}{tuple(shape or [])}, "
            f"checkpoint {path!r} has {value.dtype.name}{tuple(value.shape)}"
        )
