"""Sliding-window machinery for convolution and pooling (N, C, spatial...) arrays.

Windows are strided views (``as_strided``) over a padded input: a convolution copies them once
into an im2col matrix and does one (grouped, batched) matmul; pooling reduces the view directly.
Nothing here loops over pixels; the only Python loops run over kernel offsets or spatial axes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Callable

from edge_runtime.kernels import phase_columns, tap_products


@dataclass(frozen=True)
class Window:
    """A resolved sliding window over the spatial axes: pads, output size and extra end padding."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pad_begin: tuple[int, ...]
    pad_end: tuple[int, ...]  # declared (or auto) end padding
    extra_end: tuple[int, ...]  # further padding so ceil_mode windows fit; never counted as input
    out: tuple[int, ...]

    @property
    def padded_end(self) -> tuple[int, ...]:
        """All end padding: declared plus the extra that ceil_mode windows need."""
        return tuple(e + x for e, x in zip(self.pad_end, self.extra_end))

    @property
    def effective(self) -> tuple[int, ...]:
        return tuple((k - 1) * d + 1 for k, d in zip(self.kernel, self.dilations))


def resolve_window(spatial, kernel, strides, dilations, pads, auto_pad, ceil_mode=0) -> Window:
    """The window a conv or pool node applies to an input of this spatial shape.

    Memoized: a model resolves the same few windows on every call, and resolving costs more
    Python than a small pooling does.
    """
    return _resolve_window(
        tuple(spatial), tuple(kernel), _tuple_or_none(strides), _tuple_or_none(dilations), _tuple_or_none(pads),
        auto_pad, int(ceil_mode),
    )


def _tuple_or_none(values):
    return None if values is None else tuple(values)


