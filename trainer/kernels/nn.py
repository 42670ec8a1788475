"""Gradient helper kernels for convolution, pooling and normalization, and TensorFlow's CTC ops
(CTCLoss, which returns its logits gradient with the loss, and CTCGreedyDecoder).

They reuse the edge runtime's sliding-window machinery (``sliding_windows``): a convolution's filter
gradient is one matmul against the im2col columns, its input gradient one matmul followed by a
col2im scatter-add; pooling gradients route ``dY`` to window taps and scatter-add them back.
The gradient helpers of imported ONNX ops (ResizeGrad, GridSampleGrad, AttentionGrad) run on the
edge runtime too: their kernels sit with the forward kernels in ``edge_runtime/kernels/nn.py``.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np

from edge_runtime.kernels import sliding_windows
from edge_runtime.kernels import kernel
from edge_runtime.kernels.nn import pool_window, window_counts
from trainer.kernels.math import sum_to_shape
from trainer.kernels.random import op_generator
from trainer.kernels.registry import stateful_kernel

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


def _ctc_targets(values, collapse: bool) -> list[int]:
    labels = [int(v) for v in values]
    if collapse:
        labels = [v for i, v in enumerate(labels) if i == 0 or v != labels[i - 1]]
    return labels


def _shift(v, k: int, xp):
    """``v`` moved ``k`` places along (back for negative ``k``), -inf where nothing moved in."""
    out = xp.full_like(v, -np.inf)
    if abs(k) < len(v):
        if k > 0:
            out[k:] = v[:-k]
        else:
            out[:k] = v[-k:]
    return out


def _ctc_one(log_probs, labels: list[int], blank: int, merge: bool, xp):
    """CTC's forward-backward in log space for one example: (loss, d loss / d logits) of
    ``log_probs`` [T, C] and the target ``labels``."""
    steps = log_probs.shape[0]
    ext = xp.full(2 * len(labels) + 1, blank, dtype=np.int64)
    ext[1::2] = labels
    size = len(ext)
    # Transitions into s: from s (unless an unmerged label repeats), s - 1, and s - 2 past a blank
    # between two different labels.
    stay = xp.asarray([merge or e == blank for e in ext.tolist()])
    skip = xp.asarray([s > 1 and ext[s] != blank and ext[s] != ext[s - 2] for s in range(size)])
    emit = log_probs[:, ext]  # [T, S]
    neg = -np.inf
    alpha = xp.full((steps, size), neg)
    alpha[0, :min(2, size)] = emit[0, :min(2, size)]
    for t in range(1, steps):
        prev = alpha[t - 1]
        into = xp.logaddexp(xp.where(stay, prev, neg), _shift(prev, 1, xp))
        alpha[t] = xp.logaddexp(into, xp.where(skip, _shift(prev, 2, xp), neg)) + emit[t]
    beta = xp.full((steps, size), neg)
    beta[-1, -min(2, size):] = emit[-1, -min(2, size):]
    skip_from = xp.zeros_like(skip)  # s -> s + 2 allowed
    skip_from[:-2] = skip[2:]
    for t in range(steps - 2, -1, -1):
        nxt = beta[t + 1]
        out_of = xp.logaddexp(xp.where(stay, nxt, neg), _shift(nxt, -1, xp))
        beta[t] = xp.logaddexp(out_of, xp.where(skip_from, _shift(nxt, -2, xp), neg)) + emit[t]
    log_p = float(xp.logaddexp(alpha[-1, -1], alpha[-1, -2]) if size > 1 else alpha[-1, -1])
    if not math.isfinite(log_p):
        return np.inf, xp.zeros_like(log_probs)
    both = alpha + beta - emit  # the log-probability of the paths through (t, s), times p
    occupancy = xp.full(log_probs.shape, neg)
    for s in range(size):
        occupancy[:, ext[s]] = xp.logaddexp(occupancy[:, ext[s]], both[:, s])
    return -log_p, xp.exp(log_probs) - xp.exp(occupancy - log_p)


@kernel("CTCLoss", domain=D)
def ctc_loss(logits, labels_indices, labels_values, sequence_length, *, xp, preprocess_collapse_repeated,
             ctc_merge_repeated, ignore_longer_outputs_than_inputs):
    steps, batch, classes = logits.shape
    x = logits.astype(np.float64)
    log_probs = x - x.max(axis=2, keepdims=True)
    log_probs = log_probs - xp.log(xp.exp(log_probs).sum(axis=2, keepdims=True))
    loss = xp.zeros(batch, dtype=np.float64)
    grad = xp.zeros_like(x)
    rows = labels_indices[:, 0] if len(labels_indices) else labels_indices.reshape(-1)
    for b in range(batch):
        length = int(sequence_length[b])
        if not 0 <= length <= steps:
            raise ValueError(f"CTCLoss: sequence_length[{b}] = {length} is outside [0, {steps}]")
        labels = _ctc_targets(labels_values[rows == b], bool(preprocess_collapse_repeated))
        if any(not 0 <= v < classes - 1 for v in labels):
            raise ValueError(f"CTCLoss: labels of batch {b} must be in [0, {classes - 1}) (class {classes - 1} is the "
                             f"blank), got {labels}")
        required = len(labels) + sum(int(a == c) for a, c in zip(labels, labels[1:]))  # a blank between repeats
        if length < required:
            if ignore_longer_outputs_than_inputs:
                continue
            raise ValueError(f"CTCLoss: not enough time for target transition sequence in batch {b} (required: "
                             f"{required}, available: {length}); pass ignore_longer_outputs_than_inputs=True to "
                             f"skip such examples")
        if length == 0:
            continue
        loss[b], grad[:length, b] = _ctc_one(log_probs[:length, b], labels, classes - 1, bool(ctc_merge_repeated), xp)
    return loss.astype(logits.dtype), grad.astype(logits.dtype)


@kernel("CTCGreedyDecoder", domain=D)
def ctc_greedy_decoder(inputs, sequence_length, *, xp, merge_repeated):
    steps, batch, classes = inputs.shape
    best = inputs.argmax(axis=2)  # [T, B]
    log_probability = xp.zeros((batch, 1), dtype=inputs.dtype)
    indices, values, longest = [], [], 0
    for b in range(batch):
        length = int(sequence_length[b])
        if not 0 <= length <= steps:
            raise ValueError(f"CTCGreedyDecoder: sequence_length[{b}] = {length} is outside [0, {steps}]")
        log_probability[b, 0] = -inputs[:length, b].max(axis=1).sum()
        path = best[:length, b].tolist()
        repeat = [bool(merge_repeated) and t > 0 and path[t - 1] == c for t, c in enumerate(path)]
        decoded = [c for c, again in zip(path, repeat) if c != classes - 1 and not again]
        indices += [(b, i) for i in range(len(decoded))]
        values += decoded
        longest = max(longest, len(decoded))
    return (xp.asarray(indices, dtype=np.int64).reshape(-1, 2), xp.asarray(values, dtype=np.int64),
            xp.asarray([batch, longest], dtype=np.int64), log_probability)


def _prefix_beam_search(log_probs, blank: int, beam_width: int) -> list[tuple[tuple[int, ...], float]]:
    """CTC prefix beam search over ``log_probs`` [T, C]: (labeling, log-probability) pairs, best
    first, each prefix's probability split into paths ending in a blank and in its last label."""
    neg = -np.inf
    beams = {(): (0.0, neg)}  # prefix -> (log p ending in blank, log p ending in its last label)
    for frame in log_probs:
        grown: dict[tuple[int, ...], list[float]] = {}

        def add(prefix, blank_lp, label_lp):
            entry = grown.setdefault(prefix, [neg, neg])
            entry[0], entry[1] = np.logaddexp(entry[0], blank_lp), np.logaddexp(entry[1], label_lp)

        for prefix, (pb, pl) in beams.items():
            total = np.logaddexp(pb, pl)
            add(prefix, total + frame[blank], neg)
            for c in range(len(frame)):
                if c == blank:
                    continue
                if prefix and prefix[-1] == c:
                    add(prefix, neg, pl + frame[c])  # the last label held
                    add(prefix + (c,), neg, pb + frame[c])  # a repeat needs the blank between
                else:
                    add(prefix + (c,), neg, total + frame[c])
        ranked = sorted(grown.items(), key=lambda kv: -np.logaddexp(*kv[1]))[:beam_width]
        beams = {prefix: tuple(lp) for prefix, lp in ranked}
    return sorted(((p, float(np.logaddexp(*lp))) for p, lp in beams.items()), key=lambda pl: -pl[1])


