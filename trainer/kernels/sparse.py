"""Kernels of the sparse family (schemas/ops/sparse.py) that stay in the trainer: the segment
max/min/prod reductions (whose bad ids are TensorFlow's InvalidArgumentErrors) and, stateful, the
sparse optimizer updates.
Rows ``indices`` of a variable and its slots change in place, every other row stays as it was.
``indices`` is unique (the optimizer sums duplicate rows with UnsortedSegmentSum first). The
family's pure routing kernels (DynamicPartition, DynamicStitch, UnsortedSegmentSum) live in
edge_runtime/kernels/sparse.py, so a frozen embedding lookup runs on the edge."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from trainer.errors import InvalidArgumentError
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


# -- segment reductions: ufunc.at over the rows, from the reduction's identity --------------------
def _lowest(dtype: np.dtype):
    return np.finfo(dtype).min if dtype.kind == "f" else (np.iinfo(dtype).min if dtype.kind in "iu" else False)


def _highest(dtype: np.dtype):
    return np.finfo(dtype).max if dtype.kind == "f" else (np.iinfo(dtype).max if dtype.kind in "iu" else True)


# op -> (the ufunc, the value of a segment no row reaches)
_SEGMENT_REDUCTIONS = {
    "Max": (np.maximum, _lowest),
    "Min": (np.minimum, _highest),
    "Prod": (np.multiply, lambda dtype: 1),
}


def _segment_out(data, ids, flat, n: int, reduction: str, xp):
    ufunc, empty = _SEGMENT_REDUCTIONS[reduction]
    inner = tuple(data.shape[ids.ndim:])
    rows = data.reshape((flat.size,) + inner)
    keep = flat >= 0
    out = xp.full((n,) + inner, empty(data.dtype), dtype=data.dtype)
    getattr(xp, ufunc.__name__).at(out, flat[keep], rows[keep])
    return out


def _unsorted_segment(op_type: str, reduction: str):
    def reduce(data, segment_ids, num_segments, *, xp):
        n = int(num_segments)
        flat = np.asarray(segment_ids).reshape(-1)
        bad = np.flatnonzero(flat >= n)
        if bad.size:
            i = int(bad[0])
            raise InvalidArgumentError(f"{op_type}: segment_ids[{i}] = {int(flat[i])} is out of range [0, {n})")
        return _segment_out(data, segment_ids, flat, n, reduction, xp)

    reduce.__name__ = op_type
    return reduce


def _sorted_segment(op_type: str, reduction: str):
    def reduce(data, segment_ids, *, xp):
        flat = np.asarray(segment_ids).reshape(-1)
        if flat.size != data.shape[0]:
            raise InvalidArgumentError(f"{op_type}: segment_ids should be the same size as dimension 0 of data: "
                                       f"{flat.size} vs {data.shape[0]}")
        if flat.size and int(flat[0]) < 0:
            raise InvalidArgumentError(f"{op_type}: segment_ids[0] = {int(flat[0])} is negative")
        falls = np.flatnonzero(np.diff(flat) < 0)
        if falls.size:
            i = int(falls[0]) + 1
            raise InvalidArgumentError(f"{op_type}: segment ids are not increasing: segment_ids[{i}] = {int(flat[i])} "
                                       f"follows {int(flat[i - 1])}")
        n = int(flat[-1]) + 1 if flat.size else 0
        out = _segment_out(data, segment_ids, flat, n, reduction, xp)
        out[np.bincount(flat, minlength=n) == 0] = 0  # TF's sorted segments leave empty ones at 0
        return out

    reduce.__name__ = op_type
    return reduce


for _reduction in _SEGMENT_REDUCTIONS:
    kernel(f"Segment{_reduction}", domain="flowstack")(_sorted_segment(f"Segment{_reduction}", _reduction))
    kernel(f"UnsortedSegment{_reduction}", domain="flowstack")(
        _unsorted_segment(f"UnsortedSegment{_reduction}", _reduction))


def _levenshtein(a: list, b: list) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def _sequences(indices, values) -> dict:
    """{outer index: the values in order of their last index} for one SparseTensor."""
    out: dict = {}
    for idx, v in sorted(zip(map(tuple, indices.tolist()), values.tolist())):
        out.setdefault(idx[:-1], []).append(v)
    return out


@kernel("EditDistance", domain="flowstack")
def edit_distance(h_idx, h_val, h_shape, t_idx, t_val, t_shape, *, xp, normalize):
    if h_shape.size != t_shape.size or h_shape.size < 1:
        raise InvalidArgumentError(f"EditDistance: hypothesis and truth must have the same rank (at least 1), got "
                                   f"shapes {h_shape.tolist()} and {t_shape.tolist()}")
    hyp, truth = _sequences(h_idx, h_val), _sequences(t_idx, t_val)
    out = np.zeros(np.maximum(h_shape[:-1], t_shape[:-1]), np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        for loc in set(hyp) | set(truth):
            h, t = hyp.get(loc, []), truth.get(loc, [])
            distance = np.float32(_levenshtein(h, t))
            out[loc] = distance / np.float32(len(t)) if normalize else distance
    return out
