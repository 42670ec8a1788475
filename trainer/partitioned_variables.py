"""Partitioned (sharded) variables: one logical tensor stored as several Variables along one axis.

``partitioned_variable("emb", (1000, 16), partitioner=fixed_size_partitioner(2))`` builds the
Variables ``emb/part_0`` and ``emb/part_1`` (rows 0-499 and 500-999). Each shard is a Variable of
its own, so a device function such as ``replica_device_setter`` puts the shards on different PS
tasks. A partitioner maps (shape, dtype) to the number of shards per axis (one axis > 1), as in
TensorFlow; shard sizes follow TF's rule: the first ``size % n`` shards get one extra row.

Each shard carries a ``SaveSliceInfo`` (logical name, full shape, offset) so the Saver writes the
logical tensor once under its logical name, whatever the shard count (see trainer/saver.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from trainer import ops
from trainer.graph import Tensor, get_default_graph
from trainer.variables import Variable

__all__ = [
    "PartitionedVariable",
    "SaveSliceInfo",
    "create_partitioned_variables",
    "fixed_size_partitioner",
    "min_max_variable_partitioner",
    "partitioned_variable",
    "shard_sizes",
    "variable_axis_size_partitioner",
]

PARTITIONED_VARIABLES = "partitioned_variables"  # the graph collection holding every PartitionedVariable
Partitioner = Callable[[Sequence[int], np.dtype], Sequence[int]]


@dataclass(frozen=True)
class SaveSliceInfo:
    """Where a shard sits in its logical variable: ``full_name``, ``full_shape``, ``var_offset``."""

    full_name: str
    full_shape: tuple[int, ...]
    var_offset: tuple[int, ...]
    var_shape: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"full_name": self.full_name, "full_shape": list(self.full_shape),
                "var_offset": list(self.var_offset), "var_shape": list(self.var_shape)}

    def slot(self, slot_suffix: str) -> "SaveSliceInfo":
        """The same slice of the slot ``<full_name><slot_suffix>`` (e.g. "/Adam_1")."""
        return SaveSliceInfo(self.full_name + slot_suffix, self.full_shape, self.var_offset, self.var_shape)


def shard_sizes(dim: int, num_shards: int) -> list[int]:
    """Sizes of ``num_shards`` slices of ``dim`` rows: the first ``dim % num_shards`` one larger."""
    base, extras = divmod(dim, num_shards)
    return [base + (1 if i < extras else 0) for i in range(num_shards)]


def _check_axis(shape, axis: int, who: str) -> None:
    if not shape or not -len(shape) <= axis < len(shape):
        raise ValueError(f"{who}: axis {axis} is out of range for a variable of shape {tuple(shape)}")


def fixed_size_partitioner(num_shards: int, axis: int = 0) -> Partitioner:
    """``num_shards`` shards along ``axis`` (fewer when the axis is shorter)."""
    if num_shards < 1:
        raise ValueError(f"fixed_size_partitioner: num_shards must be >= 1, got {num_shards}")

    def partitioner(shape, dtype=np.float32):
        _check_axis(shape, axis, "fixed_size_partitioner")
        parts = [1] * len(shape)
        parts[axis] = max(1, min(num_shards, shape[axis]))
        return parts

    return partitioner


def _slice_bytes(shape, axis: int, dtype) -> int:
    return math.prod(d for i, d in enumerate(shape) if i != axis % len(shape)) * np.dtype(dtype).itemsize


def min_max_variable_partitioner(max_partitions: int = 1, axis: int = 0, min_slice_size: int = 256 << 10) -> Partitioner:
    """As many shards as keep each at least ``min_slice_size`` bytes, at most ``max_partitions``."""
    if max_partitions < 1:
        raise ValueError(f"min_max_variable_partitioner: max_partitions must be >= 1, got {max_partitions}")

    def partitioner(shape, dtype=np.float32):
        _check_axis(shape, axis, "min_max_variable_partitioner")
        rows_per_shard = max(1, min_slice_size // max(1, _slice_bytes(shape, axis, dtype)))
        parts = [1] * len(shape)
        parts[axis] = max(1, min(shape[axis], max_partitions, math.ceil(shape[axis] / rows_per_shard)))
        return parts

    return partitioner


def variable_axis_size_partitioner(max_shard_bytes: int, axis: int = 0, max_shards: int | None = None) -> Partitioner:
    """As few shards as keep each at most ``max_shard_bytes`` (a shard holds at least one slice)."""
    if max_shard_bytes < 1:
        raise ValueError(f"variable_axis_size_partitioner: max_shard_bytes must be >= 1, got {max_shard_bytes}")

    def partitioner(shape, dtype=np.float32):
        _check_axis(shape, axis, "variable_axis_size_partitioner")
        rows_per_shard = max(1, max_shard_bytes // max(1, _slice_bytes(shape, axis, dtype)))
        n = math.ceil(shape[axis] / rows_per_shard)
        parts = [1] * len(shape)
        parts[axis] = max(1, min(n, max_shards or n, shape[axis]))
        return parts

    return partitioner


class PartitionedVariable:
    """A logical variable stored as shard Variables along ``axis``; iterate it for the shards.

    ``as_tensor()`` concatenates the shards for dense use (a matmul); ``nn.embedding_lookup``
    reads only the rows it needs from each shard instead.
    """

    def __init__(self, name: str, shape: Sequence[int], dtype, variables: Sequence[Variable], axis: int):
        self.name = name
        self._shape = tuple(int(d) for d in shape)
        self._dtype = np.dtype(dtype)
        self._variables = list(variables)
        self.axis = axis
        self._concat: Tensor | None = None

    def __iter__(self):
        return iter(self._variables)

    def __len__(self) -> int:
        return len(self._variables)

    def __getitem__(self, i: int) -> Variable:
        return self._variables[i]

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    def get_shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def graph(self):
        return self._variables[0].graph

    def get_partitions(self) -> list[int]:
        parts = [1] * len(self._shape)
        parts[self.axis] = len(self._variables)
        return parts

    def _get_variable_list(self) -> list[Variable]:
        return list(self._variables)

    def offsets(self) -> list[int]:
        """Each shard's first index along ``axis``."""
        return [v.save_slice_info.var_offset[self.axis] for v in self._variables]

    def as_tensor(self) -> Tensor:
        """The whole value: the shards concatenated (built once, on the reader's device)."""
        if self._concat is None:
            if len(self._variables) == 1:
                self._concat = self._variables[0].tensor
            else:
                with self.graph.as_default():
                    self._concat = ops.concat([v.tensor for v in self._variables], axis=self.axis,
                                              name=self.name + "/concat")
        return self._concat

    def __repr__(self) -> str:
        return f"<PartitionedVariable {self.name} shape={self._shape} shards={len(self._variables)}>"