@lru_cache(maxsize=4096)
def _resolve_window(spatial, kernel, strides, dilations, pads, auto_pad, ceil_mode) -> Window:
    n = len(kernel)
    strides = tuple(strides or [1] * n)
    dilations = tuple(dilations or [1] * n)
    pads = list(pads or [0] * (2 * n))
    begin, end, extra, out = [], [], [], []
    for i, size in enumerate(spatial):
        eff = (kernel[i] - 1) * dilations[i] + 1
        s = strides[i]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            o = -(-size // s)
            total = max((o - 1) * s + eff - size, 0)
            small = total // 2
            pb, pe = (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)
        else:
            pb, pe = (0, 0) if auto_pad == "VALID" else (pads[i], pads[i + n])
            span = size + pb + pe - eff
            if ceil_mode:
                o = -(-span // s) + 1
                if (o - 1) * s >= size + pb:  # a window may not start in the end padding
                    o -= 1
            else:
                o = span // s + 1
        if o < 1:
            raise ValueError(f"window {tuple(kernel)} does not fit spatial input {tuple(spatial)} with pads {pads}")
        begin.append(pb)
        end.append(pe)
        extra.append(max((o - 1) * s + eff - (size + pb + pe), 0))
        out.append(o)
    return Window(tuple(kernel), strides, dilations, tuple(begin), tuple(end), tuple(extra), tuple(out))


def pad_spatial(x, xp, begin, end, value=0):
    """``x`` with its trailing len(begin) axes padded by ``value``; ``x`` itself when nothing pads.

    One allocation and one slice copy: ``xp.pad`` costs about 25 us of Python per call, more than
    a whole small convolution.
    """
    if not any(begin) and not any(end):
        return x
    lead = x.ndim - len(begin)
    spatial = x.shape[lead:]
    shape = x.shape[:lead] + tuple(s + b + e for s, b, e in zip(spatial, begin, end))
    out = xp.zeros(shape, dtype=x.dtype) if value == 0 else xp.full(shape, value, dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(b, b + s) for b, s in zip(begin, spatial))] = x
    return out


def strided_view(base, xp, shape, strides):
    """A read-only view of ``base`` with the given shape and byte strides.

    For a C-contiguous NumPy base the ndarray constructor makes it in a fifth of the time
    ``as_strided`` takes (which goes through ``__array_interface__``); that matters on small inputs.
    """
    if xp.__name__ == "numpy" and base.flags.c_contiguous:
        view = xp.ndarray(shape, base.dtype, base, 0, strides)
        view.flags.writeable = False
        return view
    return xp.lib.stride_tricks.as_strided(base, shape, strides, writeable=False)


def windows(xpad, xp, win: Window):
    """Strided view (N, C, out..., kernel...) of the windows over an already padded input."""
    n = len(win.kernel)
    lead = xpad.strides[: xpad.ndim - n]
    spatial = xpad.strides[xpad.ndim - n :]
    shape = xpad.shape[: xpad.ndim - n] + win.out + win.kernel
    strides = lead + tuple(st * s for st, s in zip(spatial, win.strides)) + tuple(
        st * d for st, d in zip(spatial, win.dilations)
    )
    return strided_view(xpad, xp, shape, strides)


def offset_slices(win: Window, offset):
    """The strided slice of the padded input that kernel tap ``offset`` sees, for every output pixel."""
    return tuple(
        slice(k * d, k * d + (o - 1) * s + 1, s)
        for k, d, o, s in zip(offset, win.dilations, win.out, win.strides)
    )


# The measurements behind these thresholds: benchmarks/RESULTS.md, "Figures behind the code's
# choices" (edge_runtime/kernels/_conv.py).
# Below this many output pixels per plane a strided depthwise conv runs channels-last (each tap
# one multiply-add over long contiguous rows); above it its two transposes cost more than that
# saves, and im2col runs.
CHANNELS_LAST_MAX_PIXELS = 784
# Stride-1 convs build their columns from flattened padded planes while the wasted outputs this
# computes cost less than the faster column copy saves: (M / group) * (padded row / output row - 1)
# at most this.
FLAT_COLUMNS_MAX_WASTE = 8
# A batch whose column matrix would exceed this many bytes is convolved a few images at a time,
# so each chunk's columns are still in cache when the matmul reads them (on NumPy; a GPU wants
# one large matmul). The trainer's conv gradients chunk their columns by the same rule.
COLUMN_CHUNK_BYTES = 4 << 20
# A batch convolved by flat columns whose per-group weight matrix has at most this many elements
# runs one small matmul per image instead of one wide matmul over the batch: BLAS runs a product
# of few short rows poorly however wide, and per image the output needs no (M, N) -> (N, M) copy.
FLAT_PER_IMAGE_MAX_WEIGHTS = 4096


# A batch of small planes (at most this many output pixels an image) convolves channels-last:
# columns gathered from an (N, spatial..., C) copy read runs of kernel_width * C contiguous values
# and feed one matmul for the whole batch, where planar columns read runs of out_width values and
# need one matmul per image. Batch 1, fewer than CHANNELS_LAST_COLUMNS_MIN_ROWS column rows, and
# large planes stay planar, where it did not pay.
CHANNELS_LAST_COLUMNS_MAX_PIXELS = 196
CHANNELS_LAST_COLUMNS_MIN_ROWS = 128
# Fewer input channels than this make runs too short for the channels-last gather to pay.
CHANNELS_LAST_COLUMNS_MIN_CHANNELS = 16
# Under a kernel of at least WIDE_KERNEL_MIN_TAPS taps whose rows are at least WIDE_KERNEL_MIN_RUN
# values long (kernel_width * C), a batch of at least WIDE_KERNEL_MIN_BATCH small planes convolves
# channels-last even where flat columns would apply: one matmul for the batch, where flat columns
# with few filters take one per image; smaller batches and 3x3 kernels keep the flat columns.
WIDE_KERNEL_MIN_TAPS = 25
WIDE_KERNEL_MIN_RUN = 24
WIDE_KERNEL_MIN_BATCH = 8


def batch_chunks(n: int, bytes_per_image: int, xp=None) -> list[tuple[int, int]]:
    """(start, end) spans of a batch of ``n`` whose columns stay under COLUMN_CHUNK_BYTES each;
    an empty batch is one empty span. Chunks keep columns in a CPU's cache; on a GPU (``xp`` not
    NumPy) the whole batch is one span: each chunk would cost kernel launches, not save memory
    traffic (the benchmark CNN's training step at batch 256 ran ~1,000 small launches a step)."""
    if xp is not None and xp.__name__ != "numpy":
        return [(0, n)]
    step = max(1, COLUMN_CHUNK_BYTES // max(bytes_per_image, 1))
    return [(s, min(n, s + step)) for s in range(0, max(n, 1), step)]


def _strided_small_depthwise(x, w, group, win: Window) -> bool:
    c = x.shape[1]
    return (group == c == w.shape[0] and w.shape[1] == 1 and any(s > 1 for s in win.strides)
            and math.prod(win.out) < CHANNELS_LAST_MAX_PIXELS)


def _is_pointwise(group, win: Window) -> bool:
    return group == 1 and all(k == 1 for k in win.kernel)


def _column_spans(x, win: Window) -> list[tuple[int, int]]:
    """The batch spans whose im2col columns ``conv`` builds and multiplies one at a time."""
    return batch_chunks(x.shape[0], x.shape[1] * math.prod(win.kernel) * math.prod(win.out) * x.itemsize)


def conv(x, w, b, xp, *, group, win: Window):
    n_sp = len(win.kernel)
    m = w.shape[0]
    if _strided_small_depthwise(x, w, group, win):
        return _depthwise(x, w, xp, win, b)
    if _is_pointwise(group, win):
        y = _pointwise(pad_spatial(x, xp, win.pad_begin, win.pad_end), w, xp, win)
    else:
        columns = _columns_conv(x, w, win, group)
        spans = _column_spans(x, win)
        if xp.__name__ != "numpy" or len(spans) == 1:
            y = columns(x, w, xp, win, group)
        else:
            y = xp.empty((x.shape[0], m) + tuple(win.out), dtype=xp.result_type(x, w))
            for start, end in spans:
                y[start:end] = columns(x[start:end], w, xp, win, group)
    if b is not None:
        y += b.reshape((1, m) + (1,) * n_sp)
    return y


def conv_unfinished(x, w, xp, *, group, win: Window):
    """The convolution without a bias, as its im2col path leaves it: ``(y, channels_last)``.

    ``y`` is (N, M, out...), possibly a strided view (flat columns before the crop of their
    padded rows), or (N, out..., M) when ``channels_last``. For a reader that reduces ``y`` first
    (a fused max pool), sparing the copy to a contiguous planar array and the bias pass over the
    unreduced output."""
    columns = _whole_batch_columns(x, w, xp, group, win)
    if columns in (_im2col_flat, _im2col_channels_last):
        return columns(x, w, xp, win, group, finish=False), columns is _im2col_channels_last
    return conv(x, w, None, xp, group=group, win=win), False


def runs_wide_rows(x, w, xp, group, win: Window) -> bool:
    """Whether ``conv`` would compute this convolution as ``conv_wide_rows`` in one piece (flat
    im2col, one batch span), so a reader can take the wide rows instead of the cropped copy."""
    return _whole_batch_columns(x, w, xp, group, win) is _im2col_flat


def _whole_batch_columns(x, w, xp, group, win: Window):
    """The im2col formulation ``conv`` runs this convolution by on NumPy in one batch span, else
    None (CuPy, the depthwise and pointwise paths, or a batch convolved in chunks)."""
    if (xp.__name__ != "numpy" or _strided_small_depthwise(x, w, group, win) or _is_pointwise(group, win)
            or len(_column_spans(x, win)) != 1):
        return None
    return _columns_conv(x, w, win, group)


def _columns_conv(x, w, win, group):
    """The im2col formulation for this conv: channels-last for a batch of small planes under a wide
    kernel, flat planes when stride 1 wastes little, channels-last for other batches of small
    planes with enough channels, stride phases for other strided convolutions, else planar windows."""
    n, c = x.shape[:2]
    pixels = math.prod(win.out)
    small_planes = (group == 1 and n > 1 and pixels <= CHANNELS_LAST_COLUMNS_MAX_PIXELS
                    and n * pixels >= CHANNELS_LAST_COLUMNS_MIN_ROWS)
    if (small_planes and n >= WIDE_KERNEL_MIN_BATCH and math.prod(win.kernel) >= WIDE_KERNEL_MIN_TAPS
            and win.kernel[-1] * c >= WIDE_KERNEL_MIN_RUN):
        return _im2col_channels_last
    if all(s == 1 for s in win.strides) and (w.shape[0] // group) * _row_waste(x, win) <= FLAT_COLUMNS_MAX_WASTE:
        return _im2col_flat
    if small_planes and c >= CHANNELS_LAST_COLUMNS_MIN_CHANNELS:
        return _im2col_channels_last
    if phase_columns.fits(c, group, win):
        return _im2col_phases
    return _im2col_padded


def _im2col_channels_last(x, w, xp, win, group, finish=True):
    """Planar in, planar out (channels-last, (N, out..., M), when not ``finish``)."""
    xl = planar_to_channels_last(x, xp, win.pad_begin, win.padded_end)
    y = conv_channels_last(xl, channels_last_weights(w, xp), xp, win)
    if not finish:
        return y
    n_sp = len(win.kernel)
    return xp.ascontiguousarray(y.transpose((0, n_sp + 1) + tuple(range(1, n_sp + 1))))


def channels_last_weights(w, xp):
    """Conv weights (M, C, kernel...) -> (M, kernel..., C), the layout ``conv_channels_last`` reads."""
    return xp.ascontiguousarray(w.transpose((0,) + tuple(range(2, w.ndim)) + (1,)))


# Planar inputs of at most this many channels go channels-last one channel at a time: NumPy's
# transposed copy walks inner runs of C values, a copy per channel whole planes.
FEW_CHANNELS = 8


def planar_to_channels_last(x, xp, begin, end):
    """Planar (N, C, spatial...) ``x`` as a new contiguous (N, spatial..., C) array, its spatial axes
    zero-padded by ``begin`` and ``end``."""
    n, c, spatial = x.shape[0], x.shape[1], x.shape[2:]
    shape = (n,) + tuple(s + b + e for s, b, e in zip(spatial, begin, end)) + (c,)
    out = xp.zeros(shape, dtype=x.dtype) if any(begin) or any(end) else xp.empty(shape, dtype=x.dtype)
    inner = out[(slice(None),) + tuple(slice(b, b + s) for b, s in zip(begin, spatial))]
    if c <= FEW_CHANNELS and xp.__name__ == "numpy":
        for channel in range(c):
            inner[..., channel] = x[:, channel]
    else:
        inner[...] = x.transpose((0,) + tuple(range(2, x.ndim)) + (1,))
    return out


def pad_channels_last(xl, xp, begin, end, value=0):
    """``xl`` (N, spatial..., C) with its spatial axes padded by ``value``, as a new contiguous array
    (one allocation and one copy, as ``pad_spatial``); ``xl`` itself when nothing pads."""
    if not any(begin) and not any(end):
        return xl
    spatial = xl.shape[1:-1]
    shape = (xl.shape[0],) + tuple(s + b + e for s, b, e in zip(spatial, begin, end)) + (xl.shape[-1],)
    out = xp.zeros(shape, dtype=xl.dtype) if value == 0 else xp.full(shape, value, dtype=xl.dtype)
    out[(slice(None),) + tuple(slice(b, b + s) for b, s in zip(begin, spatial))] = xl
    return out


# Below this many column rows (images x output pixels) the channels-last matmul runs as
# weights @ columns.T: OpenBLAS is several times slower on a product of few rows.
CHANNELS_LAST_FEW_ROWS = 64


def conv_channels_last(xl, w, xp, win, finish: Callable | None = None):
    """Convolution (group 1) of a padded (N, spatial..., C) input with (M, kernel..., C) weights:
    the windows copied into (N * pixels, kernel... * C) columns, then one matmul, giving
    (N, out..., M) channels-last. ``finish``, when given, runs in place on the (rows, M) output
    (a bias and an activation).

    On NumPy, columns over COLUMN_CHUNK_BYTES are built and multiplied a few images at a time, and
    ``finish`` runs on each chunk's rows while they are in cache (the digits CNN's 32->64 3x3 conv
    at batch 128, 9.4 MB of columns, with bias and Relu: 1.85 -> 1.68 ms in 4 MB chunks)."""
    n, c, m = xl.shape[0], xl.shape[-1], w.shape[0]
    n_sp = len(win.kernel)
    spatial = xl.strides[1:1 + n_sp]
    image, pixel_steps = (xl.strides[0],), tuple(st * s for st, s in zip(spatial, win.strides))
    tap_steps = tuple(st * d for st, d in zip(spatial, win.dilations))
    pixels, depth = math.prod(win.out), math.prod(win.kernel) * c
    if c == 1:
        # One channel: gathered taps first, each copy run is a row of output pixels instead of
        # kernel_width values, and the matmul reads the (depth, rows) columns transposed.
        taps_first = strided_view(xl, xp, win.kernel + (n,) + win.out, tap_steps + image + pixel_steps)

        def columns(start: int, end: int):
            return taps_first[(slice(None),) * n_sp + (slice(start, end),)].reshape(depth, (end - start) * pixels).T
    else:
        view = strided_view(xl, xp, (n,) + win.out + win.kernel + (c,),
                            image + pixel_steps + tap_steps + (xl.strides[-1],))
        buffer = None

        def columns(start: int, end: int):
            nonlocal buffer
            if start == 0 and end == n:
                return view.reshape(n * pixels, depth)
            if buffer is None:
                buffer = xp.empty(((end - start) * pixels, depth), dtype=xl.dtype)
            cols = buffer[: (end - start) * pixels]
            xp.copyto(cols.reshape((end - start,) + win.out + win.kernel + (c,)), view[start:end])
            return cols

    w2 = w.reshape(m, -1)
    spans = batch_chunks(n, pixels * depth * xl.itemsize)
    if xp.__name__ != "numpy" or len(spans) == 1:
        cols = columns(0, n)
        if cols.shape[0] < CHANNELS_LAST_FEW_ROWS:
            y = xp.ascontiguousarray(xp.matmul(w2, cols.T).T)
        else:
            y = xp.matmul(cols, w2.T)
        if finish is not None:
            finish(y)
    else:
        y = xp.empty((n * pixels, m), dtype=xp.result_type(xl, w))
        for start, end in spans:
            rows = y[start * pixels : end * pixels]
            xp.matmul(columns(start, end), w2.T, out=rows)
            if finish is not None:
                finish(rows)
    return y.reshape((n,) + win.out + (m,))


# A channels-last depthwise convolution whose output rows are at least this many pixels wide (at
# stride 1 along them) reads each tap as one run of out_width * C values against weights tiled to
# that length; narrower rows read runs of C values, where tiling the weights each call costs more
# than the longer runs save. With bias and Clip, one BLAS thread (us): 384@14x14 3x3 115 tiled,
# 126 not; 576@14x14 159 / 174; 1152@7x7 5x5 221 tiled, 206 not.
DEPTHWISE_TILED_MIN_WIDTH = 14
# Output rows are computed a block at a time, each block's output at most this many bytes, so its
# bias and activation run while it is in cache (blocks of 32 and 64 KiB measured 0-8% slower on
# MobileNetV2's and EfficientNet's 28x28 to 7x7 layers, which fit one 1 MiB block).
DEPTHWISE_CHUNK_BYTES = 1 << 20


def depthwise_channels_last(xl, w, xp, win, finish: Callable | None = None):
    """Depthwise convolution (one filter per channel) of a padded (N, spatial..., C) input with
    (C, kernel..., 1) weights, giving (N, out..., C); ``finish``, when given, runs in place on each
    block of output rows (a bias and an activation).

    One ``einsum`` over a strided view of every tap's window: NumPy accumulates tap by tap into the
    output with runs of C values (or of out_width * C at stride 1, DEPTHWISE_TILED_MIN_WIDTH), a
    single pass a tap where a multiply and an add take two, and no columns are copied (against the
    planar im2col: benchmarks/RESULTS.md, session 14)."""
    n, c = xl.shape[0], xl.shape[-1]
    n_sp = len(win.kernel)
    taps = xp.ascontiguousarray(w.reshape(c, -1).T).reshape(win.kernel + (c,))  # (kernel..., C)
    item = xl.itemsize
    spatial = xl.strides[1:1 + n_sp]
    pixel_steps = tuple(st * s for st, s in zip(spatial, win.strides))
    tap_steps = tuple(st * d for st, d in zip(spatial, win.dilations))
    out_axes = "abcdefg"[:n_sp]
    tap_axes = "hijklmo"[:n_sp]
    y = xp.empty((n,) + win.out + (c,), dtype=xp.result_type(xl, w))
    if win.strides[-1] == 1 and win.out[-1] >= DEPTHWISE_TILED_MIN_WIDTH:
        run = win.out[-1] * c
        view = strided_view(xl, xp, (n,) + win.out[:-1] + win.kernel + (run,),
                            xl.strides[:1] + pixel_steps[:-1] + tap_steps + (item,))
        weights = xp.tile(taps, (1,) * n_sp + (win.out[-1],))
        rule = f"n{out_axes[:-1]}{tap_axes}q,{tap_axes}q->n{out_axes[:-1]}q"
        rows = y.reshape((n,) + win.out[:-1] + (run,))
    else:
        view = strided_view(xl, xp, (n,) + win.out + win.kernel + (c,),
                            xl.strides[:1] + pixel_steps + tap_steps + (item,))
        weights = taps
        rule = f"n{out_axes}{tap_axes}q,{tap_axes}q->n{out_axes}q"
        rows = y
    if xp.__name__ != "numpy":  # one einsum for the batch (CuPy's takes no ``out``)
        rows[...] = xp.einsum(rule, view, weights)
        if finish is not None:
            finish(y.reshape(-1, c))
        return y
    if n_sp < 2 or y.nbytes <= DEPTHWISE_CHUNK_BYTES:
        blocks = [(slice(None), slice(None))]
    else:  # (image, output rows) blocks
        step = max(1, DEPTHWISE_CHUNK_BYTES // (math.prod(win.out[1:]) * c * y.itemsize))
        blocks = [(slice(i, i + 1), slice(start, start + step))
                  for i in range(n) for start in range(0, win.out[0], step)]
    for images, out_rows in blocks:
        block = rows[images, out_rows]
        xp.einsum(rule, view[images, out_rows], weights, out=block)
        if finish is not None:
            finish(block.reshape(-1, c))
    return y


def _im2col_phases(x, w, xp, win, group):
    """A strided convolution over stride phases (``phase_columns``) on NumPy; else planar windows."""
    if xp.__name__ != "numpy":
        return _im2col_padded(x, w, xp, win, group)
    return phase_columns.conv(x, w, xp, win)


def _im2col_padded(x, w, xp, win, group):
    return _im2col(pad_spatial(x, xp, win.pad_begin, win.pad_end), w, xp, win, group)


def _pointwise(xpad, w, xp, win):
    # A 1x1 convolution is one matmul over channels: (M, C) @ (N, C, pixels).
    sub = xpad[(Ellipsis,) + tuple(slice(None, None, s) for s in win.strides)][
        (Ellipsis,) + tuple(slice(0, o) for o in win.out)
    ]
    n, c = sub.shape[:2]
    y = xp.matmul(w.reshape(w.shape[0], c), sub.reshape(n, c, math.prod(sub.shape[2:])))
    return y.reshape((n, w.shape[0]) + win.out)


def _depthwise(x, w, xp, win, b=None):
    """Depthwise convolution (one filter per channel) as a sum of kernel-tap multiply-adds, channels-last.

    The input is copied once into a zero-padded (N, spatial..., C) buffer, split into stride**n
    phases (pixels whose coordinates share a remainder mod the stride) when strided, so that
    every tap reads, for each output row, one contiguous run of out_width * C values; the tap's
    weights are tiled to that run's length so the multiply needs no broadcasting.
    """
    n, c = x.shape[:2]
    n_sp = len(win.kernel)
    s = win.strides
    reach = [(k - 1) * d for k, d in zip(win.kernel, win.dilations)]
    q = [o + r // st for o, r, st in zip(win.out, reach, s)]  # phase extent: every output and its furthest tap
    # Input pixels past q * stride - pad_begin are read by no tap (e.g. a stride-2 window's last column).
    keep = [min(i, qi * st - pb) for i, qi, st, pb in zip(x.shape[2:], q, s, win.pad_begin)]
    xl = xp.zeros((n,) + tuple(qi * st for qi, st in zip(q, s)) + (c,), dtype=x.dtype)
    into = (slice(None),) + tuple(slice(pb, pb + k) for pb, k in zip(win.pad_begin, keep))
    xl[into] = x[(slice(None), slice(None)) + tuple(slice(0, k) for k in keep)].transpose(
        (0,) + tuple(range(2, 2 + n_sp)) + (1,)
    )
    if any(st > 1 for st in s):
        split = (n,) + tuple(d for qi, st in zip(q, s) for d in (qi, st)) + (c,)
        order = (0,) + tuple(2 + 2 * i for i in range(n_sp)) + tuple(1 + 2 * i for i in range(n_sp)) + (1 + 2 * n_sp,)
        xl = xp.ascontiguousarray(xl.reshape(split).transpose(order))
    phases = xl.reshape((n, math.prod(s)) + tuple(q[:-1]) + (q[-1] * c,))
    run = win.out[-1] * c
    taps = xp.tile(w.reshape(c, -1).T, (1, win.out[-1]))  # (taps, out_width * C), C fastest
    y = xp.empty((n,) + tuple(win.out[:-1]) + (run,), dtype=x.dtype)
    tmp = xp.empty_like(y)
    for t, offset in enumerate(product(*(range(k) for k in win.kernel))):
        shift = [k * d for k, d in zip(offset, win.dilations)]
        phase = 0
        for sh, st in zip(shift, s):
            phase = phase * st + sh % st
        start = [sh // st for sh, st in zip(shift, s)]
        rows = tuple(slice(a, a + o) for a, o in zip(start[:-1], win.out[:-1]))
        src = phases[(slice(None), phase) + rows + (slice(start[-1] * c, start[-1] * c + run),)]
        if t == 0:
            xp.multiply(src, taps[0], out=y)
        else:
            xp.multiply(src, taps[t], out=tmp)
            y += tmp
    if b is not None:
        y += xp.tile(b, win.out[-1])
    y = y.reshape((n,) + tuple(win.out) + (c,))
    return xp.ascontiguousarray(y.transpose((0, n_sp + 1) + tuple(range(1, n_sp + 1))))


def _im2col(xpad, w, xp, win, group):
    n, c = xpad.shape[:2]
    m = w.shape[0]
    n_sp = len(win.kernel)
    view = windows(xpad, xp, win)  # (N, C, out..., k...)
    order = (0, 1) + tuple(range(2 + n_sp, 2 + 2 * n_sp)) + tuple(range(2, 2 + n_sp))
    k = math.prod(win.kernel)
    pixels = math.prod(win.out)
    wg = w.reshape(group, m // group, (c // group) * k)
    view = view.transpose(order)  # (N, C, k..., out...)
    if group > 1 and xp.__name__ == "numpy":
        y = _grouped_matmul(wg, view, pixels, xp)
    else:
        y = xp.matmul(wg, view.reshape(n, group, (c // group) * k, pixels))  # (N, G, M/G, pixels)
    return y.reshape((n, m) + win.out)


# Grouped convolutions (depthwise above all) copy their columns a few groups at a time, each
# block into a buffer this size, and multiply it while it is still in cache: whole, the columns
# are k*k times the input and the copy and the matmul each stream them through memory.
GROUP_COLUMN_CHUNK_BYTES = 256 << 10


def _grouped_matmul(wg, columns, length, xp):
    """(N, G, M/G, length) = wg (G, M/G, K) @ columns, where ``columns`` is an uncopied
    (N, C, ...) view whose trailing axes hold each channel's K/(C/G) rows of ``length`` values.
    The columns are copied a block of images or groups at a time (GROUP_COLUMN_CHUNK_BYTES)."""
    group, mg, kk = wg.shape
    n, cg = columns.shape[0], columns.shape[1] // group
    y = xp.empty((n, group, mg, length), dtype=xp.result_type(wg, columns))
    per_group = kk * length * columns.itemsize
    if per_group * group <= GROUP_COLUMN_CHUNK_BYTES:  # whole images fit: a few images at a time
        step = GROUP_COLUMN_CHUNK_BYTES // (per_group * group)
        for i in range(0, n, step):
            block = columns[i:i + step]
            xp.matmul(wg, block.reshape(block.shape[0], group, kk, length), out=y[i:i + step])
        return y
    step = max(1, GROUP_COLUMN_CHUNK_BYTES // per_group)
    for i in range(n):
        for g in range(0, group, step):
            block = columns[i, g * cg:(g + step) * cg]
            xp.matmul(wg[g:g + step], block.reshape(-1, kk, length), out=y[i, g:g + step])
    return y


def _row_waste(x, win):
    """Fraction of wasted outputs when a stride-1 conv computes whole padded rows (axes after the first)."""
    return _flat_geometry(x.shape, win).waste


@dataclass(frozen=True)
class _FlatGeometry:
    """Shape bookkeeping of ``_im2col_flat`` for one input shape and window, computed once."""

    end: tuple[int, ...]  # end padding, including spare rows for the last row's cropped outputs
    length: int  # outputs per (image, channel) plane, padded row width included
    tap_steps: tuple[int, ...]  # elements between kernel taps along each spatial axis
    padded_rows: tuple[int, ...]  # padded extents of the spatial axes after the first
    crop: tuple[slice, ...]
    waste: float


@lru_cache(maxsize=1024)
def _flat_geometry(shape, win: Window) -> _FlatGeometry:
    padded = [i + b + e for i, b, e in zip(shape[2:], win.pad_begin, win.pad_end)]
    row = math.prod(padded[1:])
    length = win.out[0] * row
    after = [math.prod(padded[i + 1 :]) for i in range(len(padded))]
    reach = sum((k - 1) * d * a for k, d, a in zip(win.kernel, win.dilations, after))
    # spare rows at the end: the cropped outputs of the last row read past the padded plane
    spare = max(0, -(-(reach + length - math.prod(padded)) // row))
    return _FlatGeometry(
        end=(win.pad_end[0] + spare,) + tuple(win.pad_end[1:]),
        length=length,
        tap_steps=tuple(d * a for d, a in zip(win.dilations, after)),
        padded_rows=tuple(padded[1:]),
        crop=(slice(None), slice(None), slice(None)) + tuple(slice(0, o) for o in win.out[1:]),
        waste=row / math.prod(win.out[1:]) - 1,
    )


def _im2col_flat(x, w, xp, win, group, finish=True):
    """Stride-1 im2col over flattened padded planes.

    With each (n, c) plane padded and flattened, kernel tap ``t`` sees one contiguous run of the
    plane for all output rows at once, so the columns are copied in long runs rather than in
    short output rows. The price: each output row is computed over the padded row width, and the
    extra (wrapped-around) outputs are cropped after the matmul (into a contiguous copy when
    ``finish``, else as a strided view).
    """
    y = conv_wide_rows(x, w, xp, win, group)[flat_crop(x.shape, win)]
    return xp.ascontiguousarray(y) if finish else y


def flat_crop(shape, win: Window) -> tuple[slice, ...]:
    """The index that crops ``conv_wide_rows``'s output of an input of ``shape`` to ``win.out``."""
    return _flat_geometry(shape, win).crop


def conv_wide_rows(x, w, xp, win, group):
    """The stride-1 convolution as the flat im2col computes it, uncropped: (N, M, out_0, padded
    extents of the other axes), each output row as wide as the padded input row, the outputs past
    ``win.out`` wrapped-around garbage. Every (n, m) block of rows is contiguous."""
    n, c = x.shape[:2]
    m = w.shape[0]
    geo = _flat_geometry(x.shape, win)
    padded = xp.ascontiguousarray(pad_spatial(x, xp, win.pad_begin, geo.end))
    flat = padded.reshape(n, c, math.prod(padded.shape[2:]))
    item = flat.itemsize
    k = math.prod(win.kernel)
    wide = (n, m, win.out[0]) + geo.padded_rows
    if xp.__name__ == "numpy" and tap_products.fits(c, group, win.strides, k, geo.length, item):
        starts = tap_products.offsets(win.kernel, geo.tap_steps)
        return tap_products.planar(flat, w, xp, starts, geo.length).reshape(wide)
    view = strided_view(
        flat, xp, (n, c) + win.kernel + (geo.length,), flat.strides[:2] + tuple(step * item for step in geo.tap_steps) + (item,)
    )
    wg = w.reshape(group, m // group, (c // group) * k)
    if group > 1 and xp.__name__ == "numpy":
        return _grouped_matmul(wg, view, geo.length, xp).reshape(wide)
    if n > 1 and wg[0].size <= FLAT_PER_IMAGE_MAX_WEIGHTS:
        return xp.matmul(wg, view.reshape(n, group, (c // group) * k, geo.length)).reshape(wide)  # (N, G, M/G, length)
    # Batch images side by side in the columns: one matmul per group, not one per image.
    order = tuple(range(1, 2 + len(win.kernel))) + (0, 2 + len(win.kernel))
    cols = view.transpose(order).reshape(group, (c // group) * k, n * geo.length)
    y = xp.matmul(wg, cols)  # (G, M/G, N * length)
    return y.reshape((m, n) + wide[2:]).swapaxes(0, 1)


def runs_tap_products(xl, xp, group, win: Window) -> bool:
    """Whether ``conv_channels_last_taps`` runs this channels-last (N, spatial..., C) convolution
    (on NumPy, as ``tap_products.fits`` says)."""
    geo = _flat_geometry((xl.shape[0], xl.shape[-1]) + xl.shape[1:-1], win)
    return xp.__name__ == "numpy" and tap_products.fits(xl.shape[-1], group, win.strides, math.prod(win.kernel),
                                                        geo.length, xl.itemsize)


def conv_channels_last_taps(xl, w, xp, win: Window, finish: Callable | None = None):
    """The convolution (group 1, stride 1) of an unpadded (N, spatial..., C) input by (M, kernel...,
    C) weights as ``tap_products`` computes it, cropped to (N, out..., M); ``finish`` as in
    ``conv_channels_last``, on the cropped output."""
    n, c, m = xl.shape[0], xl.shape[-1], w.shape[0]
    geo = _flat_geometry((n, c) + xl.shape[1:-1], win)
    flat = pad_channels_last(xl, xp, win.pad_begin, geo.end).reshape(n, -1, c)
    y = tap_products.channels_last(flat, w, xp, tap_products.offsets(win.kernel, geo.tap_steps), geo.length)
    wide = y.reshape((n, win.out[0]) + geo.padded_rows + (m,))
    out = xp.ascontiguousarray(wide[(slice(None), slice(None)) + tuple(slice(0, o) for o in win.out[1:])])
    if finish is not None:
        finish(out.reshape(-1, m))
    return out


def conv_transpose(x, w, b, xp, *, group, kernel, strides, dilations, pads, out_spatial):
    """Transposed convolution: one grouped matmul to columns, then one scatter-add per kernel tap."""
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    n_sp = len(spatial)
    mg = w.shape[1]
    m = mg * group
    k = math.prod(kernel)
    pixels = math.prod(spatial)
    wg = w.reshape(group, c // group, mg * k).transpose(0, 2, 1)  # (G, M/G*K, C/G)
    cols = xp.matmul(wg, x.reshape(n, group, c // group, pixels))  # (N, G, M/G*K, pixels)
    cols = cols.reshape((n, m, k) + tuple(spatial))
    win = Window(tuple(kernel), tuple(strides), tuple(dilations), (0,) * n_sp, (0,) * n_sp, (0,) * n_sp, tuple(spatial))
    if _taps_disjoint(kernel, strides, dilations, pads, spatial, out_spatial):
        return _placed_taps(cols, b, xp, win, out_spatial)
    # The full output before cropping: every tap's contribution lands inside it.
    full = [
        max((i - 1) * s + (kk - 1) * d + 1, pb + o)
        for i, s, kk, d, pb, o in zip(spatial, strides, kernel, dilations, pads[:n_sp], out_spatial)
    ]
    # A negative begin pad (an output_shape, or SAME padding, asking for more than the taps cover,
    # as when the stride exceeds the kernel) puts rows no tap reaches before the full output.
    before = [max(-pb, 0) for pb in pads[:n_sp]]
    y = pad_spatial(col2im(cols, xp, win, full), xp, before, [0] * n_sp)
    crop = tuple(slice(pb + e, pb + e + o) for pb, e, o in zip(pads[:n_sp], before, out_spatial))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y = y + b.reshape((1, m) + (1,) * n_sp)
    return xp.ascontiguousarray(y)


def _taps_disjoint(kernel, strides, dilations, pads, spatial, out_spatial) -> bool:
    """Whether each output element of a transposed convolution is one tap of one input element:
    the stride equals the kernel (U-Net's 2x2 stride-2 upsampling), no dilation, no padding."""
    return (all(s == k for s, k in zip(strides, kernel)) and all(d == 1 for d in dilations) and not any(pads)
            and all(o == i * k for o, i, k in zip(out_spatial, spatial, kernel)))


def _placed_taps(cols, b, xp, win: Window, out_spatial):
    """``col2im`` for disjoint taps: each tap of the columns (N, M, taps, in...) written once into
    its strided place of the output, the bias added on the way (where the general path zero-fills,
    adds every tap and adds the bias in a pass of its own)."""
    n, m = cols.shape[:2]
    y = xp.empty((n, m) + tuple(out_spatial), dtype=cols.dtype)
    bias = None if b is None else b.reshape((1, m) + (1,) * len(out_spatial)).astype(cols.dtype, copy=False)
    for t, offset in enumerate(product(*(range(k) for k in win.kernel))):
        place = y[(slice(None), slice(None)) + offset_slices(win, offset)]
        if bias is None:
            place[...] = cols[:, :, t]
        else:
            xp.add(cols[:, :, t], bias, out=place)
    return y


def col2im(cols, xp, win: Window, padded_spatial):
    """Scatter-add columns (N, C, taps, out...) back into a padded image: one add per kernel tap."""
    n, c = cols.shape[:2]
    y = xp.zeros((n, c) + tuple(padded_spatial), dtype=cols.dtype)
    for t, offset in enumerate(product(*(range(k) for k in win.kernel))):
        y[(slice(None), slice(None)) + offset_slices(win, offset)] += cols[:, :, t]
    return y
