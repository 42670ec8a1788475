"""A convolution and the max pool that reads it, as one convolution over the pool's offsets.

A pool window (kernel kp, stride sp, no pads) takes the maximum of the convolution's outputs
sp * a + q over its offsets q in [0, kp). The outputs at one offset q, over every window a, form a
convolution of stride sc * sp (sc: the convolution's stride) whose filters are shifted by sc * q.
Stacked as kp**n blocks of output channels, zeros where a block's shifted filter does not reach,
they make one convolution with a kernel of sc * (kp - 1) + (k - 1) * d + 1 taps an axis at stride
sc * sp (LeNet's 5x5 layers under 2x2 pools: 6x6 at stride 2, 1.44x the multiply-adds). The pool
is then the maximum over whole channel blocks instead of a reduction over strided windows, and the
bias and the activation run on the pooled output only.

The stacked convolution runs in one of two layouts, as ``sliding_windows.conv`` chooses among its own:
- channels-last, where a stacked window row holds enough values (kernel width * C): the input
  copied to (N, spatial..., C) once, each window row one contiguous run of the column copy;
- planar, for few input channels (LeNet's one-channel first layer, whose channels-last runs would
  be 6 values): the input split into stride phases (space to depth) makes the stacked convolution
  a stride-1 one over C * stride**n channels, whose columns are copied as whole phase-plane rows
  (the outputs as wide as a plane row, then cropped), as ``sliding_windows``' flat im2col does.
"""

from __future__ import annotations

import math
import mmap
import weakref
from dataclasses import dataclass
from functools import lru_cache
from itertools import product

import numpy as np

from edge_runtime.kernels.sliding_windows import (
    CHANNELS_LAST_FEW_ROWS,
    Window,
    batch_chunks,
    planar_to_channels_last,
    strided_view,
)

# The stacked convolution runs where it costs at most this many times the multiply-adds of the
# convolution it replaces (LeNet's 5x5 under a 2x2 pool: 1.44; a 1x1 under a 2x2 pool: 4; a 3x3
# under an overlapping 3x3 pool at stride 2: 6.25) ...
MAX_STACKED_WORK = 2.0
# ... where its weights have at most this many elements (they are kept per weight array) ...
MAX_STACKED_WEIGHTS = 1 << 18
# ... and at most this share of its column matrix: with few columns (a small batch) the larger
# product does not pay (figures: benchmarks/RESULTS.md, "Figures behind the code's choices").
MAX_WEIGHT_SHARE = 0.5
# Channels-last where a stacked window row (kernel width * C values) is at least this long.
CHANNELS_LAST_MIN_RUN = 24


@dataclass(frozen=True)
class _ChannelsLast:
    """Columns gathered from the padded (N, spatial..., C) input, a row per pooled pixel."""

    view_shape: tuple[int, ...]  # (N, pooled..., kernel..., C)
    view_steps: tuple[int, ...]  # element steps of its axes


@dataclass(frozen=True)
class _WholeSplit:
    """The input split into stride phases by one copy: ``x[crop]`` reshaped to ``dims`` and
    transposed by ``order`` fills ``into``."""

    crop: tuple[slice, ...]
    dims: tuple[int, ...]
    order: tuple[int, ...]
    into: tuple[slice, ...]


@dataclass(frozen=True)
class _Planar:
    """Columns gathered from the input split into stride phases, whole plane rows at a time."""

    split_shape: tuple[int, ...]  # (N, C, strides..., planes...)
    whole: _WholeSplit | None  # the split as one copy, where pads and sizes are multiples of the strides
    copies: tuple[tuple[tuple[slice, ...], tuple[slice, ...]], ...]  # else per phase: (into the split, from x)
    view_shape: tuple[int, ...]  # (N, C * stride phases, taps..., wide outputs)
    view_steps: tuple[int, ...]  # element steps of its axes
    wide: tuple[int, ...]  # the output's extents: pooled rows, then plane extents
    crop: tuple[slice, ...]  # of the wide output to the pooled one


@dataclass(frozen=True)
class PhasePlan:
    """How one convolution + pool runs as the stacked convolution."""

    phases: int  # pool offsets, kp**n
    pooled: tuple[int, ...]
    depth: int  # columns of the stacked convolution
    index: np.ndarray  # gathers the stacked filters from the flat weights plus a zero (``_index``)
    layout: _ChannelsLast | _Planar

    @property
    def channels_last(self) -> bool:
        return isinstance(self.layout, _ChannelsLast)


