"""Kernels that route rows between the shards of a partitioned table (schemas/ops/sparse.py, domain
``flowstack``): an embedding lookup over shards, trained by the trainer, runs on the edge too
once frozen. The sparse optimizer updates are stateful and stay in trainer/kernels/sparse.py."""

from __future__ import annotations

import itertools

import numpy as np

from edge_runtime.string_hashes import fingerprint64, fingerprint_cat64
from edge_runtime.kernels.registry import kernel
from schemas.registry import ShapeError

D = "flowstack"


@kernel("DynamicPartition", domain=D)
def dynamic_partition(data, partitions, *, xp, num_partitions):
    if data.shape[:partitions.ndim] != partitions.shape:
        raise ShapeError(f"DynamicPartition: partitions of shape {partitions.shape} do not lead data of shape {data.shape}")
    flat = partitions.reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= num_partitions):
        raise ShapeError(f"DynamicPartition: partition index {int(flat.max() if flat.max() >= num_partitions else flat.min())} "
                         f"is outside [0, {num_partitions})")
    rows = data.reshape((flat.size,) + data.shape[partitions.ndim:])
    return tuple(rows[flat == i] for i in range(num_partitions))


@kernel("DynamicStitch", domain=D)
def dynamic_stitch(*inputs, xp, N):
    indices, data = inputs[:N], inputs[N:]
    flat_idx = [i.reshape(-1) for i in indices]
    total = 1 + max((int(i.max()) for i in flat_idx if i.size), default=-1)
    inner = data[0].shape[indices[0].ndim:]
    out = xp.zeros((total,) + tuple(inner), dtype=data[0].dtype)
    for idx, d in zip(flat_idx, data):
        if idx.size and idx.min() < 0:
            raise ShapeError(f"DynamicStitch: negative index {int(idx.min())}")
        out[idx] = d.reshape((idx.size,) + tuple(inner))
    return out


@kernel("UnsortedSegmentSum", domain=D)
def unsorted_segment_sum(data, segment_ids, num_segments, *, xp):
    n = int(num_segments)
    ids = segment_ids.reshape(-1)
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise ShapeError(f"UnsortedSegmentSum: segment id outside [0, {n})")
    inner = data.shape[segment_ids.ndim:]
    out = xp.zeros((n,) + tuple(inner), dtype=data.dtype)
    xp.add.at(out, ids, data.reshape((ids.size,) + tuple(inner)))
    return out


def _feature_hash(value) -> int:
    """What a hashed SparseCross folds for one entry: a string's Fingerprint64, an integer's own 64 bits."""
    if isinstance(value, (str, bytes)):
        return fingerprint64(value.encode("utf-8") if isinstance(value, str) else value)
    return int(value) & ((1 << 64) - 1)


def _feature_text(value) -> bytes:
    """What a string SparseCross joins for one entry: the string's bytes, an integer's decimal text."""
    if isinstance(value, (str, bytes)):
        return value.encode("utf-8") if isinstance(value, str) else value
    return str(int(value)).encode("ascii")


def _hashed_cross(hash_key: int, num_buckets: int):
    modulus = num_buckets if num_buckets > 0 else (1 << 63) - 1

    def combine(combination) -> int:
        hashed = hash_key & ((1 << 64) - 1)
        for feature in combination:
            hashed = fingerprint_cat64(hashed, feature)
        return hashed % modulus
    return combine


@kernel("SparseCross", domain=D)
def sparse_cross(*inputs, xp, N, hashed_output, num_buckets, hash_key):
    indices, values, shapes = inputs[:N], inputs[N:2 * N], inputs[2 * N:]
    for k, dense_shape in enumerate(shapes):
        if dense_shape.size != 2:
            raise ShapeError(f"SparseCross: input {k} must be 2-D [batch, n], got rank {dense_shape.size}")
    batches = sorted({int(s.reshape(-1)[0]) for s in shapes})
    if len(batches) != 1:
        raise ShapeError(f"SparseCross: the inputs have different batch sizes {batches}")
    batch = batches[0]
    feature = _feature_hash if hashed_output else _feature_text
    combine = _hashed_cross(hash_key, num_buckets) if hashed_output else b"_X_".join
    rows: list[list[list]] = [[[] for _ in range(N)] for _ in range(batch)]
    for column, (idx, vals) in enumerate(zip(indices, values)):
        for row, value in zip(idx[:, 0].tolist(), vals.reshape(-1).tolist()):
            rows[row][column].append(feature(value))
    out_indices, out_values, width = [], [], 0
    for row, features in enumerate(rows):
        crosses = [combine(c) for c in itertools.product(*features)]  # the last input varies fastest, as TF's
        out_indices += [(row, position) for position in range(len(crosses))]
        out_values += crosses
        width = max(width, len(crosses))
    if hashed_output:
        out = xp.asarray(out_values, dtype=xp.int64)
    else:
        out = np.empty(len(out_values), dtype=object)
        out[:] = out_values
    return (xp.asarray(out_indices, dtype=xp.int64).reshape(-1, 2), out, xp.asarray([batch, width], dtype=xp.int64))


def _groups(indices, values) -> dict[tuple, set]:
    """Each group's (leading index) set of values."""
    groups: dict[tuple, set] = {}
    for index, value in zip(indices[:, :-1].tolist(), values.reshape(-1).tolist()):
        groups.setdefault(tuple(index), set()).add(value)
    return groups


_SET_OPERATIONS = {"a-b": lambda a, b: a - b, "b-a": lambda a, b: b - a, "intersection": lambda a, b: a & b,
                   "union": lambda a, b: a | b}


@kernel("SetOperation", domain=D)
def set_operation(a_indices, a_values, a_shape, b_indices, b_values, b_shape, *, xp, set_operation):
    if list(a_shape[:-1]) != list(b_shape[:-1]):
        raise ShapeError(f"SetOperation: a's leading shape {list(a_shape[:-1])} differs from b's {list(b_shape[:-1])}")
    a, b = _groups(a_indices, a_values), _groups(b_indices, b_values)
    combine = _SET_OPERATIONS[set_operation]
    out_indices, out_values, width = [], [], 0
    for group in sorted(set(a) | set(b)):
        members = sorted(combine(a.get(group, set()), b.get(group, set())))
        out_indices.extend((*group, i) for i in range(len(members)))
        out_values.extend(members)
        width = max(width, len(members))
    values = xp.empty(len(out_values), dtype=a_values.dtype)
    values[:] = out_values
    rank = len(a_shape)
    return (xp.asarray(out_indices, dtype=xp.int64).reshape(-1, rank), values,
            xp.asarray([*a_shape[:-1].tolist(), width], dtype=xp.int64))


@kernel("SetSize", domain=D)
def set_size(set_indices, set_values, set_shape, *, xp):
    sizes = xp.zeros(tuple(int(d) for d in set_shape[:-1]), xp.int32)
    for group, members in _groups(set_indices, set_values).items():
        sizes[group] = len(members)
    return sizes
