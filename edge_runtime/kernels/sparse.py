"""Kernels that route rows between the shards of a partitioned table (schemas/ops/sparse.py, domain
``flowstack``): an embedding lookup over shards, trained by the trainer, runs on the edge too
once frozen. The sparse optimizer updates are stateful and stay in trainer/kernels/sparse.py."""

from __future__ import annotations

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
