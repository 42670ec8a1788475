"""Separable resampling for Resize/Upsample: one axis at a time, each a gather or a filter.

For every resized axis the output coordinates are mapped back to input coordinates (the
``coordinate_transformation_mode``), then either gathered (nearest; a repeat where every input
sample is repeated a whole number of times) or filtered: each output is a weighted sum of a few
input samples (the taps of the linear or cubic filter, more when antialiasing shrinks), applied as
one gather and one multiply-add a tap in the input's precision (float64 for integers), or, for
filters wider than MAX_GATHER_TAPS, through the dense (out, in) weight matrix in one product.
Coordinates and weights are computed in float64, like ONNX's reference.
"""

from __future__ import annotations

import math

from edge_runtime.kernels.window_shifts import PAIR_TYPES
from schemas.ops.nn import scaled_length


def output_plan(shape, scales, sizes, axes, keep_aspect_ratio_policy):
    """Per-axis (scale, output length) for the axes being resized, in the order given."""
    rank = len(shape)
    axes = [a % rank for a in axes] if axes else list(range(rank))
    if sizes is not None:
        sizes = [int(s) for s in sizes]
        # An empty axis (a batch of 0) keeps scale 1: nothing on it is interpolated.
        scales = [o / shape[a] if shape[a] else 1.0 for a, o in zip(axes, sizes)]
        if keep_aspect_ratio_policy != "stretch":
            pick = min if keep_aspect_ratio_policy == "not_larger" else max
            scale = pick(scales)
            scales = [scale] * len(axes)
            sizes = [int(scale * shape[a] + 0.5) for a in axes]
    else:
        scales = [float(s) for s in scales]
        sizes = [scaled_length(shape[a], s) for a, s in zip(axes, scales)]
    return axes, scales, sizes


def source_coords(xp, mode, out_len, in_len, scale, roi, dtype=None):
    """Input coordinate of each output index, and which ones fall outside (tf_crop_and_resize).

    ``dtype`` is the precision of the arithmetic, float64 unless given. Nearest resampling asks for
    float32, the precision onnxruntime and PyTorch compute its coordinates in: a coordinate that
    should be a whole number (6 / 1.2, 3 / 0.6) comes out just below it in float64 from the float32
    scale, and rounding down then picks the neighbouring pixel.
    """
    dtype = dtype or xp.float64
    x = xp.arange(out_len, dtype=dtype)
    out_f = scale * in_len  # ONNX's reference uses the unrounded output length here
    scale = dtype(scale)
    outside = None
    if mode == "align_corners":
        # The spec's length_resized: the output's own (integer) length, as onnxruntime and PyTorch
        # take it; ONNX's reference divides by out_f - 1, which moves every interior sample when
        # scale * in_len is fractional (F.interpolate(scale_factor=1.5, align_corners=True) on odd sizes).
        src = xp.zeros_like(x) if out_len == 1 else x * (in_len - 1) / (out_len - 1)
    elif mode == "asymmetric":
        src = x / scale
    elif mode == "tf_crop_and_resize":
        start, end = roi
        if out_f == 1:
            src = xp.full_like(x, (end - start) * (in_len - 1) / 2)
        else:
            src = x * (end - start) * (in_len - 1) / (out_f - 1)
        src = src + start * (in_len - 1)
        outside = (src < 0) | (src > in_len - 1)
    elif mode == "pytorch_half_pixel":
        src = xp.full_like(x, -0.5) if out_f == 1 else (x + 0.5) / scale - 0.5
    elif mode == "half_pixel":
        src = (x + 0.5) / scale - 0.5
    elif mode == "half_pixel_symmetric":
        # ONNX's offset + (x + 0.5) / scale - 0.5 with offset = in_len / 2 * (1 - out_len / out_f),
        # regrouped about the two centres so that a coordinate meant to be an integer comes out as
        # one (computed as written it may land an ulp off, and nearest ceil/floor then picks a
        # neighbouring pixel).
        src = (in_len - 1) / 2 + (x + 0.5 - out_len / 2) / scale
    else:
        raise ValueError(f"unknown coordinate_transformation_mode {mode!r}")
    return src, outside


def nearest_index(xp, src, in_len, nearest_mode):
    floor = xp.floor(src)
    frac = src - floor
    if nearest_mode == "round_prefer_floor":
        up = frac > 0.5
    elif nearest_mode == "round_prefer_ceil":
        up = frac >= 0.5
    elif nearest_mode == "floor":
        up = xp.zeros(src.shape, dtype=bool)
    elif nearest_mode == "ceil":
        up = frac > 0
    else:
        raise ValueError(f"unknown nearest_mode {nearest_mode!r}")
    return xp.clip(floor + up, 0, in_len - 1).astype(xp.int64)


def _cubic(d, a):
    d = abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return near, far


