"""Checkpoints by logical name: the shards of a partitioned variable are saved as one tensor.

A checkpoint holds each logical variable once, whole (``emb``, ``emb/Adam``), so it restores
into any number of shards, or into a plain Variable of that name, and a plain variable's
checkpoint restores into shards (TensorFlow could not re-shard: tensorflow#3478). The checkpoint
also records how the writing graph sliced it (meta ``"slices"``: shard name -> logical name and
offset), so a reader holding that graph (``flowstack export``) finds each shard's values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from trainer.variables import Variable

__all__ = ["LogicalTensor", "entries_from", "group_by_logical_name", "shard_values", "slices_meta"]


@dataclass
class LogicalTensor:
    """One checkpoint entry: ``name`` with ``shape``, stored in ``variables`` (one, or the shards
    in offset order along ``axis``)."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    variables: list = field(default_factory=list)
    axis: int = 0

    @property
    def sliced(self) -> bool:
        return self.variables[0].save_slice_info is not None

    def offsets(self) -> list[int]:
        return [v.save_slice_info.var_offset[self.axis] for v in self.variables] if self.sliced else [0]


def _axis_of(info) -> int:
    diff = [i for i, (a, b) in enumerate(zip(info.var_shape, info.full_shape)) if a != b]
    return diff[0] if diff else 0


def group_by_logical_name(var_list) -> list[LogicalTensor]:
    """The checkpoint entries of ``var_list``; fails naming a logical variable whose shards do not
    tile it (a shard missing from var_list, or two partitionings under one name)."""
    entries: dict[str, LogicalTensor] = {}
    for v in var_list:
        info = v.save_slice_info
        name = info.full_name if info is not None else v.op.name
        shape = tuple(info.full_shape) if info is not None else tuple(v.shape)
        entry = entries.get(name)
        if entry is None:
            entry = entries[name] = LogicalTensor(name, shape, np.dtype(v.dtype),
                                                  axis=_axis_of(info) if info is not None else 0)
        elif entry.shape != shape or (info is None) != (entry.variables[0].save_slice_info is None):
            raise ValueError(f"Saver: two variables save as {name!r} with different shapes or slicing "
                             f"({entry.variables[0].op.name} and {v.op.name})")
        entry.variables.append(v)
    for entry in entries.values():
        if not entry.sliced:
            if len(entry.variables) > 1:
                raise ValueError(f"Saver: variables {[v.op.name for v in entry.variables]} share the name {entry.name!r}")
            continue
        entry.variables.sort(key=lambda v: v.save_slice_info.var_offset[entry.axis])
        end = 0
        for v in entry.variables:
            start = v.save_slice_info.var_offset[entry.axis]
            if start != end:
                raise ValueError(f"Saver: the shards of {entry.name!r} in var_list do not tile it: rows "
                                 f"{end}..{start} along axis {entry.axis} are missing (pass every shard)")
            end = start + v.save_slice_info.var_shape[entry.axis]
        if end != entry.shape[entry.axis]:
            raise ValueError(f"Saver: the shards of {entry.name!r} cover {end} of its {entry.shape[entry.axis]} "
                             f"rows along axis {entry.axis} (pass every shard)")
    return list(entries.values())


def _shards(value, where: str) -> list:
    """The Variables ``value`` stands for: itself, or a partitioned variable's (or a list's) shards."""
    if isinstance(value, Variable):
        return [value]
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes, dict))):
        shards = list(value)
        if shards and all(isinstance(v, Variable) for v in shards):
            return shards
    raise TypeError(f"Saver: {where} is a {type(value).__name__} ({str(value)[:60]}), not a Variable, a "
                    "partitioned variable or a list of a partitioned variable's shards")


def entries_from(var_list) -> list[LogicalTensor]:
    """The checkpoint entries of ``Saver(var_list)`` as TensorFlow 1.x takes it: a list of variables
    (a partitioned variable counts as its shards), each saved under its own name, or a dict
    ``{name in the checkpoint: variable or partitioned variable}``."""
    if not isinstance(var_list, dict):
        shards = [v for i, item in enumerate(var_list) for v in _shards(item, f"var_list[{i}]")]
        return group_by_logical_name(shards)
    entries = []
    for name, value in var_list.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"Saver: var_list keys are the names in the checkpoint; got {name!r}")
        grouped = group_by_logical_name(_shards(value, f"var_list[{name!r}]"))
        if len(grouped) != 1:
            raise ValueError(f"Saver: var_list[{name!r}] holds {len(grouped)} variables "
                             f"({[e.name for e in grouped]}); one name saves one variable or one partitioned variable")
        grouped[0].name = name
        entries.append(grouped[0])
    return entries


def slices_meta(entries: list[LogicalTensor]) -> dict:
    """The ``"slices"`` record of a checkpoint: shard name -> {full_name, var_offset, var_shape}."""
    out = {}
    for e in entries:
        if e.sliced:
            for v in e.variables:
                out[v.op.name] = {**v.save_slice_info.to_dict(), "full_name": e.name}
    return out


def shard_values(meta: dict, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``values`` (logical name -> array) plus each recorded shard's slice of its logical array."""
    out = dict(values)
    for shard, info in meta.get("slices", {}).items():
        full = values.get(info["full_name"])
        if full is None:
            continue
        index = tuple(slice(o, o + s) for o, s in zip(info["var_offset"], info["var_shape"]))
        out[shard] = full[index]
    return out