def plan(x, w, group: int, win: Window, pool: Window, xp) -> PhasePlan | None:
    """The stacked convolution for this convolution and pool, or None where it does not apply (pool
    pads or dilations, grouped convolutions, an empty batch, not NumPy) or does not pay."""
    if xp is not np or group != 1 or not x.shape[0]:
        return None
    return _plan(x.shape, w.shape, win, pool)


@lru_cache(maxsize=256)
def _plan(x_shape, w_shape, win: Window, pool: Window) -> PhasePlan | None:
    if (len(pool.kernel) != len(win.kernel) or any(pool.pad_begin) or any(pool.padded_end)
            or any(d != 1 for d in pool.dilations)):
        return None
    n, (m, c) = x_shape[0], w_shape[:2]
    kernel = _stacked_kernel(win.strides, pool.kernel, win.kernel, win.dilations)
    phases = math.prod(pool.kernel)
    stacked = phases * m * c * math.prod(kernel)
    if (phases * math.prod(kernel) > MAX_STACKED_WORK * math.prod(win.kernel) * math.prod(pool.strides)
            or stacked > MAX_STACKED_WEIGHTS
            or stacked > MAX_WEIGHT_SHARE * n * math.prod(pool.out) * c * math.prod(kernel)):
        return None
    strides = tuple(sc * sp for sc, sp in zip(win.strides, pool.strides))
    channels_last = kernel[-1] * c >= CHANNELS_LAST_MIN_RUN
    index = _index(w_shape, win.strides, win.dilations, pool.kernel, pool.strides, channels_last)
    if channels_last:
        layout = _channels_last(x_shape, win, pool, kernel, strides)
    else:
        layout = _planar(x_shape, win, pool, kernel, strides)
    return PhasePlan(phases, tuple(pool.out), index.size // (phases * m), index, layout)


def _stacked_kernel(conv_strides, pool_kernel, kernel, dilations) -> tuple[int, ...]:
    """Taps an axis of the stacked kernel: every pool offset's shifted filter fits in it."""
    return tuple(sc * (kp - 1) + (k - 1) * d + 1 for sc, kp, k, d in zip(conv_strides, pool_kernel, kernel, dilations))


@lru_cache(maxsize=64)
def _index(w_shape, conv_strides, dilations, pool_kernel, pool_strides, channels_last: bool) -> np.ndarray:
    """Gather index of the stacked filters from the flat weights followed by a zero, in either
    layout's order: (phases * M, depth) planar, (depth, phases * M) channels-last (the right operand
    of its product, which OpenBLAS runs faster stored so than as a transposed view). One per layer,
    whatever the size of its input."""
    m, c, *k = w_shape
    n_sp = len(k)
    kernel = _stacked_kernel(conv_strides, pool_kernel, k, dilations)
    zero = math.prod(w_shape)
    index = np.full(tuple(pool_kernel) + (m, c) + kernel, zero, dtype=np.intp)  # (phases..., M, C, kernel...)
    taps = np.arange(zero).reshape(w_shape)
    for q in product(*(range(kp) for kp in pool_kernel)):  # offset q's filter: its tap i at sc * q + i * d
        into = tuple(slice(sc * qi, sc * qi + (ki - 1) * d + 1, d) for sc, qi, ki, d in zip(conv_strides, q, k, dilations))
        index[q + (slice(None), slice(None)) + into] = taps
    if channels_last:  # (phases..., M, kernel..., C)
        index = index.transpose(tuple(range(n_sp + 1)) + tuple(range(n_sp + 2, 2 * n_sp + 2)) + (n_sp + 1,))
    else:
        # input channel (c, r...) is stride phase r of channel c, its tap t the stacked kernel's
        # offset s * t + r: (phases..., M, C, t0, r0, t1, r1, ...) -> (phases..., M, C, r..., t...)
        strides = tuple(sc * sp for sc, sp in zip(conv_strides, pool_strides))
        taps_per_phase = tuple(-(-ki // s) for ki, s in zip(kernel, strides))
        spans = tuple(t * s for t, s in zip(taps_per_phase, strides))
        padded = np.full(index.shape[:n_sp + 2] + spans, zero, dtype=np.intp)
        padded[(Ellipsis,) + tuple(slice(0, ki) for ki in kernel)] = index
        split = padded.reshape(index.shape[:n_sp + 2] + tuple(d for t, s in zip(taps_per_phase, strides) for d in (t, s)))
        index = split.transpose(tuple(range(n_sp + 2)) + tuple(n_sp + 3 + 2 * i for i in range(n_sp))
                                + tuple(n_sp + 2 + 2 * i for i in range(n_sp)))
    index = index.reshape(math.prod(pool_kernel) * m, -1)
    index = np.ascontiguousarray(index.T if channels_last else index)
    index.flags.writeable = False
    return index


def _channels_last(x_shape, win: Window, pool: Window, kernel, strides) -> _ChannelsLast:
    n, c = x_shape[:2]
    padded = [i + b + e for i, b, e in zip(x_shape[2:], win.pad_begin, win.padded_end)]
    spatial = tuple(math.prod(padded[i + 1:]) * c for i in range(len(padded)))  # element steps
    return _ChannelsLast(
        view_shape=(n,) + tuple(pool.out) + kernel + (c,),
        view_steps=(math.prod(padded) * c,) + tuple(st * s for st, s in zip(spatial, strides)) + spatial + (1,),
    )


def _planar(x_shape, win: Window, pool: Window, kernel, strides) -> _Planar:
    n, c = x_shape[:2]
    n_sp = len(kernel)
    taps = tuple(-(-k // s) for k, s in zip(kernel, strides))  # per stride phase
    planes = [o + t - 1 for o, t in zip(pool.out, taps)]
    if n_sp > 1:
        planes[0] += 1  # a spare row: the last wide row's cropped outputs read past the plane
    channels = c * math.prod(strides)
    wide = (pool.out[0],) + tuple(planes[1:])
    whole = _whole_split(x_shape, win.pad_begin, strides, planes)
    return _Planar(
        split_shape=(n, c) + strides + tuple(planes),
        whole=whole,
        copies=() if whole else _split_copies(x_shape[2:], win.pad_begin, strides, planes),
        view_shape=(n, channels) + taps + (math.prod(wide),),
        view_steps=((channels * math.prod(planes), math.prod(planes))
                    + tuple(math.prod(planes[i + 1:]) for i in range(n_sp)) + (1,)),
        wide=wide,
        crop=(slice(None), slice(None), slice(None)) + tuple(slice(0, o) for o in pool.out[1:]),
    )


def _whole_split(x_shape, pad_begin, strides, planes) -> _WholeSplit | None:
    """The split as one copy of the input viewed as (N, C, plane0, s0, plane1, s1, ...), where every
    pad is a multiple of its stride and so is every extent the planes take (the input's, or less
    where the planes drop its last rows)."""
    n_sp = len(strides)
    starts = [pb // s for pb, s in zip(pad_begin, strides)]
    taken = [min(size, (p - start) * s) for size, s, p, start in zip(x_shape[2:], strides, planes, starts)]
    if any(pb % s or t % s or t <= 0 for pb, s, t in zip(pad_begin, strides, taken)):
        return None
    return _WholeSplit(
        crop=(slice(None), slice(None)) + tuple(slice(0, t) for t in taken),
        dims=tuple(x_shape[:2]) + tuple(d for t, s in zip(taken, strides) for d in (t // s, s)),
        order=(0, 1) + tuple(3 + 2 * i for i in range(n_sp)) + tuple(2 + 2 * i for i in range(n_sp)),
        into=(slice(None),) * (2 + n_sp) + tuple(slice(a, a + t // s) for a, t, s in zip(starts, taken, strides)),
    )


def _split_copies(spatial, pad_begin, strides, planes):
    """Per stride phase r: the slice of the split input it fills and the input slice it copies."""
    copies = []
    for r in product(*(range(s) for s in strides)):
        into, src = [], []
        for size, s, pb, p, phase in zip(spatial, strides, pad_begin, planes, r):
            first = (phase - pb) % s  # the first input index in this phase
            start = (first + pb) // s  # its place in the phase plane
            count = max(0, min(len(range(first, size, s)), p - start))
            into.append(slice(start, start + count))
            src.append(slice(first, first + (count - 1) * s + 1, s) if count else slice(0, 0))
        copies.append(((slice(None), slice(None)) + r + tuple(into), (slice(None), slice(None)) + tuple(src)))
    return tuple(copies)


def conv_max_pool(x, w, xp, win: Window, phase_plan: PhasePlan):
    """max over the pool's windows of conv(x, w) without its bias, a fresh array: (N, M, pooled...)
    planar, or (N, pooled..., M) when ``phase_plan.channels_last``."""
    stacked = stacked_weights(w, xp, phase_plan.index)
    if phase_plan.channels_last:
        return _channels_last_max_pool(x, stacked, xp, win, phase_plan)
    return _planar_max_pool(x, stacked, xp, phase_plan)


def _channels_last_max_pool(x, stacked, xp, win: Window, phase_plan: PhasePlan):
    layout = phase_plan.layout
    xl = planar_to_channels_last(x, xp, win.pad_begin, win.padded_end)
    item = xl.itemsize
    view = strided_view(xl, xp, layout.view_shape, tuple(step * item for step in layout.view_steps))
    n, m = x.shape[0], stacked.shape[1] // phase_plan.phases
    pixels = math.prod(phase_plan.pooled)
    pooled = xp.empty((n * pixels, m), dtype=xp.result_type(x, stacked))
    for start, end in batch_chunks(n, pixels * phase_plan.depth * item):
        cols = view[start:end].reshape(-1, phase_plan.depth)  # a copy
        if len(cols) < CHANNELS_LAST_FEW_ROWS:
            y = xp.ascontiguousarray(xp.matmul(stacked.T, cols.T).T)
        else:
            y = cols @ stacked
        _max_into(pooled[start * pixels:end * pixels], [y[:, q * m:(q + 1) * m] for q in range(phase_plan.phases)], xp)
    return pooled.reshape((n,) + phase_plan.pooled + (m,))


def _planar_max_pool(x, stacked, xp, phase_plan: PhasePlan):
    layout = phase_plan.layout
    n, m = x.shape[0], stacked.shape[0] // phase_plan.phases
    split = xp.zeros(layout.split_shape, dtype=x.dtype)
    if layout.whole is not None:
        whole = layout.whole
        split[whole.into] = x[whole.crop].reshape(whole.dims).transpose(whole.order)
    else:
        for into, src in layout.copies:
            split[into] = x[src]
    item = split.itemsize
    view = strided_view(split, xp, layout.view_shape, tuple(step * item for step in layout.view_steps))
    depth, length = phase_plan.depth, layout.view_shape[-1]
    pooled = xp.empty((n, m) + phase_plan.pooled, dtype=xp.result_type(x, stacked))
    for start, end in batch_chunks(n, depth * length * item):
        cols = view[start:end].reshape(end - start, depth, length)  # a copy
        y = xp.matmul(stacked, cols)  # (images, phases * M, length): each image's offset blocks in a row
        # one reduction over the blocks (faster than a maximum per block), then the crop as a copy
        acc = xp.maximum.reduce(y.reshape(end - start, phase_plan.phases, -1), axis=1)
        pooled[start:end] = acc.reshape((end - start, m) + layout.wide)[layout.crop]
    return pooled


def _max_into(out, blocks, xp):
    """out = the elementwise maximum of ``blocks``."""
    if len(blocks) == 1:
        out[...] = blocks[0]
        return
    xp.maximum(blocks[0], blocks[1], out=out)
    for block in blocks[2:]:
        xp.maximum(out, block, out=out)


# Stacked filters of weights that nothing can write (a loaded model's, views of its read-only
# file buffer), kept while those weights live, at most MAX_KEPT_ELEMENTS in all (the oldest
# dropped first): stacking gathers every stacked tap, a few microseconds a call on LeNet's layers.
MAX_KEPT_ELEMENTS = 1 << 21
_kept: dict[int, tuple[weakref.ref, np.ndarray, np.ndarray]] = {}  # id(w) -> (w, index, stacked)


def stacked_weights(w, xp, index):
    """The stacked filters that ``index`` gathers from ``w`` (laid out as ``_index`` says)."""
    key = id(w)
    kept = _kept.get(key)
    if kept is not None and kept[0]() is w and kept[1] is index:
        return kept[2]
    stacked = xp.take(xp.concatenate((w.reshape(-1), xp.zeros(1, dtype=w.dtype))), index)
    if unwritable(w):
        _kept.pop(key, None)  # re-kept as the newest
        _kept[key] = (weakref.ref(w, lambda ref, key=key: _forget(key, ref)), index, stacked)
        # single dict operations and a copy to read: safe against other threads and against a
        # weight's death (``_forget``) while the oldest are dropped
        entries = _kept.copy()
        total = sum(entry[2].size for entry in entries.values())
        for old, entry in entries.items():
            if total <= MAX_KEPT_ELEMENTS:
                break
            if old != key:
                _kept.pop(old, None)
                total -= entry[2].size
    return stacked


def kept_count() -> int:
    """How many weight arrays' stacked filters are kept."""
    return len(_kept)


def _forget(key: int, ref: weakref.ref) -> None:
    kept = _kept.get(key)
    if kept is not None and kept[0] is ref:
        _kept.pop(key, None)


def unwritable(w) -> bool:
    """Whether no one can write ``w``'s values: every array up its chain of bases is read-only and
    the memory under them is bytes or a read-only mapping (an array that owns its memory may be
    made writable again)."""
    base = w
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    if isinstance(base, memoryview):
        return base.readonly and isinstance(base.obj, (bytes, mmap.mmap))
    return isinstance(base, bytes)