# Filters of at most this many taps an output run as gathers, one take and one multiply-add a tap;
# wider ones (antialiased shrinking by more than 4x) as one product with their dense weight matrix.
MAX_GATHER_TAPS = 8


def filter_taps(xp, src, in_len, scale, *, mode, antialias, cubic_coeff_a, exclude_outside):
    """The linear or cubic filter at each input coordinate ``src``, as (indices, weights), each
    (taps, out): a tap's input index for every output (clipped into the axis) and its weight, the
    weights of an output summing to 1."""
    support = 1 if mode == "linear" else 2
    # Antialiasing widens the filter by 1/scale when shrinking; otherwise the taps are fixed.
    stretch = min(scale, 1.0) if antialias else 1.0
    first = math.floor(-support / stretch) + 1
    taps = range(first, 2 - first)
    base = xp.ceil(src) - 1  # the reference counts an integral coordinate as ratio 1 above base
    ratio = src - base
    weights, indices = [], []
    for t in taps:
        d = xp.abs((t - ratio) * stretch)
        if mode == "linear":
            w = xp.clip(1 - d, 0, 1)
        else:
            near, far = _cubic(d, cubic_coeff_a)
            w = xp.where(d <= 1, near, xp.where(d < 2, far, 0.0))
        idx = (base + t).astype(xp.int64)
        if exclude_outside:
            w = xp.where((idx < 0) | (idx >= in_len), 0.0, w)
        weights.append(w)
        indices.append(xp.clip(idx, 0, in_len - 1))
    total = sum(weights)
    return xp.stack(indices), xp.stack([w / total for w in weights])


def dense_weights(xp, taps, in_len):
    """``filter_taps``' (indices, weights) as the dense (out, in) matrix they stand for."""
    indices, weights = taps
    columns = xp.arange(in_len).reshape(1, -1)
    matrix = xp.zeros((indices.shape[1], in_len), dtype=xp.float64)
    for w, idx in zip(weights, indices):
        matrix += w.reshape(-1, 1) * (idx.reshape(-1, 1) == columns)
    return matrix