def _initial_value(initializer, full_shape, shard_shape, offset, dtype):
    """A shard's initial value: the slice of a full array, or ``initializer(shard_shape, dtype)``."""
    if initializer is None:
        from trainer.init import glorot_uniform

        initializer = glorot_uniform
    if callable(initializer):
        value = initializer(tuple(shard_shape), dtype=dtype)
        if isinstance(value, Tensor):  # a TF-style initializer builds an op (random_normal, ...)
            if value.shape is not None and tuple(value.shape) != tuple(shard_shape):
                raise ValueError(f"initializer returned shape {tuple(value.shape)} for a shard of shape "
                                 f"{tuple(shard_shape)}")
            return value
        value = np.asarray(value)
        if value.shape != tuple(shard_shape):
            raise ValueError(f"initializer returned shape {value.shape} for a shard of shape {tuple(shard_shape)}")
        return value.astype(dtype, copy=False)
    full = np.asarray(initializer, dtype=dtype)
    if full.shape != tuple(full_shape):
        raise ValueError(f"initial value has shape {full.shape}; the variable's shape is {tuple(full_shape)}")
    return full[tuple(slice(o, o + s) for o, s in zip(offset, shard_shape))]


def partitioned_variable(name: str, shape: Sequence[int], dtype=np.float32, initializer=None,
                         partitioner: Partitioner | None = None, trainable: bool = True,
                         collections=None) -> PartitionedVariable:
    """Shard Variables ``<name>/part_<i>`` of a logical ``shape`` variable, split as ``partitioner`` says.

    ``initializer`` is a function ``(shape, dtype=) -> array`` called per shard (as trainer.init's
    are) or a full-shape array that is sliced. Without a partitioner there is one shard.
    """
    shape = tuple(int(d) for d in shape)
    if not shape or any(d <= 0 for d in shape):
        raise ValueError(f"partitioned variable {name!r}: needs a fully known, non-empty shape, got {shape}")
    dtype = np.dtype(dtype)
    parts = list(partitioner(shape, dtype)) if partitioner is not None else [1] * len(shape)
    if len(parts) != len(shape) or any(p < 1 for p in parts):
        raise ValueError(f"partitioned variable {name!r}: partitioner returned {parts} for shape {shape}")
    split = [i for i, p in enumerate(parts) if p > 1]
    if len(split) > 1:
        raise ValueError(f"partitioned variable {name!r}: can partition along one axis only, got {parts}")
    axis = split[0] if split else 0
    if parts[axis] > shape[axis]:
        raise ValueError(f"partitioned variable {name!r}: {parts[axis]} shards along axis {axis} of size {shape[axis]}")
    graph = get_default_graph()
    shards = []
    with graph.name_scope(name) as scope:
        logical = scope.rstrip("/")
        offset = 0
        for i, size in enumerate(shard_sizes(shape[axis], parts[axis])):
            shard_shape = shape[:axis] + (size,) + shape[axis + 1:]
            start = tuple(offset if d == axis else 0 for d in range(len(shape)))
            value = _initial_value(initializer, shape, shard_shape, start, dtype)
            with graph.name_scope(logical + "/"):
                v = Variable(value, trainable=trainable, name=f"part_{i}", dtype=dtype, collections=collections)
            v.save_slice_info = SaveSliceInfo(logical, shape, start, shard_shape)
            shards.append(v)
            offset += size
    pv = PartitionedVariable(logical, shape, dtype, shards, axis)
    graph.add_to_collection(PARTITIONED_VARIABLES, pv)
    return pv


def create_partitioned_variables(shape: Sequence[int], slicing: Sequence[int], initializer, dtype=np.float32,
                                 trainable: bool = True, collections=None, name: str | None = None) -> list[Variable]:
    """TensorFlow 1.x's ``tf.create_partitioned_variables``: the shard Variables of a ``shape``
    variable split as ``slicing`` says (the number of shards per axis, one axis > 1)."""
    slicing = list(slicing)
    pv = partitioned_variable(name or "PartitionedVariable", shape, dtype=dtype, initializer=initializer,
                              partitioner=lambda shape, dtype: slicing, trainable=trainable, collections=collections)
    return list(pv)
