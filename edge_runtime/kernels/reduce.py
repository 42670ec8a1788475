"""Reductions over axes (Reduce*), index reductions (ArgMax, ArgMin) and TopK."""

from __future__ import annotations

import math

import numpy as np

from edge_runtime.kernels.row_moments import row_means
from edge_runtime.kernels.registry import kernel


def reduction_axes(x, axes, noop_with_empty_axes) -> tuple[int, ...]:
    """The axes to reduce: all of them when none are given, unless noop_with_empty_axes."""
    if axes is None or axes.size == 0:
        return () if noop_with_empty_axes else tuple(range(x.ndim))
    return tuple(sorted({int(a) % x.ndim for a in axes.reshape(-1).tolist()}))


def _reduced_shape(shape, axes, keepdims) -> tuple[int, ...]:
    return tuple(1 if i in axes else d for i, d in enumerate(shape) if keepdims or i not in axes)


def _lowest(dtype):
    if dtype.kind == "f":
        return -np.inf
    return False if dtype.kind == "b" else np.iinfo(dtype).min


def _highest(dtype):
    if dtype.kind == "f":
        return np.inf
    return True if dtype.kind == "b" else np.iinfo(dtype).max


def _reduction(compute, empty_value):
    """A Reduce* kernel from ``compute(x, axes, keepdims, xp)`` and the value of an empty reduction.

    ``empty_value(dtype)`` gives what ONNX defines for reducing over zero elements (the
    operation's identity: 0 for sums, 1 for products, -inf for max and log-sums, ...).
    """

    def run(data, axes, *, xp, keepdims, noop_with_empty_axes):
        axes = reduction_axes(data, axes, noop_with_empty_axes)
        keepdims = bool(keepdims)
        if data.size == 0 and axes:
            return xp.full(_reduced_shape(data.shape, axes, keepdims), empty_value(data.dtype), dtype=data.dtype)
        return xp.asarray(compute(data, axes, keepdims, xp)).astype(data.dtype, copy=False)

    return run