def _repeats(xp, index, in_len) -> int:
    """k when the nearest ``index`` takes every input sample k times in a row (an integer upscale), else 0."""
    out_len = index.shape[0]
    if not in_len or out_len % in_len or out_len == in_len:
        return 0
    k = out_len // in_len
    return k if bool((index == xp.arange(out_len) // k).all()) else 0


def axis_steps(xp, shape, *, scales, sizes, roi, axes, mode, coordinate_transformation_mode, nearest_mode,
               cubic_coeff_a, exclude_outside, antialias, keep_aspect_ratio_policy):
    """Per resized axis, in order: (axis, nearest indices or None, ``filter_taps`` or None, output
    positions outside the roi or None). Resize applies them; its gradient applies their transposes."""
    axes, scales, sizes = output_plan(shape, scales, sizes, axes, keep_aspect_ratio_policy)
    rank = len(shape)
    if roi is not None and len(roi) == 2 * len(axes):
        roi = {a: (float(roi[i]), float(roi[i + len(axes)])) for i, a in enumerate(axes)}
    elif roi is not None and len(roi) == 2 * rank:
        roi = {a: (float(roi[a]), float(roi[a + rank])) for a in range(rank)}
    else:
        roi = {}
    steps = []
    for axis, scale, out_len in zip(axes, scales, sizes):
        in_len = shape[axis]
        r = roi.get(axis, (0.0, 1.0))
        if math.isclose(scale, 1.0) and out_len == in_len and r == (0.0, 1.0):
            continue
        src, outside = source_coords(xp, coordinate_transformation_mode, out_len, in_len, scale, r,
                                     dtype=xp.float32 if mode == "nearest" else xp.float64)
        if outside is not None and not bool(outside.any()):
            outside = None
        if mode == "nearest":
            steps.append((axis, nearest_index(xp, src, in_len, nearest_mode), None, outside))
        else:
            taps = filter_taps(
                xp, src, in_len, scale, mode=mode, antialias=antialias, cubic_coeff_a=cubic_coeff_a,
                exclude_outside=exclude_outside,
            )
            steps.append((axis, None, taps, outside))
    return steps


def _along(shape_rank, axis, mask):
    shape = [1] * shape_rank
    shape[axis] = mask.shape[0]
    return mask.reshape(shape)


def resize(x, xp, *, extrapolation_value, **plan):
    work = x.dtype if x.dtype.kind == "f" and x.dtype.itemsize >= 4 else xp.dtype(xp.float64)
    y = x if plan["mode"] == "nearest" else x.astype(work, copy=False)
    steps = axis_steps(xp, x.shape, **plan)
    if plan["mode"] == "nearest" and steps and all(outside is None for *_, outside in steps):
        factors = {axis: _repeats(xp, index, x.shape[axis]) for axis, index, _, _ in steps}
        if all(factors.values()):
            return integer_upscale(x, xp, factors)
    for axis, index, taps, outside in _cheapest_order(steps, x.shape):
        if index is not None:
            k = _repeats(xp, index, x.shape[axis])
            y = xp.repeat(y, k, axis=axis) if k else xp.take(y, index, axis=axis)
        elif taps[0].shape[0] <= MAX_GATHER_TAPS:
            y = _filter(y, xp, axis, taps)
        else:
            m = dense_weights(xp, taps, x.shape[axis]).astype(y.dtype)
            y = xp.moveaxis(xp.tensordot(m, y, axes=([1], [axis])), 0, axis)
        if outside is not None:
            y = xp.where(_along(x.ndim, axis, outside), xp.asarray(extrapolation_value, dtype=y.dtype), y)
    if plan["mode"] != "nearest" and x.dtype.kind in "iu":
        info = xp.iinfo(x.dtype)
        y = xp.clip(xp.rint(y), info.min, info.max)
    return xp.ascontiguousarray(y.astype(x.dtype, copy=False))


def integer_upscale(x, xp, factors: dict[int, int]):
    """``x`` with each of its elements repeated ``factors[axis]`` times along each axis (nearest
    upsampling by whole factors), in one pass writing the output.

    The output is viewed as (in_0, k_0, in_1, k_1, ...) and written from ``x`` broadcast along every
    k. A broadcast along the last axis would copy value by value; a last axis repeated twice (x2
    upsampling) is instead one integer multiply of a 1-, 2- or 4-byte element's bits (``PAIR_TYPES``),
    ``v * (2^bits + 1) = v | v << bits``, written as one element of twice the width: bit-exact, NaN
    payloads too, on either byte order. Any other factor of the last axis is repeated first, on its own.
    """
    last = x.ndim - 1
    shape = tuple(n * factors.get(a, 1) for a, n in enumerate(x.shape))
    factors = {a: k for a, k in factors.items() if k > 1}
    paired = PAIR_TYPES.get(x.dtype.itemsize) if factors.get(last) == 2 else None  # (pair, element)
    source = xp.ascontiguousarray(x)
    if paired is not None:
        source = source.view(paired[1])
        del factors[last]
    elif last in factors:
        source = xp.repeat(source, factors.pop(last), axis=last)
    layout, index = [], []
    for a, n in enumerate(source.shape):
        layout += [n, factors[a]] if a in factors else [n]
        index += [slice(None), None] if a in factors else [slice(None)]
    if paired is None:
        out = xp.empty(layout, dtype=x.dtype)
        out[...] = source[tuple(index)]
        return out.reshape(shape)
    wide = xp.dtype(paired[0])
    out = xp.empty(layout, dtype=wide)
    xp.multiply(source[tuple(index)], wide.type(1 + (1 << (8 * x.dtype.itemsize))), out=out, dtype=wide)
    return out.view(x.dtype).reshape(shape)


def _cheapest_order(steps, shape):
    """The steps in the order that moves the fewest values: shrinking axes first, then growing ones
    innermost first (a gather along the last axis copies value by value, along the others whole
    rows). The result is the same in any order: each axis is resampled on its own."""
    def growth(step):
        axis, index, taps = step[:3]
        out_len = (index if index is not None else taps[0]).shape[-1]
        return (out_len > shape[axis], -axis if out_len > shape[axis] else axis)
    return sorted(steps, key=growth)


def _filter(y, xp, axis, taps):
    """Each output along ``axis`` the weighted sum of its taps' input samples: a take and a
    multiply-add a tap, in ``y``'s precision."""
    indices, weights = taps
    weights = weights.astype(y.dtype)
    out = xp.take(y, indices[0], axis=axis)
    out *= _along(y.ndim, axis, weights[0])
    for idx, w in zip(indices[1:], weights[1:]):
        part = xp.take(y, idx, axis=axis)
        part *= _along(y.ndim, axis, w)
        out += part
    return out


def resize_adjoint(dy, shape, xp, **plan):
    """The transpose of ``resize`` as a linear map of x (shaped ``shape``): its gradient for ``dy``."""
    g = dy.astype(xp.float64)
    for axis, index, taps, outside in reversed(axis_steps(xp, shape, **plan)):
        if outside is not None:  # extrapolated positions do not depend on x
            g = xp.where(_along(g.ndim, axis, outside), 0.0, g)
        if index is not None:  # a gather is a one-hot weight matrix
            m = (index.reshape(-1, 1) == xp.arange(shape[axis]).reshape(1, -1)).astype(xp.float64)
        else:
            m = dense_weights(xp, taps, shape[axis])
        g = xp.moveaxis(xp.tensordot(m.T, g, axes=([1], [axis])), 0, axis)
    return g
