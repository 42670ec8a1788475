"""One axis of a separable window reduction as ufunc calls on whole flattened arrays.

``nn.reduce_windows`` reduces an axis with one ufunc call per tap on strided views. NumPy runs a
call on a view whose rows are short (a plane row of 64-112 values, or every other value of one)
at a third to a sixth of its speed on one contiguous run: it pays per row, and loads strided values
one at a time. Where an axis's output is as long as the source it reads, every tap is the same
source shifted by a whole number of rows of that axis, and a call over the flattened arrays
computes it for every row at once; the rows near an axis end, where a shifted tap crosses into the
next plane, are then recomputed from the taps that reach them (a few small calls).

Two axis kinds qualify:
- stride 1 with the output as long as the input (a "same" pool: 3x3 pad 1, YOLO's 5x5 pad 2);
- stride 2 with an even length and half as many outputs (ResNet's 3x3 stride 2 pad 1 pool), the
  axis first split into its even and odd rows (copies, which NumPy runs at a contiguous call's
  speed where a ufunc call on the same strided view does not), and each tap then one of the two
  halves, shifted. Along the innermost axis the split reads each pair of values as one integer of
  twice the width and keeps its low half by a cast (two contiguous casts instead of two gathers);
  elsewhere it runs only where windows overlap and rows are short (``_splits``).

Anything else returns None and runs as before.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

# The integer type holding a pair of values of each itemsize, and the one holding one value.
PAIR_TYPES = {1: (np.uint16, np.uint8), 2: (np.uint32, np.uint16), 4: (np.uint64, np.uint32)}
# A stride-2 axis is split into its even and odd rows by copies where windows overlap (a row is
# read by two taps) and a row holds at most this many values: longer rows already run near a
# contiguous call's speed in one call on the strided view (ResNet's channels-last stem pool:
# rows of 64 values 142 -> 99 us split, rows of 7168 values 80 -> 136 us).
MAX_SPLIT_BLOCK = 1024
# Stride-1 windows run over a padded copy (``reduce_padded``) where a window spans at least this
# share of an axis's rows (float32 max pools, us: 5x5 pad 2 on 1x128x10x10 70 -> 33, on 1x128x20x20
# 95 -> 77; 3x3 pad 1 on 1x32x16x16 20 -> 17, but on 1x64x28x28 31 -> 43).
PADDED_MIN_EDGE_SHARE = 0.1


@dataclass(frozen=True)
class _AxisShifts:
    """Taps as (source index, shift in the output's rows) and the output rows to recompute."""

    taps: tuple[tuple[int, int], ...]
    edge_rows: tuple[int, ...]


def reduce_axis(x, xp, ufunc, fill, axis: int, kernel: int, stride: int, dilation: int, pad_begin: int,
                out_size: int):
    """``x`` reduced with ``ufunc`` along ``axis`` over windows of ``kernel`` taps (``dilation``
    apart, every ``stride`` inputs, the first starting ``pad_begin`` before the input; ``fill`` where
    no tap reaches), as a fresh contiguous array; None where this path does not apply."""
    if xp is not np or kernel < 2 or not x.size or not x.flags.c_contiguous:
        return None
    size, block = x.shape[axis], math.prod(x.shape[axis + 1:])
    if stride == 1 and out_size == size:
        sources = (x,)
    elif stride == 2 and size % 2 == 0 and out_size == size // 2 and _splits(kernel, block):
        sources = _even_and_odd(x, axis) if block > 1 else _even_and_odd_values(x, axis)
    else:
        return None
    plan = _shifts(len(sources), out_size, kernel, dilation, pad_begin)
    out = np.empty(x.shape[:axis] + (out_size,) + x.shape[axis + 1:], dtype=x.dtype)
    _flat_taps(out.reshape(-1), [s.reshape(-1) for s in sources], plan.taps, block, ufunc)
    _recompute_rows(out, sources, plan, axis, ufunc, fill)
    return out


def _splits(kernel: int, block: int) -> bool:
    """Whether a stride-2 axis pays for its split: along the innermost axis always (a call on every
    other value loads them one at a time); elsewhere where the windows overlap (two taps read a
    row) and rows are short."""
    return block == 1 or (kernel > 2 and block <= MAX_SPLIT_BLOCK)


def _even_and_odd(x, axis: int):
    """The even and the odd rows of ``x`` along ``axis`` (of even length), each copied contiguous."""
    head = (slice(None),) * axis
    return tuple(np.ascontiguousarray(x[head + (slice(p, None, 2),)]) for p in range(2))


def _even_and_odd_values(x, axis: int):
    """The even and the odd values of ``x`` along ``axis``, which is of even length and followed
    only by axes of length 1, each a contiguous array: each pair of values read as one integer of
    twice the width, of which a cast to the narrower type keeps the low half (4x faster than
    copying every other value). Strided copies where no integer type pairs the values (8-byte
    values) or on a big-endian machine."""
    types = PAIR_TYPES.get(x.dtype.itemsize)
    if types is None or sys.byteorder != "little":
        return _even_and_odd(x, axis)
    pair, half = types
    flat = x.reshape(-1).view(half)
    even = np.empty(x.shape[:axis] + (x.shape[axis] // 2,) + x.shape[axis + 1:], dtype=x.dtype)
    odd = np.empty_like(even)
    np.copyto(even.reshape(-1).view(half), flat.view(pair), casting="unsafe")
    odd_flat = odd.reshape(-1).view(half)
    # the pairs read one value later: their low halves are the odd values, but for the last
    np.copyto(odd_flat[:-1], flat[1:-1].view(pair), casting="unsafe")
    odd_flat[-1] = flat[-1]
    return even, odd


@lru_cache(maxsize=1024)
def _shifts(n_sources: int, out_size: int, kernel: int, dilation: int, pad_begin: int) -> _AxisShifts:
    """Output row i's tap t reads input index i * n + t * dilation - pad_begin, where the axis's
    stride n is the number of sources it is split into: row i + shift of the source it falls in."""
    taps = []
    for t in range(kernel):
        offset = t * dilation - pad_begin
        taps.append((offset % n_sources, offset // n_sources))
    low = max(0, -min(shift for _, shift in taps))
    high = max(0, max(shift for _, shift in taps))
    edge = sorted(set(range(min(low, out_size))) | set(range(max(out_size - high, 0), out_size)))
    return _AxisShifts(tuple(taps), tuple(edge))


def _flat_taps(out, sources, taps, block: int, ufunc) -> None:
    """Every tap over the flattened arrays (rows ``block`` values long), each clipped to the span
    the first two taps cover; the values outside it, and those read across a plane's end, are in
    the edge rows recomputed later."""
    total = out.size

    def span(shift):
        step = shift * block
        return max(0, -step), total - max(0, step), step

    (s0, k0), (s1, k1) = taps[0], taps[1]
    lo0, hi0, st0 = span(k0)
    lo1, hi1, st1 = span(k1)
    first, last = max(lo0, lo1), min(hi0, hi1)
    if first >= last:
        return
    ufunc(sources[s0][first + st0:last + st0], sources[s1][first + st1:last + st1], out=out[first:last])
    for source, shift in taps[2:]:
        lo, hi, step = span(shift)
        lo, hi = max(lo, first), min(hi, last)
        if lo < hi:
            ufunc(out[lo:hi], sources[source][lo + step:hi + step], out=out[lo:hi])


def _recompute_rows(out, sources, plan: _AxisShifts, axis: int, ufunc, fill) -> None:
    """Each edge row from the taps that stay inside its plane (``fill`` where none does)."""
    head = (slice(None),) * axis
    rows = sources[0].shape[axis]
    for i in plan.edge_rows:
        target = out[head + (i,)]
        inside = [sources[s][head + (i + k,)] for s, k in plan.taps if 0 <= i + k < rows]
        if not inside:
            target[...] = fill
        elif len(inside) == 1:
            target[...] = inside[0]
        else:
            ufunc(inside[0], inside[1], out=target)
            for more in inside[2:]:
                ufunc(target, more, out=target)


def small_planes(spatial, win) -> bool:
    """Whether edge rows are a large share of some axis (``PADDED_MIN_EDGE_SHARE``), where
    ``reduce_padded``'s two copies cost less than ``reduce_axis``'s per-row calls."""
    return any((e - 1) >= PADDED_MIN_EDGE_SHARE * s for e, s in zip(win.effective, spatial))


def reduce_padded(x, xp, ufunc, fill, win, lead: int):
    """Every axis of a stride-1 window reduction (``win``; spatial axes after the first ``lead``)
    over one copy of ``x`` padded with ``fill``: each tap one call over the whole flattened array,
    no edge rows (a window never reaches past its plane's padding), then the outputs copied out;
    a fresh array, or None where a stride is not 1. Fewer calls than ``reduce_axis`` where planes
    are small and edge rows many (YOLO's 5x5 pad 2 pools on 10x10 planes: 4 edge rows an axis)."""
    n = len(win.kernel)
    if xp is not np or any(s != 1 for s in win.strides) or not x.size:
        return None
    spatial = x.shape[lead:lead + n]
    head = (slice(None),) * lead
    padded = tuple(s + b + e for s, b, e in zip(spatial, win.pad_begin, win.padded_end))
    shape = x.shape[:lead] + padded + x.shape[lead + n:]
    source = np.full(shape, fill, dtype=x.dtype)
    source[head + tuple(slice(b, b + s) for b, s in zip(win.pad_begin, spatial))] = x
    for axis, (k, d) in enumerate(zip(win.kernel, win.dilations)):
        if k == 1:
            continue
        block = math.prod(shape[lead + axis + 1:])
        flat, acc = source.reshape(-1), np.empty(shape, dtype=x.dtype)
        span = flat.size - (k - 1) * d * block  # the last rows of the last plane: outside every output
        out = acc.reshape(-1)
        ufunc(flat[:span], flat[d * block:d * block + span], out=out[:span])
        for t in range(2, k):
            ufunc(out[:span], flat[t * d * block:t * d * block + span], out=out[:span])
        out[span:] = fill
        source = acc
    return np.ascontiguousarray(source[head + tuple(slice(0, o) for o in win.out)])
