"""Gradient helper kernels for convolution, pooling, normalization, resampling and attention.

They reuse the edge runtime's sliding-window machinery (``sliding_windows``): a convolution's filter
gradient is one matmul against the im2col columns, its input gradient one matmul followed by a
col2im scatter-add; pooling gradients route ``dY`` to window taps and scatter-add them back.
ResizeGrad, GridSampleGrad and AttentionGrad recompute what they need of the forward pass with
the forward kernel's own helpers (the resampling plan, GridSample's taps, Attention's bias), so
forward and gradient cannot disagree on conventions, then apply the transpose.
"""

from __future__ import annotations

import math
from itertools import product

from edge_runtime.kernels import resampling, sliding_windows
from edge_runtime.kernels import kernel
from edge_runtime.kernels.nn import (
    attention_bias,
    clip_beyond,
    grid_taps,
    optional_values,
    pool_window,
    query_offset,
    reflect_into,
    split_heads,
    window_counts,
)
from trainer.kernels.math import sum_to_shape

D = "flowstack"


def _conv_window(x, w, auto_pad, dilations, kernel_shape, pads, strides):
    kernel = tuple(kernel_shape or w.shape[2:])
    return sliding_windows.resolve_window(x.shape[2:], kernel, strides, dilations, pads, auto_pad)


def _crop(y, win, spatial):
    return y[(slice(None), slice(None)) + tuple(slice(b, b + s) for b, s in zip(win.pad_begin, spatial))]