@kernel("CTCBeamSearchDecoder", domain=D)
def ctc_beam_search_decoder(inputs, sequence_length, *, xp, beam_width, top_paths, merge_repeated):
    steps, batch, classes = inputs.shape
    if not 1 <= top_paths <= beam_width:
        raise ValueError(f"CTCBeamSearchDecoder: top_paths {top_paths} must be in [1, beam_width {beam_width}]")
    x = np.asarray(inputs, np.float64)
    log_probs = x - np.logaddexp.reduce(x, axis=2, keepdims=True)
    log_probability = np.full((batch, top_paths), -np.inf)
    indices, values, longest = [], [], [0] * top_paths
    for b in range(batch):
        length = int(sequence_length[b])
        if not 0 <= length <= steps:
            raise ValueError(f"CTCBeamSearchDecoder: sequence_length[{b}] = {length} is outside [0, {steps}]")
        best = _prefix_beam_search(log_probs[:length, b], classes - 1, beam_width)[:top_paths]
        for p, (labels, lp) in enumerate(best):
            if merge_repeated:  # TF's beam search also merges repeats separated by a blank in its output
                labels = tuple(c for i, c in enumerate(labels) if i == 0 or labels[i - 1] != c)
            log_probability[b, p] = lp
            indices += [(p, b, i) for i in range(len(labels))]
            values += labels
            longest[p] = max(longest[p], len(labels))
    shapes = [[batch, n] for n in longest]
    return (xp.asarray(np.asarray(indices, np.int64).reshape(-1, 3)), xp.asarray(np.asarray(values, np.int64)),
            xp.asarray(np.asarray(shapes, np.int64)), xp.asarray(log_probability.astype(inputs.dtype)))


