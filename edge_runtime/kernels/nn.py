"""Neural-network kernels: convolution, pooling, normalization, resampling, attention and losses.

With them, the gradient helpers of the imported ONNX ops among them (ResizeGrad, GridSampleGrad,
AttentionGrad, domain ``flowstack``): each recomputes what it needs of the forward pass with the
forward kernel's own helpers (the resampling plan, GridSample's taps, Attention's bias), so forward
and gradient cannot disagree on conventions, then applies the transpose.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import product

import numpy as np

from edge_runtime.kernels import resampling, sliding_windows, window_shifts
from edge_runtime.kernels.math import SOFTMAX_MIN_SHIFTED_SUM
from edge_runtime.kernels.registry import kernel
from edge_runtime.kernels.row_moments import (affine_rows, inverse_std, row_mean_square, row_means, row_moments,
                                              standardize_rows)
from schemas.ops.nn import CAUSAL_CONV_ACTIVATIONS, LINEAR_ATTENTION_RULES

# ----------------------------------------------------------------------------------- convolution


@kernel("Conv", bfloat16_via_float32=True)
def conv(x, w, b, *, xp, auto_pad, dilations, group, kernel_shape, pads, strides):
    kernel_spatial = tuple(kernel_shape or w.shape[2:])
    win = sliding_windows.resolve_window(x.shape[2:], kernel_spatial, strides, dilations, pads, auto_pad)
    return sliding_windows.conv(x, w, b, xp, group=group, win=win)


@kernel("ConvTranspose", bfloat16_via_float32=True)
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
        total = [f - o for f, o in zip(full, out)]  # negative where the taps cover less than asked
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        elif auto_pad == "SAME_LOWER":
            begin = [t - t // 2 for t in total]
        else:  # an output_shape: onnxruntime (and ONNX's reference) add what the taps miss at the end
            begin = [max(t - t // 2, 0) for t in total]
        pads = begin + [t - b_ for t, b_ in zip(total, begin)]
    else:
        pads = [0] * (2 * n) if auto_pad == "VALID" or not pads else list(pads)
        out = [f - pads[i] - pads[i + n] for i, f in enumerate(full)]
    return sliding_windows.conv_transpose(
        x, w, b, xp, group=group, kernel=kernel_spatial, strides=strides, dilations=dilations, pads=pads,
        out_spatial=out,
    )


# --------------------------------------------------------------------------------------- pooling


def pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode):
    return sliding_windows.resolve_window(x.shape[2:], tuple(kernel_shape), strides, dilations, pads, auto_pad, ceil_mode)


def _window_axes(win):
    n = len(win.kernel)
    return tuple(range(2 + n, 2 + 2 * n))


def reduce_windows(x, xp, ufunc, win, fill, lead: int | None = None):
    """Reduce every window of ``x`` (unpadded) with ``ufunc``, one spatial axis at a time, as if
    ``x`` were padded as ``win`` says with ``fill`` (the ufunc's identity: 0 for a sum, the dtype's
    least for a max); a fresh array.

    The spatial axes follow the first ``lead`` axes (default: they are the trailing axes, as in
    (N, C, spatial...); 1 for channels-last (N, spatial..., C)).

    Max and sum over a box are separable: reducing each axis in turn takes sum(k - 1) whole-array
    ufunc calls instead of prod(k) - 1 (4 instead of 8 for 3x3, on arrays shrinking axis by axis), and the
    first axes read contiguous rows. No padded copy is made: a tap that reaches into the padding
    for some outputs only reduces into the outputs it covers in the input (ResNet-18's 3x3 stride 2
    pad 1 max pool on 1x112x112x64 channels-last: 290 -> 200 us). Where ``window_shifts`` applies,
    an axis runs as calls over whole flattened arrays instead of strided views, and stride-1
    windows on small planes over one padded copy.
    """
    lead = x.ndim - len(win.kernel) if lead is None else lead
    if window_shifts.small_planes(x.shape[lead:lead + len(win.kernel)], win):
        padded = window_shifts.reduce_padded(x, xp, ufunc, fill, win, lead)
        if padded is not None:
            return padded
    out, fresh = x, False
    for axis, axis_taps in enumerate(_tap_plan(lead, x.shape, win)):
        shifted = window_shifts.reduce_axis(out, xp, ufunc, fill, lead + axis, win.kernel[axis], win.strides[axis],
                                            win.dilations[axis], win.pad_begin[axis], win.out[axis])
        if shifted is not None:
            out, reduced = shifted, True
        else:
            out, reduced = _reduce_axis(out, xp, ufunc, fill, axis_taps)
        fresh = fresh or reduced
    return out if fresh else xp.array(out)  # only 1-tap axes: a view of x so far


def _reduce_axis(x, xp, ufunc, fill, axis_taps):
    """One axis of ``reduce_windows``, and whether the result is a new array (a 1-tap axis gives a
    strided view): the taps covering every output start the accumulator."""
    position, size, full, partial = axis_taps
    if len(full) == 1 and not partial:
        return x[full[0]], False
    if len(full) >= 2:
        acc = ufunc(x[full[0]], x[full[1]])
        rest = full[2:]
    elif full:
        acc = x[full[0]].copy()
        rest = ()
    else:
        acc = xp.full(x.shape[:position] + (size,) + x.shape[position + 1 :], fill, dtype=x.dtype)
        rest = ()
    for source in rest:
        ufunc(acc, x[source], out=acc)
    for target, source in partial:
        ufunc(acc[target], x[source], out=acc[target])
    return acc, True


def lowest(dtype, xp):
    """A value no element of ``dtype`` is below: a max's padding (-inf, or the integer type's least)."""
    return -xp.inf if dtype.kind == "f" else xp.iinfo(dtype).min


def max_windows(x, xp, win, lead: int | None = None):
    """Max pool of ``x`` over ``win``'s windows (``lead`` as in ``reduce_windows``), a fresh array."""
    return reduce_windows(x, xp, xp.maximum, win, lowest(x.dtype, xp), lead)


def padded_for_max(x, xp, win, lead: int | None = None):
    """``x`` padded as ``win`` says with ``lowest``, for a max over its windows; ``lead`` as in
    ``reduce_windows`` (1: channels-last)."""
    pad = sliding_windows.pad_channels_last if lead == 1 else sliding_windows.pad_spatial
    return pad(x, xp, win.pad_begin, win.padded_end, lowest(x.dtype, xp))


