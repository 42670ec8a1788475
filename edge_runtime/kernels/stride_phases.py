"""A 1x1 convolution and the strided depthwise convolution that reads it, over stride phases.

A strided convolution's im2col gathers every tap with the stride as its step, which NumPy copies
element by element: for MobileNetV2's 96-channel 112x112 -> 56x56 depthwise layer that gather is
most of the layer. Split into stride phases (phase (p, q) holds the padded pixels (r, c) with
r % s == p and c % s == q), every tap reads one phase at a fixed offset, a contiguous run once the
phase plane is flattened, as in the flat im2col of stride-1 convolutions. Splitting the expanded
tensor would cost the same strided gather, but a 1x1 convolution treats pixels independently, so
here its *input* is split (a sixth of the channels in MobileNetV2) and the 1x1 convolution writes
the expanded tensor already in phases; the padding positions it fills with act(bias) are zeroed
after, as the depthwise convolution's zero padding requires.

Both biases ride in the matmuls as a column of weights against a row of ones, and the crop of the
depthwise output's wide rows is the copy its activation writes. Measured against the two
convolutions run apart (batch 1 and 4, Clip activations, two host phases): 16->96 at 112x112
stride 2 0.63-0.77x, 24->144 at 56x56 0.65-0.77x, 32->192 at 28x28 0.70-0.87x, 96->576 at 14x14
1.12-1.33x (where the depthwise convolution runs channels-last), so the exporter fuses from 28x28
up (``exporter.passes.fuse_pointwise_strided``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sliding_windows imports phase_columns, which imports this module
    from edge_runtime.kernels.sliding_windows import Window

# The depthwise columns of a block of channels are copied into a buffer of at most this many bytes
# and multiplied while in cache. Measured on the phase columns (a 1 MiB L2): 96@112 stride 2
# 828 / 565 / 479 / 559 us at 128 / 256 / 512 / 1024 KiB, 144@56 332 / 235 / 204 / 202, 192@28
# 133 / 101 / 93 / 85 (the stride-1 im2col's GROUP_COLUMN_CHUNK_BYTES is 256 KiB).
PHASE_COLUMN_CHUNK_BYTES = 512 << 10


@dataclass(frozen=True)
class _Axis:
    """One spatial axis's phase geometry."""

    stride: int
    extent: int  # phase plane length along this axis
    starts: tuple[tuple[int, int, int], ...]  # per phase: (first input index, its phase index, inputs in it)


@dataclass(frozen=True)
class _Geometry:
    rows: _Axis
    cols: _Axis
    phase_taps: tuple[tuple[int, int, int], ...]  # (phase, taps down, taps across); a phase's first tap reads offset 0
    length: int  # outputs per channel, rows as wide as the phase plane


