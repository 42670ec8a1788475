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


@kernel("Col2Im")
def col2im(x, image_shape, block_shape, *, xp, dilations, pads, strides):
    image = tuple(int(d) for d in image_shape.tolist())
    block = tuple(int(d) for d in block_shape.tolist())
    n_sp = len(image)
    win = _conv.resolve_window(image, block, strides, dilations, pads, "NOTSET")
    n = x.shape[0]
    c = x.shape[1] // math.prod(block)
    cols = x.reshape((n, c, math.prod(block)) + win.out)
    y = _conv.col2im(cols, xp, win, tuple(i + b + e for i, b, e in zip(image, win.pad_begin, win.pad_end)))
    crop = tuple(slice(b, b + i) for b, i in zip(win.pad_begin, image))
    return xp.ascontiguousarray(y[(slice(None), slice(None)) + crop])


# --------------------------------------------------------------------------------- normalization


def _compute_dtype(x, xp, stash_type=1):
    # stash_type=1 asks for float32 statistics: half-precision inputs are widened, doubles kept.
    if x.dtype.kind == "f" and x.dtype.itemsize < 4 and stash_type == 1:
        return xp.float32
    return x.dtype


def _normalize(x, axes, eps, xp, dtype):
    xc = x.astype(dtype, copy=False)
    mean = xc.mean(axis=axes, keepdims=True)
    diff = xc - mean
    var = (diff * diff).mean(axis=axes, keepdims=True)
    inv_std = 1 / xp.sqrt(var + xp.asarray(eps, dtype=dtype))
    return diff * inv_std, mean, inv_std


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
    inv = _channel(scale, x.ndim) / xp.sqrt(_channel(var, x.ndim) + eps)
    y = (x - _channel(mean, x.ndim)) * inv + _channel(b, x.ndim)
    return y.astype(x.dtype), mean, var


@kernel("LayerNormalization")
def layer_normalization(x, scale, b, *, xp, axis, epsilon, stash_type):
    axis = axis % x.ndim
    axes = tuple(range(axis, x.ndim))
    normed, mean, inv_std = _normalize(x, axes, epsilon, xp, _compute_dtype(x, xp, stash_type))
    y = normed * scale
    if b is not None:
        y = y + b
    return y.astype(x.dtype), mean.astype(x.dtype), inv_std.astype(x.dtype)


@kernel("InstanceNormalization")
def instance_normalization(x, scale, b, *, xp, epsilon):
    normed, _, _ = _normalize(x, _spatial_axes(x), epsilon, xp, _compute_dtype(x, xp))
    return (normed * _channel(scale, x.ndim) + _channel(b, x.ndim)).astype(x.dtype)


@kernel("GroupNormalization")
def group_normalization(x, scale, bias, *, xp, epsilon, num_groups, stash_type):
    n, c = x.shape[:2]
    grouped = x.reshape((n, num_groups, -1))
    normed, _, _ = _normalize(grouped, (2,), epsilon, xp, _compute_dtype(x, xp, stash_type))
    y = normed.reshape(x.shape) * _channel(scale, x.ndim) + _channel(bias, x.ndim)
    return y.astype(x.dtype)


@kernel("RMSNormalization")
def rms_normalization(x, scale, *, xp, axis, epsilon, stash_type):
    axes = tuple(range(axis % x.ndim, x.ndim))
    xc = x.astype(_compute_dtype(x, xp, stash_type), copy=False)
    ms = (xc * xc).mean(axis=axes, keepdims=True)
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
    mask = xp.random.RandomState(seed).uniform(0, 1.0, x.shape) >= ratio
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
