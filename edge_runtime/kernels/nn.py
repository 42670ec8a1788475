"""Neural-network kernels: convolution, pooling, normalization, resampling, attention and losses."""

from __future__ import annotations

import math

from edge_runtime.kernels import _conv
from edge_runtime.kernels.registry import kernel

# ----------------------------------------------------------------------------------- convolution


@kernel("Conv")
def conv(x, w, b, *, xp, auto_pad, dilations, group, kernel_shape, pads, strides):
    kernel_spatial = tuple(kernel_shape or w.shape[2:])
    win = _conv.resolve_window(x.shape[2:], kernel_spatial, strides, dilations, pads, auto_pad)
    return _conv.conv(x, w, b, xp, group=group, win=win)


@kernel("ConvTranspose")
def conv_transpose(
    x, w, b, *, xp, auto_pad, dilations, group, kernel_shape, output_padding, output_shape, pads, strides
):
    spatial = x.shape[2:]
    n = len(spatial)
    kernel_spatial = tuple(kernel_shape or w.shape[2:])
    strides = list(strides or [1] * n)
    dilations = list(dilations or [1] * n)
    output_padding = list(output_padding or [0] * n)
    full = [
        s * (i - 1) + op + (k - 1) * d + 1
        for s, i, op, k, d in zip(strides, spatial, output_padding, kernel_spatial, dilations)
    ]
    if output_shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = list(output_shape)[-n:] if output_shape else [i * s for i, s in zip(spatial, strides)]
        total = [f - o for f, o in zip(full, out)]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        pads = begin + [t - b_ for t, b_ in zip(total, begin)]
    else:
        pads = [0] * (2 * n) if auto_pad == "VALID" or not pads else list(pads)
        out = [f - pads[i] - pads[i + n] for i, f in enumerate(full)]
    return _conv.conv_transpose(
        x, w, b, xp, group=group, kernel=kernel_spatial, strides=strides, dilations=dilations, pads=pads,
        out_spatial=out,
    )


# --------------------------------------------------------------------------------------- pooling


def _pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode):
    return _conv.resolve_window(x.shape[2:], tuple(kernel_shape), strides, dilations, pads, auto_pad, ceil_mode)


def _window_axes(win):
    n = len(win.kernel)
    return tuple(range(2 + n, 2 + 2 * n))


@kernel("MaxPool")
def max_pool(x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order, strides):
    win = _pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    low = -xp.inf if x.dtype.kind == "f" else xp.iinfo(x.dtype).min
    end = tuple(e + x_ for e, x_ in zip(win.pad_end, win.extra_end))
    view = _conv.windows(_conv.pad_spatial(x, xp, win.pad_begin, end, low), xp, win)
    y = view.max(axis=_window_axes(win))
    # Indices: the flat position of each window's first maximum in the unpadded input.
    n_sp = len(win.kernel)
    flat = view.reshape(view.shape[: 2 + n_sp] + (-1,))
    tap = xp.argmax(flat, axis=-1)
    taps = xp.unravel_index(tap, win.kernel)
    spatial = x.shape[2:]
    index = xp.zeros(tap.shape, dtype=xp.int64)
    coords = []
    for i in range(n_sp):
        o = xp.arange(win.out[i]).reshape((-1,) + (1,) * (n_sp - 1 - i))
        coords.append(o * win.strides[i] + taps[i] * win.dilations[i] - win.pad_begin[i])
    axes_order = range(n_sp) if not storage_order else reversed(range(n_sp))
    for i in axes_order:
        index = index * spatial[i] + coords[i]
    pixels = math.prod(spatial)
    channel = xp.arange(x.shape[0] * x.shape[1], dtype=xp.int64).reshape(x.shape[:2] + (1,) * n_sp)
    return y, index + channel * pixels


def _pool_sum(x, xp, win, *, include_pad):
    """Window sums of ``x`` (already transformed) and the number of counted elements per window."""
    end = tuple(e + x_ for e, x_ in zip(win.pad_end, win.extra_end))
    axes = _window_axes(win)
    total = _conv.windows(_conv.pad_spatial(x, xp, win.pad_begin, end), xp, win).sum(axis=axes)
    ones = xp.ones((1, 1) + x.shape[2:], dtype=x.dtype)
    if include_pad:
        ones = _conv.pad_spatial(ones, xp, win.pad_begin, win.pad_end, 1)
        mask = _conv.pad_spatial(ones, xp, (0,) * len(win.kernel), win.extra_end)
    else:
        mask = _conv.pad_spatial(ones, xp, win.pad_begin, end)
    count = _conv.windows(mask, xp, win).sum(axis=axes)
    return total, count


@kernel("AveragePool")
def average_pool(x, *, xp, auto_pad, ceil_mode, count_include_pad, dilations, kernel_shape, pads, strides):
    win = _pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    total, count = _pool_sum(x, xp, win, include_pad=count_include_pad)
    return (total / count).astype(x.dtype)


@kernel("LpPool")
def lp_pool(x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, p, pads, strides):
    win = _pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    total, _ = _pool_sum(xp.abs(x) ** p, xp, win, include_pad=True)
    return (total ** (1.0 / p)).astype(x.dtype)


def _spatial_axes(x):
    return tuple(range(2, x.ndim))


@kernel("GlobalAveragePool")
def global_average_pool(x, *, xp):
    return x.mean(axis=_spatial_axes(x), keepdims=True)


@kernel("GlobalMaxPool")
def global_max_pool(x, *, xp):
    return x.max(axis=_spatial_axes(x), keepdims=True)


@kernel("GlobalLpPool")
def global_lp_pool(x, *, xp, p):
    return ((xp.abs(x) ** p).sum(axis=_spatial_axes(x), keepdims=True) ** (1.0 / p)).astype(x.dtype)


@kernel("MaxUnpool")
def max_unpool(x, indices, output_shape, *, xp, kernel_shape, pads, strides):
    n_sp = len(kernel_shape)
    strides = strides or [1] * n_sp
    pads = pads or [0] * (2 * n_sp)
    # Indices are flat positions in the tensor that was pooled, whose size this default recovers.
    pooled = x.shape[:2] + tuple(
        (d - 1) * strides[i] + kernel_shape[i] - pads[i] - pads[i + n_sp] for i, d in enumerate(x.shape[2:])
    )
    flat = indices.reshape(-1)
    shape = pooled
    if output_shape is not None:
        shape = tuple(int(d) for d in output_shape.tolist())
        if shape != pooled:
            flat = xp.ravel_multi_index(xp.unravel_index(flat, pooled), shape)
    y = xp.zeros(math.prod(shape), dtype=x.dtype)
    y[flat] = x.reshape(-1)
    return y.reshape(shape)