# Convolution gradients work through the batch a few examples at a time (sliding_windows.batch_chunks):
# their column matrices (9x the activations for a 3x3 kernel) then stay in cache and are written
# into one reused buffer instead of a fresh allocation each step, whose page faults cost as much
# as the copy itself (ConvBackpropInput of the benchmark CNN's second conv: 33 ms in the step,
# 18 ms alone).
@kernel("ConvBackpropFilter", domain=D)
def conv_backprop_filter(dy, x, w, *, xp, auto_pad, dilations, group, kernel_shape, pads, strides):
    win = _conv_window(x, w, auto_pad, dilations, kernel_shape, pads, strides)
    n, c = x.shape[:2]
    m, g = dy.shape[1], group
    n_sp = len(win.kernel)
    k, p = math.prod(win.kernel), math.prod(win.out)
    xpad = sliding_windows.pad_spatial(x, xp, win.pad_begin, win.pad_end)
    order = (0, 1) + tuple(range(2 + n_sp, 2 + 2 * n_sp)) + tuple(range(2, 2 + n_sp))
    view = sliding_windows.windows(xpad, xp, win).transpose(order)  # (N, C, k..., out...)
    d2 = dy.reshape(n, g, m // g, p)
    dw = xp.zeros((g, m // g, (c // g) * k), dtype=dy.dtype)
    spans = sliding_windows.batch_chunks(n, c * k * p * x.itemsize, xp)
    buf = xp.empty((spans[0][1],) + view.shape[1:], dtype=x.dtype)
    for s, e in spans:
        cols = buf[: e - s]
        xp.copyto(cols, view[s:e])  # im2col
        # One GEMM per example against the transposed columns (a view BLAS reads directly).
        dw += xp.matmul(d2[s:e], cols.reshape(e - s, g, (c // g) * k, p).transpose(0, 1, 3, 2)).sum(axis=0)
    return dw.reshape(w.shape).astype(w.dtype, copy=False)


@kernel("ConvBackpropInput", domain=D)
def conv_backprop_input(dy, w, x, *, xp, auto_pad, dilations, group, kernel_shape, pads, strides):
    win = _conv_window(x, w, auto_pad, dilations, kernel_shape, pads, strides)
    n, m = dy.shape[:2]
    c, g = x.shape[1], group
    k = math.prod(win.kernel)
    wg = xp.ascontiguousarray(w.reshape(g, m // g, (c // g) * k).transpose(0, 2, 1))  # (G, C/G*K, M/G)
    if any(s != 1 for s in win.strides):
        dcols = xp.matmul(wg, dy.reshape(n, g, m // g, -1))  # (N, G, C/G*K, P)
        dcols = dcols.reshape((n, c, k) + win.out)
        padded = tuple(s + b + e for s, b, e in zip(x.shape[2:], win.pad_begin, win.pad_end))
        padded = tuple(max(p, (o - 1) * st + (kk - 1) * d + 1) for p, o, st, kk, d in
                       zip(padded, win.out, win.strides, win.kernel, win.dilations))
        full = sliding_windows.col2im(dcols, xp, win, padded)
        return xp.ascontiguousarray(_crop(full, win, x.shape[2:]))
    # Stride 1: lay dY out on the rows of the padded input (zeros past each row's end), so every
    # kernel tap's columns land on one contiguous run of the flattened padded input: col2im becomes
    # one contiguous add per tap instead of a strided add over short rows.
    padded = tuple(s + b + e for s, b, e in zip(x.shape[2:], win.pad_begin, win.pad_end))
    row = [math.prod(padded[i + 1:]) for i in range(len(padded))]
    offsets = [sum(t * d * r for t, d, r in zip(tap, win.dilations, row))
               for tap in product(*(range(kk) for kk in win.kernel))]
    length = win.out[0] * row[0]
    dyp = xp.zeros((n, m, win.out[0]) + padded[1:], dtype=dy.dtype)
    dyp[(slice(None),) * 3 + tuple(slice(0, o) for o in win.out[1:])] = dy
    dyp = dyp.reshape(n, g, m // g, length)
    total = math.prod(padded)
    out = xp.zeros((n, c, total + offsets[-1]), dtype=dy.dtype)
    spans = sliding_windows.batch_chunks(n, c * k * length * dy.itemsize, xp)
    buf = xp.empty((spans[0][1], c, k, length), dtype=dy.dtype)
    for s, e in spans:
        cols = buf[: e - s]
        xp.matmul(wg, dyp[s:e], out=cols.reshape(e - s, g, (c // g) * k, length))
        for t, off in enumerate(offsets):
            out[s:e, :, off:off + length] += cols[:, :, t]
    full = out[:, :, :total].reshape((n, c) + padded)
    return xp.ascontiguousarray(_crop(full, win, x.shape[2:]))


def _padded_shape(x, win):
    return tuple(s + b + e for s, b, e in zip(x.shape[2:], win.pad_begin, win.padded_end))


@kernel("MaxPoolGrad", domain=D)
def max_pool_grad(dy, x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order, strides,
                  count_include_pad):
    # One pass per kernel tap over strided views of the (padded) input, never materializing the
    # windows: find each window's first maximum, then route dY to it.
    win = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    low = -xp.inf if x.dtype.kind == "f" else xp.iinfo(x.dtype).min
    xpad = sliding_windows.pad_spatial(x, xp, win.pad_begin, win.padded_end, low)
    lead = (slice(None), slice(None))
    taps = [lead + sliding_windows.offset_slices(win, off) for off in product(*(range(k) for k in win.kernel))]
    best = xpad[taps[0]]
    for sl in taps[1:]:
        best = xp.maximum(best, xpad[sl])
    # Route dY to the first tap attaining the maximum (as argmax would). Masks are applied by
    # multiplication: np.where is several times slower on these strided views.
    out = xp.zeros(xpad.shape, dtype=dy.dtype)
    # Windows that cannot overlap (stride >= extent) write each tap's share straight into its
    # positions: a quarter of the memory traffic of adding a temporary.
    disjoint = all(s >= e for s, e in zip(win.strides, win.effective))
    taken = None
    for sl in taps:
        hit = xpad[sl] == best
        if taken is None:
            taken = hit
        else:
            hit &= ~taken
            taken |= hit
        if disjoint:
            xp.multiply(dy, hit, out=out[sl])
        else:
            out[sl] += dy * hit
    return xp.ascontiguousarray(_crop(out, win, x.shape[2:]))


@kernel("AveragePoolGrad", domain=D)
def average_pool_grad(dy, x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order, strides,
                      count_include_pad):
    win = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    share = dy / window_counts(x, xp, win, include_pad=count_include_pad)  # (N, C, out...)
    k = math.prod(win.kernel)
    cols = xp.broadcast_to(share[:, :, None], share.shape[:2] + (k,) + share.shape[2:])
    full = sliding_windows.col2im(xp.ascontiguousarray(cols), xp, win, _padded_shape(x, win))
    return xp.ascontiguousarray(_crop(full, win, x.shape[2:]))


def _channel(v, ndim):
    return v.reshape((1, -1) + (1,) * (ndim - 2))


@kernel("BatchNormTraining", domain=D)
def batch_norm_training(x, scale, b, *, xp, epsilon):
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.mean(axis=axes)
    xc = x - _channel(mean, x.ndim)
    var = (xc * xc).mean(axis=axes)
    inv_std = (1 / xp.sqrt(var + x.dtype.type(epsilon))).astype(x.dtype)
    y = xc * _channel(inv_std * scale, x.ndim) + _channel(b, x.ndim)
    return y, mean, var, inv_std


@kernel("BatchNormTrainingGrad", domain=D)
def batch_norm_training_grad(dy, x, scale, mean, inv_std, *, xp):
    axes = (0,) + tuple(range(2, x.ndim))
    m = x.size // x.shape[1]
    xhat = (x - _channel(mean, x.ndim)) * _channel(inv_std, x.ndim)
    db = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    dx = _channel(scale * inv_std / m, x.ndim) * (m * dy - _channel(db, x.ndim) - xhat * _channel(dscale, x.ndim))
    return dx.astype(x.dtype, copy=False), dscale, db


@kernel("LayerNormGrad", domain=D)
def layer_norm_grad(dy, x, scale, *, xp, axis, epsilon):
    axis = axis % x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    xc = x - mean
    inv_std = 1 / xp.sqrt((xc * xc).mean(axis=axes, keepdims=True) + x.dtype.type(epsilon))
    xhat = xc * inv_std
    # scale may be any shape that broadcasts against X: sum its gradient (and dB, shaped like it) back.
    db = sum_to_shape(dy, scale.shape, xp)
    dscale = sum_to_shape(dy * xhat, scale.shape, xp)
    g = dy * scale
    m = math.prod(x.shape[axis:])
    dx = inv_std / m * (m * g - g.sum(axis=axes, keepdims=True) - xhat * (g * xhat).sum(axis=axes, keepdims=True))
    return dx.astype(x.dtype, copy=False), dscale, db


# -------------------------------------------------------------------------------------- Resize


@kernel("ResizeGrad", domain=D)
def resize_grad(
    dy, x, roi, scales, sizes, *, xp, antialias, axes, coordinate_transformation_mode, cubic_coeff_a,
    exclude_outside, extrapolation_value, keep_aspect_ratio_policy, mode, nearest_mode,
):
    dx = resampling.resize_adjoint(
        dy, x.shape, xp, scales=optional_values(scales), sizes=optional_values(sizes), roi=optional_values(roi), axes=axes, mode=mode,
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
        return clip_beyond(xp, coord, lo, hi, size), inside.astype(xp.float64)
    if padding_mode == "reflection":
        outside = (coord < lo) | (coord > hi)
        folds = xp.trunc(xp.where(coord < lo, lo - coord, coord - hi) / (hi - lo))
        return reflect_into(xp, coord, lo, hi), xp.where(outside & (folds % 2 == 0), -1.0, 1.0)
    return coord, xp.ones_like(coord)


def _weight_slopes(xp, coord, mode):
    """d(weight)/d(coordinate) for the linear or cubic taps of ``grid_taps``, in its order."""
    f = coord - xp.floor(coord)
    if mode == "linear":
        return [-xp.ones_like(f), xp.ones_like(f)]
    a = -0.75

    def near(d):
        return (3 * (a + 2) * d - 2 * (a + 3)) * d

    def far(d):
        return (3 * a * d - 10 * a) * d + 8 * a

    return [far(f + 1), near(f), -near(1 - f), -far(2 - f)]


@kernel("GridSampleGrad", domain=D)
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
        taps = grid_taps(xp, coord, size, mode, align_corners, padding_mode)
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
    """(B, H, S, D) -> (B, S, H*D), the inverse of ``split_heads``."""
    b, h, s, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, s, h * d)


@kernel("AttentionGrad", domain=D)
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
        q4, k4, v4 = split_heads(q, q_num_heads), split_heads(k, kv_num_heads), split_heads(v, kv_num_heads)
        dy4 = split_heads(dy, q_num_heads)
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
    offset = query_offset(xp, past_key, nonpad_kv_seqlen, q_len)
    bias = attention_bias(
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
