"""Kernels of the gradient helper ops in ``schemas/ops/gradient_helpers.py`` (domain ``flowstack``).

Each recomputes what it needs of its op's forward pass with the forward kernel's own helpers (the
resampling plan, GridSample's taps, Attention's bias), so forward and gradient cannot disagree on
conventions, then applies the transpose: scatter-adds become ``add.at``, weight matrices their
transposes, softmax its Jacobian-vector product.
"""

from __future__ import annotations

import math
from itertools import product

from edge_runtime.kernels import _resize
from edge_runtime.kernels.nn import (
    _attention_bias,
    _clip_beyond,
    _given,
    _grid_taps,
    _heads,
    _query_offset,
    _reflect,
)
from edge_runtime.kernels.registry import kernel

D = "flowstack"


@kernel("MatrixInverse", domain=D)
def matrix_inverse(x, *, xp):
    return xp.linalg.inv(x)


# ------------------------------------------------------------------------------------- CumProd


def _backward_recurrence(xp, a, b):
    """s[k] = a[k] * s[k+1] + b[k] along the last axis (a[-1] = 0), in log2(n) vectorized steps.

    A Hillis-Steele scan over affine maps: after the step with stride ``d``, entry k holds the
    composition of the maps k .. k+2d-1; entries whose span reaches the end are final.
    """
    n = a.shape[-1]
    a, b = a[..., ::-1], b[..., ::-1]  # now s[m] = a[m] * s[m-1] + b[m], with a[0] = 0
    d = 1
    while d < n:
        b = xp.concatenate([b[..., :d], b[..., d:] + a[..., d:] * b[..., :-d]], axis=-1)
        a = xp.concatenate([a[..., :d], a[..., d:] * a[..., :-d]], axis=-1)
        d *= 2
    return b[..., ::-1]


@kernel("CumProdGrad", domain=D)
def cum_prod_grad(dy, x, axis, *, xp, exclusive, reverse):
    """dx[k] = (product of x before k) * sum over i >= k of dy[i] * (product of x over k+1..i).

    The right factor obeys s[k] = dy[k] + x[k+1] * s[k+1]; solving that recurrence never divides
    by x, so zeros in x are exact (dividing cumsum(dy * y) by x is not).
    """
    axis = int(axis) % x.ndim
    if x.shape[axis] == 0:
        return xp.zeros_like(x)
    g, v = xp.moveaxis(dy, axis, -1), xp.moveaxis(x, axis, -1)
    if reverse:
        g, v = g[..., ::-1], v[..., ::-1]
    one = xp.ones(v.shape[:-1] + (1,), dtype=v.dtype)
    if exclusive:  # y[i] is the inclusive product at i-1: its gradient arrives one step later
        g = xp.concatenate([g[..., 1:], xp.zeros_like(one)], axis=-1)
    before = xp.concatenate([one, xp.cumprod(v[..., :-1], axis=-1)], axis=-1)
    after = _backward_recurrence(xp, xp.concatenate([v[..., 1:], xp.zeros_like(one)], axis=-1), g)
    dx = before * after
    if reverse:
        dx = dx[..., ::-1]
    return xp.ascontiguousarray(xp.moveaxis(dx, -1, axis)).astype(x.dtype)


# -------------------------------------------------------------------------------------- Resize


@kernel("ResizeGrad", domain=D)
def resize_grad(
    dy, x, roi, scales, sizes, *, xp, antialias, axes, coordinate_transformation_mode, cubic_coeff_a,
    exclude_outside, extrapolation_value, keep_aspect_ratio_policy, mode, nearest_mode,
):
    dx = _resize.resize_adjoint(
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