def _log_sum_exp(x, axes, keepdims, xp):
    # Shift by the maximum so exp never overflows; an all -inf slice stays -inf, not NaN.
    m = xp.max(x, axis=axes, keepdims=True)
    m = xp.where(xp.isfinite(m), m, x.dtype.type(0))
    out = xp.log(xp.sum(xp.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdims else out.reshape(_reduced_shape(x.shape, axes, False))


def _mean(x, axes, keepdims, xp):
    """Means; over trailing axes of a float32/float64 NumPy array as ``row_means``, one BLAS
    product, where NumPy's reduction along the axes is several times slower."""
    trailing = axes == tuple(range(x.ndim - len(axes), x.ndim))
    if not (axes and trailing and x.size and xp.__name__ == "numpy" and x.dtype.kind == "f" and x.itemsize >= 4):
        return xp.mean(x, axis=axes, keepdims=keepdims)
    rows = xp.ascontiguousarray(x).reshape(-1, math.prod(x.shape[x.ndim - len(axes):]))
    return row_means(rows, xp).reshape(_reduced_shape(x.shape, axes, keepdims))


_REDUCTIONS = {
    # Sums and products accumulate in the input's dtype, as ONNX does (numpy would widen ints).
    "ReduceSum": (lambda x, a, k, xp: xp.sum(x, axis=a, keepdims=k, dtype=x.dtype), lambda d: 0),
    "ReduceProd": (lambda x, a, k, xp: xp.prod(x, axis=a, keepdims=k, dtype=x.dtype), lambda d: 1),
    "ReduceMean": (_mean, lambda d: np.nan),
    "ReduceMax": (lambda x, a, k, xp: xp.max(x, axis=a, keepdims=k), _lowest),
    "ReduceMin": (lambda x, a, k, xp: xp.min(x, axis=a, keepdims=k), _highest),
    "ReduceL1": (lambda x, a, k, xp: xp.sum(xp.abs(x), axis=a, keepdims=k, dtype=x.dtype), lambda d: 0),
    "ReduceL2": (lambda x, a, k, xp: xp.sqrt(xp.sum(x * x, axis=a, keepdims=k)), lambda d: 0),
    "ReduceSumSquare": (lambda x, a, k, xp: xp.sum(x * x, axis=a, keepdims=k, dtype=x.dtype), lambda d: 0),
    "ReduceLogSum": (lambda x, a, k, xp: xp.log(xp.sum(x, axis=a, keepdims=k)), lambda d: -np.inf),
    "ReduceLogSumExp": (_log_sum_exp, lambda d: -np.inf),
}

for _op, (_compute, _empty) in _REDUCTIONS.items():
    kernel(_op, host_inputs=(1,))(_reduction(_compute, _empty))


def _arg_reduction(find):
    def run(data, *, xp, axis, keepdims, select_last_index):
        axis = axis % data.ndim
        if select_last_index:
            # The first hit in the reversed axis is the last hit in the original.
            idx = (data.shape[axis] - 1) - find(xp.flip(data, axis), axis=axis)
        else:
            idx = find(data, axis=axis)
        idx = idx.astype(np.int64, copy=False)
        return xp.expand_dims(idx, axis) if keepdims else idx

    return run


kernel("ArgMax")(_arg_reduction(lambda x, axis: x.argmax(axis=axis)))
kernel("ArgMin")(_arg_reduction(lambda x, axis: x.argmin(axis=axis)))


def _stable_order(v, largest, xp):
    """Positions sorting ``v`` along its last axis, ties broken by lower position first."""
    if not largest:
        return xp.argsort(v, axis=-1, kind="stable")
    # Descending and stable: sort the reversed row ascending, read it backwards, map back.
    return (v.shape[-1] - 1) - xp.argsort(v[..., ::-1], axis=-1, kind="stable")[..., ::-1]


# At most this many top entries are found by as many arg-max passes (a classifier's top 5 over a
# 32,000-token vocabulary, 32 rows: 0.3 ms, where the partition and its tie bookkeeping took 3.7).
FEW_TOP = 8


def _top_by_extremes(v, k, largest, xp):
    """Indices of the k extreme entries of each row, or None: k arg-max (arg-min) passes, each
    entry taken replaced by the dtype's least (greatest) value. arg-max takes the lowest index
    among equals, as ONNX orders ties. None where that cannot tell (NaNs, or an entry taken that
    already held the replacement value)."""
    n = v.shape[-1]
    rows = xp.array(v, order="C").reshape(-1, n)  # one copy, in row order whatever v's strides
    if rows.dtype.kind in "fc" and bool(xp.isnan(rows).any()):
        return None
    if rows.dtype.kind == "f":
        fill = -xp.inf if largest else xp.inf
    elif rows.dtype.kind in "iu":
        info = xp.iinfo(rows.dtype)
        fill = info.min if largest else info.max
    else:
        return None
    pick = rows.argmax if largest else rows.argmin
    everywhere = xp.arange(rows.shape[0])
    chosen = xp.empty((rows.shape[0], k), dtype=xp.int64)
    for j in range(k):
        chosen[:, j] = index = pick(axis=-1)
        if bool((rows[everywhere, index] == fill).any()):
            return None
        rows[everywhere, index] = fill
    return xp.sort(chosen, axis=-1).reshape(v.shape[:-1] + (k,))


def _top_candidates(v, k, largest, xp):
    """Indices of the k extreme entries of each row in ascending index order, or None.

    O(n) with a partition: the k-th value is the threshold, entries strictly beyond it are
    taken, and ties at the threshold are taken lowest index first, as ONNX orders them.
    """
    n = v.shape[-1]
    kth = n - k if largest else k - 1
    threshold = xp.partition(v, kth, axis=-1)[..., kth:kth + 1]
    if v.dtype.kind in "fc" and bool(xp.isnan(threshold).any()):
        return None  # NaNs do not compare; the full sort orders them
    beyond = v > threshold if largest else v < threshold
    tie = v == threshold
    needed = k - beyond.sum(axis=-1, keepdims=True)
    chosen = beyond | (tie & (xp.cumsum(tie, axis=-1) <= needed))
    # Exactly k chosen per row, so the row-major nonzero positions reshape into (rows, k).
    return xp.nonzero(chosen.reshape(-1, n))[1].reshape(v.shape[:-1] + (k,))


@kernel("TopK")
def top_k(x, k, *, xp, axis, largest, sorted):
    # Results are always sorted: `sorted=0` leaves the order unspecified, so sorted is valid.
    k = int(k.reshape(-1)[0])
    axis = axis % x.ndim
    v = xp.moveaxis(x, axis, -1)
    candidates = None
    if 0 < k <= FEW_TOP and k < v.shape[-1]:
        candidates = _top_by_extremes(v, k, largest, xp)
    if candidates is None and 0 < 4 * k < v.shape[-1]:
        candidates = _top_candidates(v, k, largest, xp)
    if candidates is None:
        indices = _stable_order(v, largest, xp)[..., :k]
    else:
        values = xp.take_along_axis(v, candidates, axis=-1)
        indices = xp.take_along_axis(candidates, _stable_order(values, largest, xp), axis=-1)
    values = xp.take_along_axis(v, indices, axis=-1)
    indices = indices.astype(np.int64, copy=False)
    return xp.moveaxis(values, -1, axis), xp.moveaxis(indices, -1, axis)
