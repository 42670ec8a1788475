"""Kernels of the sparse family (schemas/ops/sparse.py): routing rows between the shards of a
partitioned variable (pure), and the sparse optimizer updates (stateful): rows ``indices`` of a
variable and its slots change in place, every other row stays as it was. ``indices`` is unique
(the optimizer sums duplicate rows with UnsortedSegmentSum first)."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from schemas.registry import ShapeError
from trainer.kernels.registry import stateful_kernel

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


# -- sparse optimizer updates (stateful) ---------------------------------------------------------
def _rows(grad, indices, var):
    idx = indices.reshape(-1)
    return idx, grad.reshape((idx.size,) + var.shape[1:])


@stateful_kernel("SparseApplyAdagrad")
def sparse_apply_adagrad(rctx, var, accum, lr, grad, indices, *, xp):
    idx, g = _rows(grad, indices, var)
    acc = accum[idx] + g * g
    accum[idx] = acc
    var[idx] -= lr * g / xp.sqrt(acc)
    return var


@stateful_kernel("SparseApplyMomentum")
def sparse_apply_momentum(rctx, var, accum, lr, grad, indices, momentum, *, xp, use_nesterov):
    idx, g = _rows(grad, indices, var)
    acc = accum[idx] * momentum + g
    accum[idx] = acc
    var[idx] -= lr * (g + momentum * acc) if use_nesterov else lr * acc
    return var


@stateful_kernel("SparseApplyAdam")
def sparse_apply_adam(rctx, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, indices, *, xp):
    idx, g = _rows(grad, indices, var)
    alpha = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)
    m_rows = m[idx] * beta1 + (1 - beta1) * g
    v_rows = v[idx] * beta2 + (1 - beta2) * (g * g)
    m[idx] = m_rows
    v[idx] = v_rows
    var[idx] -= alpha * m_rows / (xp.sqrt(v_rows) + epsilon)
    return var