@lru_cache(maxsize=1024)
def _tap_plan(lead: int, shape: tuple[int, ...], win) -> tuple:
    """Per spatial axis: its position, the output size along it, the indices of the taps that cover
    every output, and (output index, input index) pairs of the taps that cover only some."""
    plan = []
    for axis, (k, s, d, o, pb) in enumerate(zip(win.kernel, win.strides, win.dilations, win.out, win.pad_begin)):
        size, head = shape[lead + axis], (slice(None),) * (lead + axis)
        full, partial = [], []
        for t in range(k):
            offset = t * d - pb  # input index of output 0's tap t
            lo = -(offset // s) if offset < 0 else 0  # first output whose tap is in the input
            hi = min(o, (size - 1 - offset) // s + 1) if size - 1 - offset >= 0 else 0
            if hi <= lo:
                continue
            first = lo * s + offset
            source = head + (slice(first, first + (hi - lo - 1) * s + 1, s),)
            if (lo, hi) == (0, o):
                full.append(source)
            else:
                partial.append((head + (slice(lo, hi),), source))
        plan.append((lead + axis, o, tuple(full), tuple(partial)))
    return tuple(plan)


@kernel("MaxPool", output_count=True)
def max_pool(x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order, strides, n_outputs):
    win = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    y = max_windows(x, xp, win)
    if n_outputs < 2:
        return y
    xpad = padded_for_max(x, xp, win)
    view = sliding_windows.windows(xpad, xp, win)
    n_sp = len(win.kernel)
    # Indices: the flat position of each window's first maximum in the unpadded input.
    flat = view.reshape(view.shape[: 2 + n_sp] + (math.prod(win.kernel),))
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
    total = reduce_windows(x, xp, xp.add, win, 0)
    return total, window_counts(x, xp, win, include_pad=include_pad)


def window_counts(x, xp, win, *, include_pad):
    """Elements each window of ``x`` averages over, (1, 1, out...): declared padding counts when
    ``include_pad``; the extra end padding of ceil_mode windows never does."""
    ones = xp.ones((1, 1) + x.shape[2:], dtype=x.dtype)
    if include_pad:
        ones = sliding_windows.pad_spatial(ones, xp, win.pad_begin, win.pad_end, 1)
        mask = sliding_windows.pad_spatial(ones, xp, (0,) * len(win.kernel), win.extra_end)
    else:
        mask = sliding_windows.pad_spatial(ones, xp, win.pad_begin, win.padded_end)
    return sliding_windows.windows(mask, xp, win).sum(axis=_window_axes(win))


@lru_cache(maxsize=256)
def _kept_window_counts(spatial: tuple[int, ...], dtype: str, win, include_pad: bool):
    """``window_counts`` on NumPy, computed once per input shape and window (read-only)."""
    counts = window_counts(np.empty((1, 1) + spatial, dtype=dtype), np, win, include_pad=include_pad)
    counts.flags.writeable = False
    return counts


@kernel("AveragePool")
def average_pool(x, *, xp, auto_pad, ceil_mode, count_include_pad, dilations, kernel_shape, pads, strides):
    win = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    if xp.__name__ == "numpy" and x.dtype.kind == "f":
        # the counts kept (recounting cost a third of a 3x3 pool), the sums divided in place
        total = reduce_windows(x, xp, xp.add, win, 0)
        return xp.divide(total, _kept_window_counts(x.shape[2:], x.dtype.str, win, bool(count_include_pad)),
                         out=total)
    total, count = _pool_sum(x, xp, win, include_pad=count_include_pad)
    return (total / count).astype(x.dtype)


@kernel("LpPool")
def lp_pool(x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, p, pads, strides):
    win = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    total, _ = _pool_sum(xp.abs(x) ** p, xp, win, include_pad=True)
    return (total ** (1.0 / p)).astype(x.dtype)


def _spatial_axes(x):
    return tuple(range(2, x.ndim))


@kernel("GlobalAveragePool")
def global_average_pool(x, *, xp):
    if _blas_reducible(x, xp):  # MobileNetV2's 1x1280x7x7: 37 -> 6 us
        rows = x.reshape(x.shape[0] * x.shape[1], math.prod(x.shape[2:]))
        return row_means(rows, xp).reshape(x.shape[:2] + (1,) * (x.ndim - 2))
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


@kernel("Col2Im")
def col2im(x, image_shape, block_shape, *, xp, dilations, pads, strides):
    image = tuple(int(d) for d in image_shape.tolist())
    block = tuple(int(d) for d in block_shape.tolist())
    win = sliding_windows.resolve_window(image, block, strides, dilations, pads, "NOTSET")
    n = x.shape[0]
    c = x.shape[1] // math.prod(block)
    cols = x.reshape((n, c, math.prod(block)) + win.out)
    y = sliding_windows.col2im(cols, xp, win, tuple(i + b + e for i, b, e in zip(image, win.pad_begin, win.pad_end)))
    crop = tuple(slice(b, b + i) for b, i in zip(win.pad_begin, image))
    return xp.ascontiguousarray(y[(slice(None), slice(None)) + crop])


# --------------------------------------------------------------------------------- normalization


def _compute_dtype(x, xp, stash_type=1):
    # stash_type=1 asks for float32 statistics: half-precision inputs are widened, doubles kept.
    if x.dtype.kind == "f" and x.dtype.itemsize < 4 and stash_type == 1:
        return xp.float32
    return x.dtype


def _blas_reducible(x, xp) -> bool:
    """Whether ``row_moments`` may take ``x``'s row statistics: a non-empty float32/float64 NumPy array."""
    return xp.__name__ == "numpy" and x.size > 0 and x.dtype.kind == "f" and x.dtype.itemsize >= 4


def _normalize(x, axes, eps, xp, dtype):
    """((x - mean) / sqrt(var + eps), mean, 1 / sqrt(var + eps)) over ``axes``; the first a fresh
    array its callers scale and shift in place (any array module, any axes)."""
    xc = x.astype(dtype, copy=False)
    mean = xc.mean(axis=axes, keepdims=True)
    diff = xc - mean
    var = xp.square(diff).mean(axis=axes, keepdims=True)
    inv_std = 1 / xp.sqrt(var + xp.asarray(eps, dtype=dtype))
    diff *= inv_std
    return diff, mean, inv_std


def _channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


@kernel("BatchNormalization")
def batch_normalization(x, scale, b, mean, var, *, xp, epsilon, momentum, training_mode):
    eps = xp.asarray(epsilon, dtype=x.dtype)
    if training_mode:
        axes = (0,) + _spatial_axes(x)
        batch_mean = x.mean(axis=axes)
        batch_var = x.var(axis=axes)
        y = (x - _channel(batch_mean, x.ndim)) / xp.sqrt(_channel(batch_var, x.ndim) + eps)
        y = y * _channel(scale, x.ndim) + _channel(b, x.ndim)
        running_mean = mean * momentum + batch_mean * (1 - momentum)
        running_var = var * momentum + batch_var * (1 - momentum)
        return y.astype(x.dtype), running_mean.astype(mean.dtype), running_var.astype(var.dtype)
    # Per-channel scale and shift first (tiny), then one multiply and one in-place add over x.
    inv = (scale / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
    shift = (b - mean * inv).astype(x.dtype, copy=False)
    y = x * _channel(inv, x.ndim)
    y += _channel(shift, x.ndim)
    return y, mean, var


def _broadcasts_within(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether an array of ``shape`` broadcasts to ``target`` without growing it."""
    if shape == target:
        return True
    extra = len(shape) - len(target)
    if extra > 0 and any(d != 1 for d in shape[:extra]):
        return False
    return all(d in (1, t) for d, t in zip(reversed(shape), reversed(target)))


@kernel("LayerNormalization", output_count=True)
def layer_normalization(x, scale, b, *, xp, axis, epsilon, stash_type, n_outputs):
    axis = axis % x.ndim
    xc = x.astype(_compute_dtype(x, xp, stash_type), copy=False)
    normalized = x.shape[axis:]
    if _blas_reducible(xc, xp) and _broadcasts_within(scale.shape, normalized) and (
            b is None or _broadcasts_within(b.shape, normalized)):
        moments = row_moments(xc.reshape(-1, math.prod(normalized)), xp)
        y, inv_std = standardize_rows(moments.rows, moments.mean, moments.var, epsilon, scale, b, normalized, xp)
        y = y.reshape(x.shape).astype(x.dtype, copy=False)
        if n_outputs == 1:
            return y
        kept = x.shape[:axis] + (1,) * len(normalized)
        mean, inv_std = moments.input_mean().reshape(kept), inv_std.reshape(kept)
    else:
        y, mean, inv_std = _normalize(xc, tuple(range(axis, x.ndim)), epsilon, xp, xc.dtype)
        y *= scale
        if b is not None:
            y += b
        y = y.astype(x.dtype, copy=False)
        if n_outputs == 1:
            return y
    return y, mean.astype(x.dtype), inv_std.astype(x.dtype)


def _normalize_channels(x, scale, bias, groups: int, eps, xp, dtype):
    """``x`` normalized over each of its ``groups`` channel groups (every channel its own group for
    InstanceNormalization), then scaled and shifted per channel; ``x`` a float32/float64 NumPy array.
    The per-group statistics and per-channel parameters fold into one factor and one addend a row of
    the (batch * channels, spatial) view."""
    n, c = x.shape[:2]
    moments = row_moments(x.reshape(n * groups, -1), xp)
    mean, inv_std = moments.mean, inverse_std(moments.var, eps, xp)
    if groups != c:
        mean = xp.repeat(mean.reshape(n, groups), c // groups, axis=1)
        inv_std = xp.repeat(inv_std.reshape(n, groups), c // groups, axis=1)
    factor = inv_std.reshape(n, c) * scale.astype(dtype, copy=False)
    addend = bias.astype(dtype, copy=False) - mean.reshape(n, c) * factor
    return affine_rows(moments.rows.reshape(n * c, -1), factor.reshape(-1), addend.reshape(-1), xp).reshape(x.shape)


@kernel("InstanceNormalization")
def instance_normalization(x, scale, b, *, xp, epsilon):
    xc = x.astype(_compute_dtype(x, xp), copy=False)
    if _blas_reducible(xc, xp):
        return _normalize_channels(xc, scale, b, x.shape[1], epsilon, xp, xc.dtype).astype(x.dtype, copy=False)
    normed, _, _ = _normalize(xc, _spatial_axes(x), epsilon, xp, xc.dtype)
    return (normed * _channel(scale, x.ndim) + _channel(b, x.ndim)).astype(x.dtype)


@kernel("GroupNormalization")
def group_normalization(x, scale, bias, *, xp, epsilon, num_groups, stash_type):
    xc = x.astype(_compute_dtype(x, xp, stash_type), copy=False)
    if _blas_reducible(xc, xp) and num_groups > 0 and x.shape[1] % num_groups == 0:
        return _normalize_channels(xc, scale, bias, num_groups, epsilon, xp, xc.dtype).astype(x.dtype, copy=False)
    n = x.shape[0]
    grouped = xc.reshape((n, num_groups, math.prod(x.shape[1:]) // max(num_groups, 1)))
    normed, _, _ = _normalize(grouped, (2,), epsilon, xp, xc.dtype)
    y = normed.reshape(x.shape) * _channel(scale, x.ndim) + _channel(bias, x.ndim)
    return y.astype(x.dtype)


@kernel("RMSNormalization")
def rms_normalization(x, scale, *, xp, axis, epsilon, stash_type):
    axis = axis % x.ndim
    xc = x.astype(_compute_dtype(x, xp, stash_type), copy=False)
    normalized = x.shape[axis:]
    if _blas_reducible(xc, xp) and _broadcasts_within(scale.shape, normalized):
        # a Llama layer's 64x512 norm alone: 16 -> 11 us (the seven exported ops 46 us)
        rows = xc.reshape(-1, math.prod(normalized))
        y, _ = standardize_rows(rows, None, row_mean_square(rows, xp), epsilon, scale, None, normalized, xp)
        return y.reshape(x.shape).astype(x.dtype, copy=False)
    ms = (xc * xc).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
    y = xc / xp.sqrt(ms + xp.asarray(epsilon, dtype=xc.dtype)) * scale
    return y.astype(x.dtype)


@kernel("LRN")
def lrn(x, *, xp, alpha, beta, bias, size):
    # Sum of squares over a window of channels: one padded cumulative sum, then a difference.
    sq = (x * x).astype(_compute_dtype(x, xp), copy=False)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    widths = [(0, 0), (lo + 1, hi)] + [(0, 0)] * (x.ndim - 2)
    csum = xp.cumsum(xp.pad(sq, widths), axis=1)
    c = x.shape[1]
    window = csum[:, size : size + c] - csum[:, :c]
    y = x / (bias + (alpha / size) * window) ** beta
    return y.astype(x.dtype)


@kernel("LpNormalization")
def lp_normalization(x, *, xp, axis, p):
    if p == 1:
        norm = xp.abs(x).sum(axis=axis, keepdims=True)
    else:
        norm = xp.sqrt((x * x).sum(axis=axis, keepdims=True))
    # A zero vector stays zero rather than becoming 0/0.
    safe = xp.where(norm == 0, xp.ones((), dtype=norm.dtype), norm)
    return (x / safe).astype(x.dtype)


@kernel("MeanVarianceNormalization")
def mean_variance_normalization(x, *, xp, axes):
    if x.size == 0:  # nothing to normalize: a mean over no values would warn and give NaN
        return xp.empty(x.shape, dtype=x.dtype)
    axes = tuple(a % x.ndim for a in axes)
    mean = x.mean(axis=axes, keepdims=True)
    std = xp.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True))
    return ((x - mean) / (std + xp.asarray(1e-9, dtype=x.dtype))).astype(x.dtype)


# ------------------------------------------------------------------------------ dropout, layout


@kernel("Dropout")
def dropout(x, ratio, training_mode, *, xp, seed):
    ratio = 0.5 if ratio is None else float(ratio)
    if training_mode is None or not bool(training_mode) or ratio == 0:
        return x, xp.ones(x.shape, dtype=bool)
    if seed is None:
        mask = xp.random.uniform(0, 1.0, x.shape) >= ratio
    else:
        # A seed names NumPy's stream (as ONNX's reference does): the same mask on every device.
        mask = xp.asarray(np.random.RandomState(seed).uniform(0, 1.0, x.shape) >= ratio)
    scale = xp.asarray(1.0 / (1.0 - ratio), dtype=x.dtype)
    return (x * mask * scale).astype(x.dtype), mask


@kernel("DepthToSpace")
def depth_to_space(x, *, xp, blocksize, mode):
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


@kernel("SpaceToDepth")
def space_to_depth(x, *, xp, blocksize, mode):
    n, c, h, w = x.shape
    b = blocksize
    t = x.reshape(n, c, h // b, b, w // b, b)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


# ----------------------------------------------------------------------------------- resampling


def _given(v):
    return None if v is None or v.size == 0 else v.tolist()


@kernel("Resize")
def resize(
    x, roi, scales, sizes, *, xp, antialias, axes, coordinate_transformation_mode, cubic_coeff_a,
    exclude_outside, extrapolation_value, keep_aspect_ratio_policy, mode, nearest_mode,
):
    return resampling.resize(
        x, xp, scales=_given(scales), sizes=_given(sizes), roi=_given(roi), axes=axes, mode=mode,
        coordinate_transformation_mode=coordinate_transformation_mode, nearest_mode=nearest_mode,
        cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside, extrapolation_value=extrapolation_value,
        antialias=antialias, keep_aspect_ratio_policy=keep_aspect_ratio_policy,
    )


@kernel("Upsample")
def upsample(x, scales, *, xp, mode):
    # Upsample is Resize with the opset-10 conventions: asymmetric coordinates, nearest rounds down.
    return resampling.resize(
        x, xp, scales=scales.tolist(), sizes=None, roi=None, axes=None, mode=mode,
        coordinate_transformation_mode="asymmetric", nearest_mode="floor", cubic_coeff_a=-0.75,
        exclude_outside=0, extrapolation_value=0.0, antialias=0, keep_aspect_ratio_policy="stretch",
    )


def _reflect(xp, x, lo, hi):
    """Fold coordinates outside [lo, hi] back inside, mirroring at the borders as often as needed."""
    span = hi - lo
    if span == 0:  # one sample with align_corners: everything folds onto it (no 0 / 0)
        return xp.full_like(x, lo)
    below, above = lo - x, x - hi
    dist = xp.where(x < lo, below, above)
    folds = xp.trunc(dist / span)
    rest = dist - folds * span
    even = folds % 2 == 0
    from_low = xp.where(even, lo + rest, hi - rest)
    from_high = xp.where(even, hi - rest, lo + rest)
    return xp.where(x < lo, from_low, xp.where(x > hi, from_high, x))


def _clip_beyond(xp, x, lo, hi, size):
    """Border padding: coordinates beyond the border [lo, hi] clipped to the outer pixel centres.

    Only those, as ONNX's reference does: without align_corners, a coordinate less than half a
    pixel outside the centres keeps its cubic weights and has its taps clamped instead, as in
    onnxruntime too (linear and nearest sample the same pixels either way)."""
    return xp.where((x < lo) | (x > hi), xp.clip(x, 0, size - 1), x)


@kernel("CausalConvWithState")
def causal_conv_with_state(x, w, b, past_state, *, xp, activation):
    """y[:, :, t] = sum_j w[:, 0, j] * [state, x][:, :, t + j] (+ bias, then SiLU if asked); the new
    state is the last k - 1 positions of [state, x]. One multiply-add per kernel tap (k is small)."""
    if activation not in CAUSAL_CONV_ACTIVATIONS:
        raise ValueError(f"CausalConvWithState: activation must be one of {CAUSAL_CONV_ACTIVATIONS}, got {activation!r}")
    n, c, length = x.shape
    k = w.shape[2]
    if past_state is None:
        past_state = xp.zeros((n, c, k - 1), dtype=x.dtype)
    elif past_state.shape != (n, c, k - 1):
        raise ValueError(f"CausalConvWithState: past_state must have shape {(n, c, k - 1)}, got {past_state.shape}")
    padded = xp.concatenate([past_state.astype(x.dtype, copy=False), x], axis=2)
    # float16 accumulates in float32, as the reference's convolution does
    work = padded.astype(xp.float32) if x.dtype == xp.float16 else padded
    taps = w.reshape(c, k).astype(work.dtype, copy=False)
    y = work[:, :, :length] * taps[:, :1]
    for j in range(1, k):
        y += work[:, :, j : j + length] * taps[:, j : j + 1]
    if b is not None:
        y += b.astype(work.dtype, copy=False)[:, None]
    if activation != "none":  # silu and swish: y * sigmoid(y)
        y = y / (1 + xp.exp(-y))
    return y.astype(x.dtype, copy=False), xp.ascontiguousarray(padded[:, :, length:])


_GRID_MODES = ("nearest", "linear", "cubic")
_GRID_PADDING = ("zeros", "border", "reflection")


def _grid_taps(xp, coord, size, mode, align_corners, padding_mode):
    """Per spatial dim: the (index, weight, valid) triples that sample ``coord`` from that dim."""
    if mode not in _GRID_MODES or padding_mode not in _GRID_PADDING:
        raise ValueError(f"GridSample: mode must be one of {_GRID_MODES} and padding_mode one of {_GRID_PADDING}, "
                         f"got {mode!r} and {padding_mode!r}")
    lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
    if mode == "nearest":
        coord = xp.rint(coord)
    if padding_mode == "border":
        coord = _clip_beyond(xp, coord, lo, hi, size)
    elif padding_mode == "reflection":
        coord = _reflect(xp, coord, lo, hi)
    if mode == "nearest":
        taps = [(xp.trunc(coord), xp.ones_like(coord))]
    else:
        base = xp.floor(coord)
        f = coord - base
        if mode == "linear":
            taps = [(base, 1 - f), (base + 1, f)]
        else:
            a = -0.75
            near = [((a + 2) * d - (a + 3)) * d * d + 1 for d in (f, 1 - f)]
            far = [((a * d - 5 * a) * d + 8 * a) * d - 4 * a for d in (f + 1, 2 - f)]
            taps = [(base - 1, far[0]), (base, near[0]), (base + 1, near[1]), (base + 2, far[1])]
    out = []
    for index, weight in taps:
        if padding_mode == "zeros":
            valid = (index >= 0) & (index < size)
        else:
            valid = xp.ones(index.shape, dtype=bool)
            if padding_mode == "border":
                index = xp.clip(index, 0, size - 1)
            else:
                index = xp.trunc(_reflect(xp, index, lo, hi))
        out.append((xp.clip(index, 0, size - 1).astype(xp.int64), weight, valid))
    return out


@kernel("GridSample")
def grid_sample(x, grid, *, xp, align_corners, mode, padding_mode):
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    out_spatial = grid.shape[1:-1]
    # Explicit lengths, not -1: NumPy cannot infer a -1 beside a batch of 0.
    g = grid.reshape(n, math.prod(out_spatial), len(spatial)).astype(xp.float64)
    per_dim = []
    for d, size in enumerate(spatial):
        norm = g[..., len(spatial) - 1 - d]  # the grid lists x (innermost dim) first
        coord = (norm + 1) / 2 * (size - 1) if align_corners else ((norm + 1) * size - 1) / 2
        per_dim.append(_grid_taps(xp, coord, size, mode, align_corners, padding_mode))
    flat_x = x.reshape(n, c, math.prod(spatial))
    # coordinates and weights in float64; the sum of the taps in the input's precision (float64
    # for integers), each tap one gather of every channel's samples an image
    work = x.dtype if x.dtype.kind == "f" and x.dtype.itemsize >= 4 else xp.dtype(xp.float64)
    y = xp.zeros((n, c, g.shape[1]), dtype=work)
    for combo in product(*per_dim):  # at most 4**3 tap combinations, each over every pixel
        flat = xp.zeros(g.shape[:2], dtype=xp.int64)
        weight = xp.ones(g.shape[:2], dtype=xp.float64)
        for (index, w, valid), size in zip(combo, spatial):
            flat = flat * size + index
            weight = weight * xp.where(valid, w, 0.0)
        weight = weight.astype(work)
        for i in range(n):
            values = xp.take(flat_x[i], flat[i], axis=1).astype(work, copy=False)
            values *= weight[i]
            y[i] += values
    return y.reshape((n, c) + tuple(out_spatial)).astype(x.dtype, copy=False)


@kernel("AffineGrid")
def affine_grid(theta, size, *, xp, align_corners):
    dims = [int(d) for d in size.tolist()][2:]
    axes = []
    for length in dims:
        if align_corners:
            axes.append(xp.linspace(-1.0, 1.0, length) if length > 1 else xp.zeros(1))
        else:
            axes.append((xp.arange(length) * 2 + 1) / length - 1)
    mesh = xp.meshgrid(*axes, indexing="ij")
    # Homogeneous coordinates (x, y[, z], 1), x being the innermost spatial dim.
    homo = xp.stack([m.reshape(-1) for m in reversed(mesh)] + [xp.ones(mesh[0].size)], axis=0)
    grid = xp.matmul(theta.astype(xp.float64), homo)  # (N, nd, pixels)
    n = theta.shape[0]
    return xp.ascontiguousarray(grid.transpose(0, 2, 1)).reshape((n, *dims, len(dims))).astype(theta.dtype)


# ------------------------------------------------------------------------------------- losses


def _nll(logp, target, weight, xp, *, ignore_index, reduction):
    c = logp.shape[1]
    keep = xp.ones(target.shape, dtype=bool) if ignore_index is None else target != ignore_index
    safe = xp.where(keep, target, 0).astype(xp.int64)
    picked = xp.take_along_axis(logp, xp.expand_dims(safe, 1), axis=1)[:, 0]
    w = xp.ones(c, dtype=logp.dtype) if weight is None else weight
    wt = xp.where(keep, w[safe], xp.zeros((), dtype=logp.dtype))
    loss = -picked * wt
    if reduction == "none":
        return loss.astype(logp.dtype)
    if reduction == "sum":
        return loss.sum().astype(logp.dtype)
    return (loss.sum() / wt.sum()).astype(logp.dtype)


@kernel("NegativeLogLikelihoodLoss")
def negative_log_likelihood_loss(x, target, weight, *, xp, ignore_index, reduction):
    return _nll(x, target, weight, xp, ignore_index=ignore_index, reduction=reduction)


@kernel("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(scores, labels, weights, *, xp, ignore_index, reduction):
    shifted = scores - scores.max(axis=1, keepdims=True)
    log_prob = (shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))).astype(scores.dtype)
    loss = _nll(log_prob, labels, weights, xp, ignore_index=ignore_index, reduction=reduction)
    return loss, log_prob


# ------------------------------------------------------------------------------------ attention

_ONNX_FLOAT_DTYPES = {1: "float32", 10: "float16", 11: "float64", 16: "bfloat16"}


def _heads(t, num_heads):
    """(B, S, H*D) -> (B, H, S, D)."""
    b, s, hidden = t.shape
    return t.reshape(b, s, num_heads, hidden // num_heads).transpose(0, 2, 1, 3)


def _query_offset(xp, past_key, nonpad_kv_seqlen, q_len):
    """Position of the first query among the keys: after the cached keys, or the last q_len valid ones."""
    if past_key is not None:
        return past_key.shape[2]
    if nonpad_kv_seqlen is not None:
        return nonpad_kv_seqlen.astype(xp.int64) - q_len
    return 0


def _attention_bias(xp, dtype, q_len, kv_len, batch, *, mask, is_causal, offset, left, right, nonpad):
    """The additive bias (0 or -inf where disallowed, plus any float mask), broadcastable to scores.

    ``offset`` aligns causal and window bounds bottom-right: a scalar (past length) or, for an
    external cache, a per-batch array ``nonpad_kv_seqlen - q_len``.
    """
    neg_inf = xp.asarray(-xp.inf, dtype=dtype)
    zero = xp.zeros((), dtype=dtype)
    bias = xp.zeros((q_len, kv_len), dtype=dtype)
    if mask is not None:
        pad = kv_len - mask.shape[-1]
        if pad > 0:
            fill = False if mask.dtype == bool else -xp.inf
            mask = xp.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=fill)
        bias = bias + (xp.where(mask, zero, neg_inf) if mask.dtype == bool else mask.astype(dtype))
    if is_causal or left >= 0 or right >= 0:
        i = xp.arange(q_len).reshape(q_len, 1)
        j = xp.arange(kv_len).reshape(1, kv_len)
        if xp.ndim(offset) > 0:
            diff = (i + offset.reshape(-1, 1, 1, 1)) - j  # (B, 1, q, kv)
        else:
            diff = (i + int(offset)) - j
        allowed = xp.ones(diff.shape, dtype=bool)
        if is_causal:
            allowed &= diff >= 0
        if left >= 0:
            allowed &= diff <= left
        if right >= 0:
            allowed &= -diff <= right
        bias = bias + xp.where(allowed, zero, neg_inf)
    if nonpad is not None:
        valid = xp.arange(kv_len).reshape(1, kv_len) < nonpad.reshape(-1, 1)
        bias = bias + xp.where(valid, zero, neg_inf).reshape(batch, 1, 1, kv_len)
    return bias


def _is_plain(q, k, v, attn_mask, past_key, nonpad_kv_seqlen, *, is_causal, left, right, softcap, precision,
              n_outputs) -> bool:
    """Whether the node is the scaled dot-product attention exporters write op by op (4-D NumPy
    heads, as many query heads as key/value heads or a multiple, an optional float mask, Y alone),
    which ``_plain_attention`` computes."""
    if n_outputs != 1 or q.ndim != 4 or past_key is not None:
        return False
    if k.shape[1] != v.shape[1] or not k.shape[1] or q.shape[1] % k.shape[1]:
        return False
    if nonpad_kv_seqlen is not None or is_causal or left >= 0 or right >= 0 or softcap > 0:
        return False
    if precision and _ONNX_FLOAT_DTYPES.get(precision) != q.dtype.name:
        return False
    if not isinstance(q, np.ndarray) or q.dtype not in (np.float32, np.float64):
        return False
    return attn_mask is None or attn_mask.dtype == q.dtype


def _plain_attention(q, k, v, mask, scale):
    """softmax(Q Kᵀ * scale + mask) V with the scale on Q (the smaller operand at head sizes below the
    sequence length) and the mask added in place: the op-by-op chain's passes without its copies.

    The exponentials are shifted by the largest score of all heads (one contiguous reduction; a
    maximum along each short row cost BERT-sized scores 187 us of their softmax's 370), each row's
    sum is one matrix-vector product, and the division falls on the product with V, which has
    head-size columns where the scores have sequence-length ones. Where that shift leaves some row
    too small a sum (a row masked out, or far below the largest score), the scores are computed
    again and each row shifted by its own maximum.

    With grouped-query attention (G query heads to a key/value head), each group's queries are
    stacked as the rows of one product against their shared keys: one BLAS call per key/value head,
    and no repeated copy of K and V (a Llama-style layer's 8 query and 2 key/value heads at 64
    tokens: as fast as the 8 repeated heads, and the 43 + 16 us of repeat_kv's Expands before it go)."""
    factor = q.dtype.type(1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    # Q, K and V often arrive as transposed views of (B, S, H, D), and a product of such strides falls
    # off BLAS (BERT-sized Q Kᵀ 775 -> 135 us): scale Q into C order, copy K and V once.
    q = np.multiply(q, factor, order="C")
    k, v = np.ascontiguousarray(k), np.ascontiguousarray(v)
    batch, heads, length = q.shape[:3]
    grouped = q.reshape(batch, k.shape[1], -1, q.shape[3])  # (B, Hkv, G * S, D): a view of the copy
    exps, row_sums = exp_shifted_by_top(_scores(grouped, k, mask, length))
    if exps is None:
        y = np.matmul(_softmax_last_axis(_scores(grouped, k, mask, length)), v)
    else:
        y = np.matmul(exps, v)
        y /= row_sums
    return y.reshape(batch, heads, length, v.shape[3])


def _scores(q, k, mask, length):
    """Q Kᵀ (Q already scaled, its heads grouped by key/value head as (B, Hkv, G * length, D)) plus
    the mask (broadcasting to (B, Hkv * G, length, Skv)), in a fresh C-ordered array."""
    scores = np.matmul(q, k.transpose(0, 1, 3, 2))
    if mask is None:
        return scores
    batch, kv_heads, rows, kv_length = scores.shape
    by_head = scores.reshape(batch, kv_heads, rows // length, length, kv_length)  # a view
    mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    if mask.shape[1] == 1:
        mask = mask[:, :, None]
    else:
        mask = mask.reshape(mask.shape[0], kv_heads, -1, *mask.shape[2:])
    if np.broadcast_shapes(by_head.shape, mask.shape) == by_head.shape:
        by_head += mask
        return scores
    return (by_head + mask).reshape(batch, kv_heads, rows, -1)


def exp_shifted_by_top(scores):
    """exp(scores - max(scores)) in place and each row's sum (shaped to divide ``exps @ V``), or
    (None, None) where that shift is not safe: a score not finite, or a row whose sum falls under
    ``SOFTMAX_MIN_SHIFTED_SUM`` (``scores`` is then spent)."""
    top = np.maximum.reduce(scores, axis=None)
    if not math.isfinite(top):
        return None, None
    scores -= top
    np.exp(scores, out=scores)
    length = scores.shape[-1]
    row_sums = np.matmul(scores.reshape(-1, length), np.ones(length, dtype=scores.dtype))
    if not np.minimum.reduce(row_sums, axis=None) >= SOFTMAX_MIN_SHIFTED_SUM:
        return None, None
    return scores, row_sums.reshape(*scores.shape[:-1], 1)


def _softmax_last_axis(scores):
    """Softmax over the last axis in place, each row shifted by its maximum: attention's way where
    ``exp_shifted_by_top`` is not safe; a row masked to -inf everywhere gives zeros, as Attention
    specifies."""
    row_max = scores.max(axis=-1, keepdims=True)
    dead = np.isneginf(row_max)
    row_max[dead] = 0
    scores -= row_max
    np.exp(scores, out=scores)
    total = scores.sum(axis=-1, keepdims=True)
    total[dead] = 1
    scores /= total
    return scores


@kernel("Attention", output_count=True)
def attention(
    q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, *, xp, is_causal, kv_num_heads,
    left_window_size, q_num_heads, qk_matmul_output_mode, right_window_size, scale, softcap, softmax_precision,
    n_outputs=4,
):
    if _is_plain(q, k, v, attn_mask, past_key, nonpad_kv_seqlen, is_causal=is_causal, left=left_window_size,
                 right=right_window_size, softcap=softcap, precision=softmax_precision, n_outputs=n_outputs):
        return _plain_attention(q, k, v, attn_mask, scale)
    three_d = q.ndim == 3
    if three_d:
        q, k, v = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
    dtype = q.dtype
    if past_key is not None:
        k = xp.concatenate((past_key, k), axis=2)
        v = xp.concatenate((past_value, v), axis=2)
    present_key, present_value = k, v
    batch, hq, q_len, head = q.shape
    kv_len = k.shape[2]
    if k.shape[1] != hq:  # grouped-query attention: each kv head serves hq / hkv query heads
        reps = hq // k.shape[1]
        k, v = xp.repeat(k, reps, axis=1), xp.repeat(v, reps, axis=1)
    offset = _query_offset(xp, past_key, nonpad_kv_seqlen, q_len)
    # No mask, window or padding: no bias to build and add (on a GPU, several passes over the scores)
    unbiased = (attn_mask is None and not is_causal and left_window_size < 0 and right_window_size < 0
                and nonpad_kv_seqlen is None)
    bias = None if unbiased else _attention_bias(
        xp, dtype, q_len, kv_len, batch, mask=attn_mask, is_causal=is_causal, offset=offset,
        left=left_window_size, right=right_window_size, nonpad=nonpad_kv_seqlen,
    )
    factor = dtype.type(math.sqrt(1 / math.sqrt(head) if scale is None else scale))
    # astype: numpy's matmul widens bfloat16 to float32, ONNX keeps the input type.
    scores = xp.matmul(q * factor, (k * factor).transpose(0, 1, 3, 2)).astype(dtype, copy=False)
    if softcap > 0:
        scores = xp.tanh(scores / dtype.type(softcap)) * dtype.type(softcap)
    biased = scores if bias is None else scores + bias
    precision = _ONNX_FLOAT_DTYPES.get(softmax_precision, dtype) if softmax_precision else dtype
    logits = biased.astype(precision, copy=False)
    probs = _softmax_rows(logits, xp)
    if bias is not None:
        # A row with no allowed key yields zeros, not NaN (0/0).
        probs = xp.where(xp.isneginf(bias.max(axis=-1, keepdims=True)), xp.zeros((), dtype=probs.dtype), probs)
    probs = probs.astype(dtype, copy=False)
    y = xp.matmul(probs, v).astype(dtype, copy=False)
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(batch, q_len, -1)
    qk = {2: biased, 3: probs}.get(qk_matmul_output_mode, scores)
    return y, present_key, present_value, qk.astype(dtype)


def _softmax_rows(logits, xp):
    """Softmax over the last axis, each row shifted by its maximum; a row of -inf gives zeros, not NaN."""
    row_max = logits.max(axis=-1, keepdims=True)
    e = xp.exp(logits - xp.where(xp.isneginf(row_max), xp.zeros((), dtype=logits.dtype), row_max))
    total = e.sum(axis=-1, keepdims=True)
    return e / xp.where(total == 0, xp.ones((), dtype=total.dtype), total)


# ------------------------------------------------------------------------- LinearAttention


@kernel("LinearAttention")
def linear_attention(
    query, key, value, past_state, decay, beta, *, xp, chunk_size, kv_num_heads, q_num_heads, scale, update_rule,
):
    """The recurrence token by token, as the spec defines it (``chunk_size`` is a tuning hint for
    chunk-parallel GPU kernels; the result does not depend on it). Each step is a few batched
    products over all (batch, key/value head) pairs; a group of query heads reads its shared
    state as the rows of one product, so grouped-query attention repeats no state. Accumulates in
    float32 (float64 for float64 inputs), as ONNX's reference does."""
    batch, steps, d_k, d_v = _linear_attention_dims(query, key, value, decay, beta, q_num_heads, kv_num_heads,
                                                    update_rule)
    wide = xp.float64 if query.dtype == xp.float64 else xp.float32
    group = q_num_heads // kv_num_heads
    # Time-major, so that step t reads one contiguous (B, H_kv, ...) block of each input.
    q = _time_major(query, (kv_num_heads, group, d_k), xp, wide)  # (T, B, H_kv, G, d_k)
    k = _time_major(key, (kv_num_heads, d_k), xp, wide)
    v = _time_major(value, (kv_num_heads, d_v), xp, wide)
    # decay as kept fractions, (T, B, H_kv, d_k or 1, 1); beta as (T, B, H_kv or 1, 1)
    kept = None if decay is None else xp.exp(_time_major(decay, (kv_num_heads, -1, 1), xp, wide))
    rate = None if beta is None else _time_major(beta, (-1, 1), xp, wide)
    state_shape = (batch, kv_num_heads, d_k, d_v)
    if past_state is None:
        state = xp.zeros(state_shape, dtype=wide)
    elif tuple(past_state.shape) != state_shape:
        raise ValueError(f"LinearAttention: past_state must have shape {state_shape} (B, kv_num_heads, d_k, d_v), "
                         f"got {tuple(past_state.shape)}")
    else:
        state = past_state.astype(wide)  # a copy: the loop updates it in place
    out = xp.empty((steps, batch, kv_num_heads, group, d_v), dtype=wide)
    for t in range(steps):
        if kept is not None:
            state *= kept[t]
        update = v[t]
        if rate is not None:  # beta * (v - Sᵀk): what the state already recalls for k, corrected towards v
            update = rate[t] * (update - xp.matmul(k[t][:, :, None, :], state)[:, :, 0, :])
        state += k[t][..., :, None] * update[..., None, :]
        xp.matmul(q[t], state, out=out[t])
    factor = 1 / math.sqrt(d_k) if scale == 0 else scale
    output = (out * wide(factor)).transpose(1, 0, 2, 3, 4).reshape(batch, steps, q_num_heads * d_v)
    state_dtype = query.dtype if past_state is None else past_state.dtype
    return output.astype(query.dtype), state.astype(state_dtype, copy=False)


def _linear_attention_dims(query, key, value, decay, beta, q_num_heads, kv_num_heads, update_rule):
    """(B, T, d_k, d_v) of a LinearAttention node, every input and attribute checked against them."""
    if update_rule not in LINEAR_ATTENTION_RULES:
        raise ValueError(f"LinearAttention: update_rule must be one of {tuple(LINEAR_ATTENTION_RULES)}, "
                         f"got {update_rule!r}")
    if q_num_heads <= 0 or kv_num_heads <= 0 or q_num_heads % kv_num_heads:
        raise ValueError(f"LinearAttention: q_num_heads ({q_num_heads}) must be a positive multiple of "
                         f"kv_num_heads ({kv_num_heads})")
    for name, given, needed in zip(("decay", "beta"), (decay is not None, beta is not None),
                                   LINEAR_ATTENTION_RULES[update_rule]):
        if given != needed:
            raise ValueError(f"LinearAttention: update_rule {update_rule!r} "
                             f"{'requires' if needed else 'takes no'} {name} input")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if t.ndim != 3 or t.shape[:2] != query.shape[:2]:
            raise ValueError(f"LinearAttention: {name} must be (B, T, H * D) with query's (B, T) = "
                             f"{query.shape[:2]}, got shape {t.shape}")
    batch, steps = query.shape[:2]
    d_k, d_v = _head_size("query", query, q_num_heads), _head_size("value", value, kv_num_heads)
    if key.shape[2] != kv_num_heads * d_k:
        raise ValueError(f"LinearAttention: key's last dimension must be kv_num_heads * d_k = "
                         f"{kv_num_heads * d_k}, got shape {key.shape}")
    if decay is not None and (decay.ndim != 3 or decay.shape[:2] != (batch, steps)
                              or decay.shape[2] not in (kv_num_heads, kv_num_heads * d_k)):
        raise ValueError(f"LinearAttention: decay must be (B, T, kv_num_heads) or (B, T, kv_num_heads * d_k) = "
                         f"({batch}, {steps}, {kv_num_heads}) or ({batch}, {steps}, {kv_num_heads * d_k}), "
                         f"got shape {decay.shape}")
    if beta is not None and (beta.ndim != 3 or beta.shape[:2] != (batch, steps)
                             or beta.shape[2] not in (kv_num_heads, 1)):
        raise ValueError(f"LinearAttention: beta must be (B, T, kv_num_heads) or (B, T, 1), got shape {beta.shape}")
    return batch, steps, d_k, d_v


def _head_size(name, packed, heads):
    if packed.shape[2] % heads:
        raise ValueError(f"LinearAttention: {name}'s last dimension {packed.shape[2]} does not split into "
                         f"{heads} heads")
    return packed.shape[2] // heads


def _time_major(packed, head_shape, xp, dtype):
    """(B, T, H * D) -> (T, B, *head_shape) in ``dtype``, contiguous."""
    batch, steps = packed.shape[:2]
    heads = packed.reshape(batch, steps, *head_shape)
    return xp.ascontiguousarray(xp.moveaxis(heads, 1, 0), dtype=dtype)


# --------------------------------------------------------------------------- FlexAttention


@kernel("FlexAttention", domain="ai.onnx.preview")
def flex_attention(q, k, v, *, xp, prob_mod, scale, score_mod, softmax_precision):
    """Attention whose scores and probabilities pass through the node's own subgraphs (masks, biases,
    soft caps), run by the runtime as Loop runs its body. Q and K are each scaled by sqrt(scale) in
    the input type, then the scores are widened to the softmax precision (float32 for 16-bit
    inputs), as ONNX's reference does. A group of query heads sharing a key/value head is one
    product against it, as in Attention: no repeated copy of K and V."""
    for name, t in (("Q", q), ("K", k), ("V", v)):
        if t.ndim != 4:
            raise ValueError(f"FlexAttention: {name} must be rank 4 (batch, heads, sequence, head size), "
                             f"got shape {t.shape}")
    batch, q_heads, length, head = q.shape
    kv_heads, kv_length = k.shape[1], k.shape[2]
    if k.shape[0] != batch or v.shape[0] != batch or k.shape[3] != head or v.shape[1:3] != k.shape[1:3]:
        raise ValueError(f"FlexAttention: K must be (batch, kv_heads, kv_length, {head}) and V (batch, kv_heads, "
                         f"kv_length, v_head_size) with Q's batch {batch}; got K {k.shape}, V {v.shape}")
    if q_heads % kv_heads:
        raise ValueError(f"FlexAttention: Q's {q_heads} heads are not a multiple of K and V's {kv_heads}")
    if softmax_precision is None:
        precision = q.dtype if q.dtype.kind == "f" and q.dtype.itemsize >= 4 else np.dtype(np.float32)
    elif softmax_precision in _ONNX_FLOAT_DTYPES:
        precision = np.dtype(_ONNX_FLOAT_DTYPES[softmax_precision])
    else:
        raise ValueError(f"FlexAttention: softmax_precision must be one of {sorted(_ONNX_FLOAT_DTYPES)} "
                         f"(an ONNX float type), got {softmax_precision}")
    root = q.dtype.type(math.sqrt(np.float32(1 / math.sqrt(head) if scale is None else scale)))
    grouped = (q * root).reshape(batch, kv_heads, -1, head)  # (B, H_kv, G * L, E)
    scores = xp.matmul(grouped, (k * root).transpose(0, 1, 3, 2)).astype(q.dtype, copy=False)
    scores = scores.reshape(batch, q_heads, length, kv_length).astype(precision)
    if score_mod is not None:
        scores = _modified("score_mod", score_mod, scores, xp)
    probs = _softmax_rows(scores, xp)
    if prob_mod is not None:
        probs = _modified("prob_mod", prob_mod, probs, xp)
    y = xp.matmul(probs.reshape(batch, kv_heads, -1, kv_length), v.astype(precision, copy=False))
    return y.reshape(batch, q_heads, length, v.shape[3]).astype(v.dtype, copy=False)


def _modified(which, graph, values, xp):
    """``graph``'s one output for ``values``, checked to keep their shape, in their type."""
    outs = graph(values)
    if len(outs) != 1:
        raise ValueError(f"FlexAttention: {which} returned {len(outs)} values; it must return one")
    out = xp.asarray(outs[0])
    if out.shape != values.shape:
        raise ValueError(f"FlexAttention: {which} returned shape {out.shape} for input shape {values.shape}; "
                         f"it must keep the shape")
    return out.astype(values.dtype, copy=False)


@kernel("RotaryEmbedding")
def rotary_embedding(x, cos_cache, sin_cache, position_ids, *, xp, interleaved, num_heads, rotary_embedding_dim):
    if _rotates_whole_heads(x, cos_cache, position_ids, interleaved, rotary_embedding_dim):
        return _rotate_heads(x, cos_cache, sin_cache)
    shape = x.shape
    if x.ndim == 4:  # (B, H, S, D) -> (B, S, H, D)
        t = x.transpose(0, 2, 1, 3)
    else:
        t = x.reshape(shape[0], shape[1], num_heads, shape[2] // num_heads)
    dim = rotary_embedding_dim or t.shape[3]
    rot, rest = t[..., :dim], t[..., dim:]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    cos = xp.expand_dims(cos_cache, 2)  # (B, S, 1, dim/2)
    sin = xp.expand_dims(sin_cache, 2)
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
    else:
        x1, x2 = rot[..., : dim // 2], rot[..., dim // 2 :]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        rotated = xp.stack((real, imag), axis=-1).reshape(rot.shape)
    else:
        rotated = xp.concatenate((real, imag), axis=-1)
    out = xp.concatenate((rotated.astype(x.dtype), rest), axis=-1)
    if x.ndim == 4:
        return xp.ascontiguousarray(out.transpose(0, 2, 1, 3))
    return out.reshape(shape)


def _rotates_whole_heads(x, cos_cache, position_ids, interleaved, rotary_embedding_dim) -> bool:
    """Whether the node rotates whole (B, H, S, D) NumPy heads by (B, S, D / 2) caches, non-interleaved:
    transformers' Llama-style rotary embedding, which ``_rotate_heads`` computes."""
    if not isinstance(x, np.ndarray) or x.ndim != 4 or interleaved or position_ids is not None:
        return False
    if x.dtype.kind != "f" or cos_cache.ndim != 3 or 2 * cos_cache.shape[-1] != x.shape[-1]:
        return False
    return rotary_embedding_dim in (0, x.shape[-1])


def _rotate_heads(x, cos_cache, sin_cache):
    """x * [cos, cos] + [x2, x1] * [-sin, sin] over x's halves x1, x2, walked in x's memory order (the
    heads arrive as a transposed (B, S, H, D) view) so that every pass runs along whole heads: a
    Llama-style Q of 8 heads, 64 tokens, 24 us where the halves' products take 44 and the
    exported chain of Slices, Neg, Concat, Muls and Add about 60. The result has x's layout."""
    half = cos_cache.shape[-1]
    order = sorted(range(3), key=lambda axis: -x.strides[axis])
    inverse = sorted(range(3), key=order.__getitem__)
    cos = np.concatenate([cos_cache, cos_cache], axis=-1).astype(x.dtype, copy=False)[:, None]  # (B, 1, S, D)
    sin = np.concatenate([-sin_cache, sin_cache], axis=-1).astype(x.dtype, copy=False)[:, None]
    x = x.transpose(*order, 3)
    out = np.multiply(x, cos.transpose(*order, 3))
    swapped = np.empty_like(out)
    swapped[..., :half] = x[..., half:]
    swapped[..., half:] = x[..., :half]
    swapped *= sin.transpose(*order, 3)
    out += swapped
    return out.transpose(*inverse, 3)


# -------------------------------------------------------------------------------------- Resize


@kernel("ResizeGrad", domain="flowstack")
def resize_grad(
    dy, x, roi, scales, sizes, *, xp, antialias, axes, coordinate_transformation_mode, cubic_coeff_a,
    exclude_outside, extrapolation_value, keep_aspect_ratio_policy, mode, nearest_mode,
):
    dx = resampling.resize_adjoint(
        dy, x.shape, xp, scales=_given(scales), sizes=_given(sizes), roi=_given(roi), axes=axes, mode=mode,
        coordinate_transformation_mode=coordinate_transformation_mode, nearest_mode=nearest_mode,
        cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside, antialias=antialias,
        keep_aspect_ratio_policy=keep_aspect_ratio_policy,
    )
    return xp.ascontiguousarray(dx.astype(x.dtype))


# ---------------------------------------------------------------------------------- GridSample


def _pixel_coord(norm, size, align_corners):
    """The pixel coordinate of normalized grid values (as GridSample maps them), and its slope."""
    if align_corners:
        return (norm + 1) / 2 * (size - 1), (size - 1) / 2
    return ((norm + 1) * size - 1) / 2, size / 2


def _padded(xp, coord, size, align_corners, padding_mode):
    """The coordinate after the padding mode folds it inside (as the taps see it), and its slope."""
    lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
    if padding_mode == "border":
        inside = (coord >= lo) & (coord <= hi)  # beyond, the clipped coordinate is constant
        return _clip_beyond(xp, coord, lo, hi, size), inside.astype(xp.float64)
    if padding_mode == "reflection":
        outside = (coord < lo) | (coord > hi)
        folds = xp.trunc(xp.where(coord < lo, lo - coord, coord - hi) / (hi - lo))
        return _reflect(xp, coord, lo, hi), xp.where(outside & (folds % 2 == 0), -1.0, 1.0)
    return coord, xp.ones_like(coord)


def _weight_slopes(xp, coord, mode):
    """d(weight)/d(coordinate) for the linear or cubic taps of ``_grid_taps``, in its order."""
    f = coord - xp.floor(coord)
    if mode == "linear":
        return [-xp.ones_like(f), xp.ones_like(f)]
    a = -0.75

    def near(d):
        return (3 * (a + 2) * d - 2 * (a + 3)) * d

    def far(d):
        return (3 * a * d - 10 * a) * d + 8 * a

    return [far(f + 1), near(f), -near(1 - f), -far(2 - f)]


@kernel("GridSampleGrad", domain="flowstack")
def grid_sample_grad(dy, x, grid, *, xp, align_corners, mode, padding_mode):
    """dX scatter-adds dY with each tap's weight; dgrid sums dY * X(tap) * d(weight)/d(grid).

    Nearest sampling is piecewise constant in the grid, so its grid gradient is zero.
    """
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    nd = len(spatial)
    g = grid.reshape(n, -1, nd).astype(xp.float64)
    p = g.shape[1]
    dy = dy.reshape(n, c, p).astype(xp.float64)
    flat_x = x.reshape(n, c, -1).astype(xp.float64)
    per_dim = []
    for d, size in enumerate(spatial):
        coord, scale = _pixel_coord(g[..., nd - 1 - d], size, align_corners)  # the grid lists x first
        taps = _grid_taps(xp, coord, size, mode, align_corners, padding_mode)
        if mode == "nearest":
            slopes = [None] * len(taps)
        else:
            padded, fold = _padded(xp, coord, size, align_corners, padding_mode)
            slopes = [s * fold * scale for s in _weight_slopes(xp, padded, mode)]
        per_dim.append([(index, xp.where(valid, w, 0.0), None if s is None else xp.where(valid, s, 0.0))
                        for (index, w, valid), s in zip(taps, slopes)])
    first_pixel = (xp.arange(n) * math.prod(spatial)).reshape(n, 1)
    targets, shares = [], []
    dgrid = xp.zeros((n, p, nd), dtype=xp.float64)
    for combo in product(*per_dim):
        flat = xp.zeros((n, p), dtype=xp.int64)
        weight = xp.ones((n, p), dtype=xp.float64)
        for (index, w, _), size in zip(combo, spatial):
            flat = flat * size + index
            weight = weight * w
        targets.append((first_pixel + flat).reshape(-1))
        shares.append((dy * weight[:, None, :]).transpose(0, 2, 1).reshape(-1, c))
        if mode == "nearest":
            continue
        along = (dy * xp.take_along_axis(flat_x, flat[:, None, :], axis=2)).sum(axis=1)
        for d in range(nd):
            term = along * combo[d][2]
            for e in range(nd):
                if e != d:
                    term = term * combo[e][1]
            dgrid[..., nd - 1 - d] += term
    dx = xp.zeros((n * math.prod(spatial), c), dtype=xp.float64)
    xp.add.at(dx, xp.concatenate(targets), xp.concatenate(shares))
    dx = dx.reshape(n, -1, c).transpose(0, 2, 1).reshape(x.shape)
    return xp.ascontiguousarray(dx).astype(x.dtype), dgrid.reshape(grid.shape).astype(grid.dtype)


# ----------------------------------------------------------------------------------- Attention


def _masked_softmax(xp, logits, bias):
    """Softmax over the last axis; rows the bias disallows entirely give zeros (as Attention)."""
    row_max = logits.max(axis=-1, keepdims=True)
    e = xp.exp(logits - xp.where(xp.isneginf(row_max), 0.0, row_max))
    total = e.sum(axis=-1, keepdims=True)
    probs = e / xp.where(total == 0, 1.0, total)
    return xp.where(xp.isneginf(bias.max(axis=-1, keepdims=True)), 0.0, probs)


def _sum_to(t, shape):
    """Sum a broadcast result back down to ``shape``."""
    t = t.sum(axis=tuple(range(t.ndim - len(shape))))
    return t.sum(axis=tuple(i for i, s in enumerate(shape) if s == 1 and t.shape[i] != 1), keepdims=True)


def _merge_heads(t):
    """(B, H, S, D) -> (B, S, H*D), the inverse of ``_heads``."""
    b, h, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, h * d)


@kernel("AttentionGrad", domain="flowstack")
def attention_grad(
    dy, dpresent_key, dpresent_value, dqk, q, k, v, attn_mask, past_key, past_value, nonpad_kv_seqlen, *, xp,
    is_causal, kv_num_heads, left_window_size, q_num_heads, qk_matmul_output_mode, right_window_size, scale,
    softcap, softmax_precision,
):
    """Recompute the attention probabilities, then backpropagate through P @ V, the softmax, the
    soft cap and the scaled Q @ K^T; grouped kv heads sum the gradients of the query heads they serve.

    The softmax is recomputed in float64 whatever ``softmax_precision`` asks for.
    """
    f64 = xp.float64
    three_d = q.ndim == 3
    q4, k4, v4, dy4 = q, k, v, dy
    if three_d:
        q4, k4, v4 = _heads(q, q_num_heads), _heads(k, kv_num_heads), _heads(v, kv_num_heads)
        dy4 = _heads(dy, q_num_heads)
    q4, k4, v4, dy4 = (t.astype(f64) for t in (q4, k4, v4, dy4))
    past = 0
    if past_key is not None:
        past = past_key.shape[2]
        k4 = xp.concatenate((past_key.astype(f64), k4), axis=2)
        v4 = xp.concatenate((past_value.astype(f64), v4), axis=2)
    batch, hq, q_len, head = q4.shape
    hkv, kv_len = k4.shape[1], k4.shape[2]
    reps = hq // hkv
    kr, vr = xp.repeat(k4, reps, axis=1), xp.repeat(v4, reps, axis=1)
    offset = _query_offset(xp, past_key, nonpad_kv_seqlen, q_len)
    bias = _attention_bias(
        xp, f64, q_len, kv_len, batch, mask=attn_mask, is_causal=is_causal, offset=offset,
        left=left_window_size, right=right_window_size, nonpad=nonpad_kv_seqlen,
    )
    factor = 1 / math.sqrt(head) if scale is None else scale
    raw = xp.matmul(q4, kr.transpose(0, 1, 3, 2)) * factor
    scores = xp.tanh(raw / softcap) * softcap if softcap > 0 else raw
    probs = _masked_softmax(xp, scores + bias, bias)
    # qk_matmul_output returns the scores (modes 0, 1), the biased scores (2) or the probabilities (3).
    stage = {2: "biased", 3: "probs"}.get(qk_matmul_output_mode, "scores")
    extra = {stage: dqk.astype(f64)} if dqk is not None else {}

    dprobs = xp.matmul(dy4, vr.transpose(0, 1, 3, 2)) + extra.get("probs", 0.0)
    dvr = xp.matmul(probs.transpose(0, 1, 3, 2), dy4)
    dbiased = probs * (dprobs - (dprobs * probs).sum(axis=-1, keepdims=True)) + extra.get("biased", 0.0)
    dscores = dbiased + extra.get("scores", 0.0)
    draw = dscores * (1 - xp.tanh(raw / softcap) ** 2) if softcap > 0 else dscores
    dq4 = xp.matmul(draw, kr) * factor
    dk4 = xp.matmul(draw.transpose(0, 1, 3, 2), q4) * factor
    dk4 = dk4.reshape(batch, hkv, reps, kv_len, head).sum(axis=2)
    dv4 = dvr.reshape(batch, hkv, reps, kv_len, dvr.shape[-1]).sum(axis=2)
    if dpresent_key is not None:
        dk4 = dk4 + dpresent_key
    if dpresent_value is not None:
        dv4 = dv4 + dpresent_value
    dpast_key = dk4[:, :, :past].astype(past_key.dtype) if past_key is not None else None
    dpast_value = dv4[:, :, :past].astype(past_value.dtype) if past_value is not None else None
    dk4, dv4 = dk4[:, :, past:], dv4[:, :, past:]
    if three_d:
        dq4, dk4, dv4 = _merge_heads(dq4), _merge_heads(dk4), _merge_heads(dv4)
    dmask = None
    if attn_mask is not None and attn_mask.dtype != bool:
        padded = attn_mask.shape[:-1] + (kv_len,)
        dmask = _sum_to(dbiased, padded)
        dmask = xp.ascontiguousarray(dmask[..., : attn_mask.shape[-1]]).astype(attn_mask.dtype)
    return (
        xp.ascontiguousarray(dq4).astype(q.dtype), xp.ascontiguousarray(dk4).astype(k.dtype),
        xp.ascontiguousarray(dv4).astype(v.dtype), dmask,
        None if dpast_key is None else xp.ascontiguousarray(dpast_key),
        None if dpast_value is None else xp.ascontiguousarray(dpast_value),
    )
