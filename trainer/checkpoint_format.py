"""The checkpoint file format, and atomic writes (see ``trainer/saver.py`` for the layout).

A leaf module: the Save/Restore kernels (``trainer/kernels/training.py``), the ``Saver`` and the
exporter all read and write checkpoints through it.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
import zipfile
import zlib

import numpy as np

__all__ = ["CHECKPOINT_SUFFIX", "FORMAT_VERSION", "TF_INDEX_SUFFIX", "CheckpointError", "array_crc32", "atomic_write", "check_value",
           "checkpoint_damage", "checkpoint_file", "checkpoint_prefix", "is_temp_file", "json_member", "load_checkpoint",
           "write_npz"]

FORMAT_VERSION = 1
# A checkpoint is named by its prefix, as in TensorFlow 1.x (``dir/model.ckpt-3``); its one file is
# the prefix plus this suffix. Every reader and writer maps between the two through the functions below.
CHECKPOINT_SUFFIX = ".ckpt"
# A checkpoint TensorFlow wrote (trainer/tf_bundle.py) is named by the same prefix; its file here is
# the bundle's index, ``<prefix>.index``, beside its data files.
TF_INDEX_SUFFIX = ".index"
TEMP_PREFIX = ".tmp-"
# atomic_write's temporary files: ".tmp-<final name>-<mkstemp's 8 random characters>".
_TEMP_NAME = re.compile("^" + re.escape(TEMP_PREFIX) + r"(?P<final>.+)-[a-z0-9_]{8}$")


class CheckpointError(ValueError):
    """A checkpoint that is missing, corrupt, or does not match the graph; names the variable."""


def is_temp_file(name: str, final_names) -> bool:
    """Whether ``name`` is atomic_write's temporary file for a final name that ``final_names(name)``
    accepts: a leftover of a writer killed before its rename."""
    match = _TEMP_NAME.match(name)
    return match is not None and bool(final_names(match.group("final")))


def checkpoint_file(path: str, *, writing: bool = False) -> str:
    """The file of the checkpoint ``path`` names: a prefix (``dir/model.ckpt-3``, what Saver.save and
    latest_checkpoint return) or, as flowstack returned before prefixes, the file itself (read only:
    ``writing`` always gives the prefix's own file). A prefix TensorFlow saved under, with no
    flowstack file of its own, names the bundle's index."""
    path = os.fspath(path)
    candidate = path + CHECKPOINT_SUFFIX
    if writing or os.path.isfile(candidate):
        return candidate
    if path.endswith((CHECKPOINT_SUFFIX, TF_INDEX_SUFFIX)) and os.path.isfile(path):
        return path
    if os.path.isfile(path + TF_INDEX_SUFFIX):
        return path + TF_INDEX_SUFFIX
    return path if path.endswith(CHECKPOINT_SUFFIX) else candidate


def checkpoint_prefix(file: str) -> str:
    """The prefix naming the checkpoint stored in ``file`` (the inverse of ``checkpoint_file``)."""
    for suffix in (CHECKPOINT_SUFFIX, TF_INDEX_SUFFIX):
        if file.endswith(suffix):
            return file[:-len(suffix)]
    return file


def atomic_write(path: str, write) -> None:
    """Write ``path`` through ``write(file)`` into a temporary file beside it, fsync, rename, and
    fsync the directory: a crash leaves either the old file or the new one, never a torn one."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX + os.path.basename(path) + "-", dir=directory)
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


def array_crc32(value: np.ndarray) -> int:
    """CRC-32 of an array's bytes in C order (the meta's ``"crc32"`` record)."""
    return zlib.crc32(np.ascontiguousarray(value).reshape(-1).view(np.uint8))


def load_checkpoint(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, {variable name: array}) of the checkpoint ``path`` (a prefix, or its file), every byte
    read and checked.

    Version-1 files written since the ``"crc32"`` meta entry was appended carry each variable's
    checksum; older ones are checked by the archive's own CRC of each member and by the meta's
    dtypes and shapes. Damage raises CheckpointError saying what is wrong. ``path`` may be the
    prefix TensorFlow 1.x scripts pass (see ``checkpoint_file``).
    """
    name, path = path, checkpoint_file(path)
    if not os.path.exists(path):
        where = "" if path == name else f" (no file {path!r})"
        raise CheckpointError(f"checkpoint {name!r} does not exist{where}; pass the prefix that Saver.save "
                              f"or tf.train.latest_checkpoint returned")
    if path.endswith(TF_INDEX_SUFFIX):
        from trainer.tf_bundle import read_bundle  # here: tf_bundle raises this module's CheckpointError

        values = read_bundle(checkpoint_prefix(path))
        return {"format": "tensorflow-bundle", "variables": {
            k: {"dtype": v.dtype.name, "shape": list(v.shape)} for k, v in values.items()}}, values
    if os.path.getsize(path) == 0:
        raise CheckpointError(f"checkpoint {path!r} is unreadable: the file is empty")
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
    for name, value in values.items():
        _check_member(path, name, value, meta["variables"][name], meta.get("crc32", {}).get(name))
    return meta, values


def checkpoint_damage(path: str) -> str | None:
    """Why the checkpoint at ``path`` cannot be restored (missing, truncated, damaged), or None."""
    try:
        load_checkpoint(path)
    except CheckpointError as e:
        return str(e)
    return None


def _check_member(path: str, name: str, value: np.ndarray, declared: dict, crc) -> None:
    if value.dtype.name != declared.get("dtype") or list(value.shape) != list(declared.get("shape", [])):
        raise CheckpointError(f"checkpoint {path!r} is damaged: variable {name!r} holds "
                              f"{value.dtype.name}{tuple(value.shape)}, its meta says "
                              f"{declared.get('dtype')}{tuple(declared.get('shape', []))}")
    if crc is not None and array_crc32(value) != crc:
        raise CheckpointError(f"checkpoint {path!r} is damaged: variable {name!r} fails its checksum")


def check_value(name, value, dtype, shape, path):
    if value.dtype != np.dtype(dtype) or list(value.shape) != list(shape or []):
        raise CheckpointError(
            f"variable {name!r}: the graph expects {np.dtype(dtype).name}{tuple(shape or [])}, "
            f"checkpoint {path!r} has {value.dtype.name}{tuple(value.shape)}"
        )
