"""Strided planar convolutions (group 1) over stride phases, not element-by-element gathers.

A strided convolution's planar im2col gathers each tap with the stride as its step, which NumPy
copies element by element. Split into stride phases once (phase (p, q) holds the padded pixels
(r, c) with r % s == p and c % s == q, ``stride_phases.geometry``), every tap reads one phase plane
at a fixed offset: with the planes flattened, one contiguous run per channel and tap for a block
of output rows, each row as wide as a phase row (the extra outputs are cropped after the product),
as the flat im2col of stride-1 convolutions reads its taps.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from edge_runtime.kernels import stride_phases

if TYPE_CHECKING:  # sliding_windows imports this module
    from edge_runtime.kernels.sliding_windows import Window

# Inputs of at least this many channels, convolved into planes of at least MIN_OUTPUT_PIXELS,
# take the phase path. Inside whole-model runs (us, gather -> phases): a YOLO-style backbone's
# 16->32 3x3 stride 2 at 160x160 646-773 -> 534-557 (the model 7.8-8.3 -> 7.5-8.1 ms); but RGB
# stems ran slower by phases (MobileNetV2's 3->32 at 224x224 464-476 -> 569-589), and small planes
# pay more for the split and the copies a tap than the gather costs.
MIN_CHANNELS = 16
MIN_OUTPUT_PIXELS = 56 * 56
# The columns of a block of output rows, at most this many bytes, are copied and multiplied while
# in cache.
PHASE_COLUMN_CHUNK_BYTES = 2 << 20


def fits(channels: int, group: int, win: Window) -> bool:
    """Whether this planar convolution takes the phase path (on NumPy): 2-D, group 1, dilations 1,
    a stride above 1, a kernel wider than 1x1, enough channels and large output planes."""
    return (len(win.kernel) == 2 and group == 1 and channels >= MIN_CHANNELS
            and math.prod(win.out) >= MIN_OUTPUT_PIXELS and math.prod(win.strides) > 1
            and math.prod(win.kernel) > 1 and all(d == 1 for d in win.dilations))


def conv(x, w, xp, win: Window):
    """The convolution of planar ``x`` (N, C, H, W) by ``w`` (M, C, kh, kw), no bias: (N, M, out...)."""
    n, c = x.shape[:2]
    m = w.shape[0]
    geo = stride_phases.geometry(tuple(x.shape[2:]), win)
    (kh, kw), (sh, sw) = win.kernel, win.strides
    extent, (out_rows, out_cols) = geo.cols.extent, win.out
    phases = _split(x, xp, geo).reshape(n, c, sh * sw, geo.rows.extent * extent)
    w2 = w.reshape(m, -1)
    depth = w2.shape[1]
    block_rows = max(1, min(out_rows, PHASE_COLUMN_CHUNK_BYTES // (depth * extent * x.itemsize)))
    columns = xp.empty((c, kh, kw, block_rows * extent), dtype=x.dtype)
    dtype = xp.result_type(x, w)
    wide = xp.empty((m, block_rows * extent), dtype=dtype)
    y = xp.empty((n, m, out_rows, out_cols), dtype=dtype)
    for i in range(n):
        for start in range(0, out_rows, block_rows):
            rows = min(block_rows, out_rows - start)
            length = rows * extent
            for dy in range(kh):
                for dx in range(kw):
                    offset = (start + dy // sh) * extent + dx // sw
                    columns[:, dy, dx, :length] = phases[i, :, (dy % sh) * sw + dx % sw, offset:offset + length]
            product = wide[:, :length]
            xp.matmul(w2, columns.reshape(depth, -1)[:, :length], out=product)
            y[i, :, start:start + rows] = product.reshape(m, rows, extent)[:, :, :out_cols]
    return y


def _split(x, xp, geo):
    """``x`` zero-padded and split into phases: (N, C, row stride, col stride, rows extent, cols extent)."""
    rows, cols = geo.rows, geo.cols
    split = xp.zeros(x.shape[:2] + (rows.stride, cols.stride, rows.extent, cols.extent), dtype=x.dtype)
    for p, (r0, u0, nr) in enumerate(rows.starts):
        for q, (c0, v0, nc) in enumerate(cols.starts):
            split[:, :, p, q, u0:u0 + nr, v0:v0 + nc] = x[:, :, r0::rows.stride, c0::cols.stride][:, :, :nr, :nc]
    return split
