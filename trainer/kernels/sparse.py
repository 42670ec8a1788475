"""Stateful kernels of the sparse family (schemas/ops/sparse.py): the sparse optimizer updates.
Rows ``indices`` of a variable and its slots change in place, every other row stays as it was.
``indices`` is unique (the optimizer sums duplicate rows with UnsortedSegmentSum first). The
family's pure routing kernels (DynamicPartition, DynamicStitch, UnsortedSegmentSum) live in
edge_runtime/kernels/sparse.py, so a frozen embedding lookup runs on the edge."""

from __future__ import annotations

import numpy as np

from trainer.kernels.registry import stateful_kernel


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