# -- fractional pooling ---------------------------------------------------------------------------
def _pooling_sequence(n_in: int, n_out: int, gen, pseudo_random: bool) -> np.ndarray:
    """TF's GeneratePoolingSequence: cumulative region boundaries [n_out + 1], each region k or k + 1
    wide (k = n_in // n_out); pseudo-random ones are ceil(alpha (i + u)) for one u, random ones a
    shuffled mix of k and k + 1."""
    k = n_in // n_out
    if n_in % n_out == 0:
        widths = np.full(n_out, k, np.int64)
    elif pseudo_random:
        alpha = n_in / n_out
        max_u = min((k + 2) / alpha - 1, (n_in + 1 - k) / alpha - (n_out - 1))
        u = gen.random() * max_u
        cum = np.array([1] + [math.ceil(alpha * (i + u)) for i in range(1, n_out)] + [n_in + 1], np.int64)
        widths = np.diff(cum)
    else:
        widths = np.full(n_out, k, np.int64)
        widths[: n_in % n_out] += 1
        gen.shuffle(widths)
    return np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)


def _regions(seq: np.ndarray, size: int, overlapping: int):
    """(start, end) inclusive of each region; overlapping regions share their boundary row."""
    for start, nxt in zip(seq[:-1], seq[1:]):
        yield int(start), int(min(nxt if overlapping else nxt - 1, size - 1))


def _fractional_pool(rctx, value, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2, stream,
                     reduce):
    _, height, width, _ = value.shape
    out_h, out_w = int(height // pooling_ratio[1]), int(width // pooling_ratio[2])
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"fractional pooling: pooling_ratio {list(pooling_ratio)} leaves no output for an input "
                         f"of shape {value.shape}")
    gen = np.random.default_rng([seed, seed2]) if deterministic else op_generator(rctx, seed, seed2, stream)
    rows = _pooling_sequence(height, out_h, gen, bool(pseudo_random))
    cols = _pooling_sequence(width, out_w, gen, bool(pseudo_random))
    out = np.empty((value.shape[0], out_h, out_w, value.shape[3]), value.dtype)
    for r, (r0, r1) in enumerate(_regions(rows, height, overlapping)):
        for c, (c0, c1) in enumerate(_regions(cols, width, overlapping)):
            out[:, r, c] = reduce(value[:, r0:r1 + 1, c0:c1 + 1], axis=(1, 2))
    return out, rows, cols


@stateful_kernel("FractionalMaxPool")
def fractional_max_pool(rctx, value, *, xp, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2,
                        stream):
    return _fractional_pool(rctx, np.asarray(value), pooling_ratio, pseudo_random, overlapping, deterministic, seed,
                            seed2, stream, np.max)


@stateful_kernel("FractionalAvgPool")
def fractional_avg_pool(rctx, value, *, xp, pooling_ratio, pseudo_random, overlapping, deterministic, seed, seed2,
                        stream):
    return _fractional_pool(rctx, np.asarray(value), pooling_ratio, pseudo_random, overlapping, deterministic, seed,
                            seed2, stream, np.mean)


@kernel("FractionalMaxPoolGrad", domain=D)
def fractional_max_pool_grad(orig_input, out_backprop, rows, cols, *, xp, overlapping):
    _, height, width, depth = orig_input.shape
    grad = np.zeros(orig_input.shape, out_backprop.dtype)
    batch_index = np.arange(orig_input.shape[0])[:, None]
    channel = np.arange(depth)[None, :]
    for r, (r0, r1) in enumerate(_regions(rows, height, overlapping)):
        for c, (c0, c1) in enumerate(_regions(cols, width, overlapping)):
            window = orig_input[:, r0:r1 + 1, c0:c1 + 1].reshape(orig_input.shape[0], -1, depth)
            first = window.argmax(axis=1)  # the first max in row-major order, as TF's
            wr, wc = np.divmod(first, c1 - c0 + 1)
            np.add.at(grad, (batch_index, r0 + wr, c0 + wc, channel), out_backprop[:, r, c])
    return grad


@kernel("FractionalAvgPoolGrad", domain=D)
def fractional_avg_pool_grad(orig_input, out_backprop, rows, cols, *, xp, overlapping):
    _, height, width, _ = orig_input.shape
    grad = np.zeros(orig_input.shape, out_backprop.dtype)
    for r, (r0, r1) in enumerate(_regions(rows, height, overlapping)):
        for c, (c0, c1) in enumerate(_regions(cols, width, overlapping)):
            count = (r1 - r0 + 1) * (c1 - c0 + 1)
            grad[:, r0:r1 + 1, c0:c1 + 1] += (out_backprop[:, r, c] / count)[:, None, None, :]
    return grad