def _axis(size: int, kernel: int, stride: int, pad_begin: int, out: int, spare: int) -> _Axis:
    extent = out + (kernel - 1) // stride + spare
    starts = []
    for phase in range(stride):
        first = (phase - pad_begin) % stride  # first input index landing in this phase
        count = min(len(range(first, size, stride)), extent - (first + pad_begin) // stride)
        starts.append((first, (first + pad_begin) // stride, max(count, 0)))
    return _Axis(stride, extent, tuple(starts))


@lru_cache(maxsize=256)
def geometry(spatial: tuple[int, int], win: Window) -> _Geometry:
    (kh, kw), (sh, sw) = win.kernel, win.strides
    # a spare phase row when taps reach right of column 0: the last wide row's cropped outputs
    # read past the plane's end
    rows = _axis(spatial[0], kh, sh, win.pad_begin[0], win.out[0], 1 if (kw - 1) // sw else 0)
    cols = _axis(spatial[1], kw, sw, win.pad_begin[1], win.out[1], 0)
    phase_taps = []
    for p in range(sh):
        for q in range(sw):
            down, across = range(p, kh, sh), range(q, kw, sw)
            if len(down) and len(across):
                phase_taps.append((p * sw + q, len(down), len(across)))
    return _Geometry(rows, cols, tuple(phase_taps), win.out[0] * cols.extent)


def expand_into_phases(x, w1, b1, xp, geo: _Geometry, bias_on_padding: bool = True):
    """The 1x1 convolution of ``x`` (N, C, H, W) by ``w1`` (M, C), its bias ``b1``, written as
    (N, M, phases, rows extent * cols extent). Padding positions hold the bias (act(bias) once
    activated) until zeroed (``zero_padding``), or 0 when not ``bias_on_padding``: then an
    activation that keeps 0 at 0 leaves them zero with no pass to zero them."""
    n, c = x.shape[:2]
    rows, cols = geo.rows, geo.cols
    ones = b1 is not None
    split = xp.zeros((n, c + ones, rows.stride, cols.stride, rows.extent, cols.extent), dtype=x.dtype)
    if ones and bias_on_padding:
        split[:, c] = 1
    for p, (r0, u0, nr) in enumerate(rows.starts):
        for q, (c0, v0, nc) in enumerate(cols.starts):
            src = x[:, :, r0::rows.stride, c0::cols.stride][:, :, :nr, :nc]
            split[:, :c, p, q, u0:u0 + nr, v0:v0 + nc] = src
            if ones and not bias_on_padding:
                split[:, c, p, q, u0:u0 + nr, v0:v0 + nc] = 1
    w = w1.reshape(w1.shape[0], c)
    if ones:
        w = xp.concatenate([w, b1.reshape(-1, 1).astype(w.dtype)], axis=1)
    return xp.matmul(w, split.reshape(n, c + ones, math.prod(split.shape[2:])))


def zero_padding(e, geo: _Geometry) -> None:
    """Zero the positions of ``e`` (expand_into_phases's output) that stand for padding: in each
    phase, those before its first input and past its last (``starts``' counts, cut at the extent)."""
    rows, cols = geo.rows, geo.cols
    e6 = e.reshape(e.shape[:2] + (rows.stride, cols.stride, rows.extent, cols.extent))
    for p, (_, u0, nr) in enumerate(rows.starts):
        e6[:, :, p, :, :u0] = 0
        e6[:, :, p, :, u0 + nr:] = 0
    for q, (_, v0, nc) in enumerate(cols.starts):
        e6[:, :, :, q, :, :v0] = 0
        e6[:, :, :, q, :, v0 + nc:] = 0


# Kernels at least this wide copy only their taps down (``depthwise_over_phases``); narrower ones
# copy every tap, where the shifted products and their adds cost about what the copies save. Whole
# models, one process, the two alternating in blocks of 10 runs, 25 s, one BLAS thread (median ms):
# EfficientNet-B0 (a 5x5 and a 3x3 layer) 14.81 -> 14.67 with both shifted, MobileNetV2 (3x3 only)
# 9.30 -> 9.45; alone (us): 144@56 5x5 370 -> 271, 96@112 3x3 350 -> 321.
SHIFT_ACROSS_MIN_WIDTH = 5


def depthwise_over_phases(e, w, b, xp, geo: _Geometry):
    """The depthwise convolution (``w`` (C, 1, kh, kw), bias ``b``) of the phase-split ``e`` (NumPy):
    (N, C, out rows, cols extent), each row as wide as a phase row (crop to the output width).

    The columns of a block of channels (PHASE_COLUMN_CHUNK_BYTES) are copied phase by phase, every
    tap a contiguous run, and multiplied while in cache, with a row of ones for the bias. A phase's
    taps across a row read the same run shifted by one value: under a kernel SHIFT_ACROSS_MIN_WIDTH
    wide or more only its taps down are copied (5x5 at stride 2: 10 runs, not 25), the product has
    one row per shift across (taps a shift lacks weigh 0), and the rows are added shifted."""
    n, c = e.shape[:2]
    extent = geo.cols.extent
    plane, item, length = geo.rows.extent * extent, e.itemsize, geo.length
    shifted = w.shape[-1] >= SHIFT_ACROSS_MIN_WIDTH
    weights = _tap_weights(w, b, xp, geo, shifted)
    shifts, depth = weights.shape[1:]
    # a run reaches shifts - 1 values past the wide rows: into the spare phase row ``geometry`` adds
    run = length + shifts - 1
    e = xp.ascontiguousarray(e)
    views = [xp.ndarray((n, c, down, 1 if shifted else across, run), e.dtype, e, phase * plane * item,
                        e.strides[:2] + (extent * item, item, item))
             for phase, down, across in geo.phase_taps]
    step = max(1, min(c, PHASE_COLUMN_CHUNK_BYTES // (depth * run * item)))
    columns = xp.empty((step, depth, run), dtype=e.dtype)
    if b is not None:
        columns[:, -1] = 1
    y = xp.empty((n, c, 1, length), dtype=xp.result_type(e, w))
    products = xp.empty((step, shifts, run), dtype=y.dtype) if shifts > 1 else None
    for i in range(n):
        for g in range(0, c, step):
            block = columns[: min(step, c - g)]
            row = 0
            for view in views:
                down, copies = view.shape[2:4]
                # written through a view of the block: reshaping the strided tap view would copy it twice
                block[:, row:row + down * copies].reshape(block.shape[0], down, copies, run)[...] = view[i, g:g + step]
                row += down * copies
            out = y[i, g:g + step]
            if products is None:
                xp.matmul(weights[g:g + step], block, out=out)
                continue
            product = products[: block.shape[0]]
            xp.matmul(weights[g:g + step], block, out=product)
            xp.add(product[:, 0, :length], product[:, 1, 1:length + 1], out=out[:, 0])
            for shift in range(2, shifts):
                out[:, 0] += product[:, shift, shift:length + shift]
    return y.reshape((n, c, geo.length // extent, extent))


def _tap_weights(w, b, xp, geo: _Geometry, shifted: bool):
    """``depthwise_over_phases``'s weights, (C, shifts, column runs + bias), the runs in
    ``phase_taps`` order: every tap its own run and one shift, or (``shifted``) each tap down one
    run and a row for each shift across, the tap that reads run r shifted by s weighing in row s (0
    where the phase has no such tap). The bias sits in the unshifted row."""
    c, kh, kw = w.shape[0], w.shape[-2], w.shape[-1]
    sh, sw = geo.rows.stride, geo.cols.stride
    shifts = (kw - 1) // sw + 1 if shifted else 1
    taps = []
    for phase, down, across in geo.phase_taps:
        p, q = divmod(phase, sw)
        taps += [[(p + sh * r) * kw + q + sw * (s + t) if s + t < across else kh * kw for s in range(shifts)]
                 for r in range(down) for t in range(1 if shifted else across)]
    # a zero column past the taps stands for the taps a phase lacks
    flat = xp.concatenate([w.reshape(c, kh * kw), xp.zeros((c, 1), dtype=w.dtype)], axis=1)
    weights = flat[:, xp.asarray(taps).T]  # (C, shifts, runs)
    if b is not None:
        bias = xp.zeros((c, shifts, 1), dtype=w.dtype)
        bias[:, 0, 0] = b
        weights = xp.concatenate([weights, bias], axis=2)
    return weights


def fits(x, w1, w, group: int, win: Window) -> bool:
    """Whether this pair takes the phase path: 2-D, the second convolution depthwise (one filter a
    channel) with dilations 1 and a stride; anything else runs as the two convolutions."""
    m = w1.shape[0]
    return (x.ndim == 4 and w.ndim == 4 and group == m == w.shape[0] and w.shape[1] == 1
            and tuple(w.shape[2:]) == tuple(win.kernel) and all(d == 1 for d in win.dilations)
            and math.prod(win.strides) > 1)
