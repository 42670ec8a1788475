"""Gradient helper kernels for elementwise ops, reductions and softmax losses; Bincount, a
training-side op whose bad inputs are TensorFlow's InvalidArgumentErrors."""

from __future__ import annotations

from edge_runtime.kernels import kernel
from trainer.errors import InvalidArgumentError

D = "flowstack"


def sum_to_shape(x, shape, xp):
    """Sum ``x`` down to ``shape`` (undo NumPy broadcasting)."""
    if x.shape == tuple(shape):
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, d in enumerate(shape) if d == 1 and x.shape[i + lead] != 1)
    out = x.sum(axis=axes, keepdims=True) if axes else x
    return out.reshape(shape)


@kernel("SumToShape", domain=D)
def sum_to_shape_kernel(x, like, *, xp):
    return sum_to_shape(x, like.shape, xp)


@kernel("ZerosLike", domain=D)
def zeros_like(x, *, xp):
    return xp.zeros_like(x)


@kernel("OnesLike", domain=D)
def ones_like(x, *, xp):
    return xp.ones_like(x)


@kernel("ReluGrad", domain=D)
def relu_grad(dy, y, *, xp):
    return dy * (y > 0)


@kernel("SigmoidGrad", domain=D)
def sigmoid_grad(dy, y, *, xp):
    return dy * y * (1 - y)


@kernel("TanhGrad", domain=D)
def tanh_grad(dy, y, *, xp):
    return dy * (1 - y * y)


@kernel("SoftmaxGrad", domain=D)
def softmax_grad(dy, y, *, xp, axis):
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))


@kernel("LogSoftmaxGrad", domain=D)
def log_softmax_grad(dy, y, *, xp, axis):
    return dy - xp.exp(y) * dy.sum(axis=axis, keepdims=True)


def _reduced_shape(x_shape, axes, keepdims):
    axes = tuple(range(len(x_shape))) if not axes else tuple(a % len(x_shape) for a in axes)
    return tuple(1 if i in axes else d for i, d in enumerate(x_shape)), axes


@kernel("BroadcastReduceGrad", domain=D)
def broadcast_reduce_grad(dy, x, *, xp, axes, keepdims, scale):
    kept, axes = _reduced_shape(x.shape, axes, keepdims)
    g = dy.reshape(kept)
    if scale == "mean":
        count = 1
        for a in axes:
            count *= x.shape[a]
        g = g / x.dtype.type(count)
    return xp.broadcast_to(g, x.shape)


@kernel("ReduceExtremumGrad", domain=D)
def reduce_extremum_grad(dy, x, y, *, xp, axes, keepdims):
    kept, _ = _reduced_shape(x.shape, axes, keepdims)
    hit = x == y.reshape(kept)
    return hit * (dy.reshape(kept) / hit.sum(axis=_reduced_shape(x.shape, axes, 1)[1], keepdims=True))


def _log_softmax(logits, xp):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))


@kernel("SoftmaxCrossEntropyWithLogits", domain=D)
def softmax_xent(logits, labels, *, xp):
    logp = _log_softmax(logits, xp)
    loss = -(labels * logp).sum(axis=-1)
    return loss, xp.exp(logp) - labels


@kernel("SparseSoftmaxCrossEntropyWithLogits", domain=D)
def sparse_softmax_xent(logits, labels, *, xp):
    logp = _log_softmax(logits, xp)
    flat = logp.reshape(-1, logp.shape[-1])
    idx = labels.reshape(-1).astype(xp.int64)
    rows = xp.arange(flat.shape[0])
    loss = -flat[rows, idx].reshape(labels.shape)
    # C order, so that the reshape below is a view: logits that arrive as a transposed view (a dense
    # layer over dynamic_rnn's outputs) give a logp in their memory order, whose reshape is a copy
    # and would take the -1 away from the gradient
    grad = xp.ascontiguousarray(xp.exp(logp))
    grad.reshape(-1, logp.shape[-1])[rows, idx] -= 1
    return loss, grad


@kernel("ClipByGlobalNormScale", domain=D)
def clip_by_global_norm_scale(clip_norm, *tensors, xp):
    total = sum(float((t.astype(xp.float64) ** 2).sum()) for t in tensors)
    norm = total ** 0.5
    dtype = tensors[0].dtype
    scale = min(1.0, float(clip_norm) / norm) if norm > 0 else 1.0
    return xp.asarray(scale, dtype=dtype), xp.asarray(norm, dtype=dtype)


@kernel("Bincount", domain=D)
def bincount(arr, size, weights, *, xp):
    n = int(size)
    if n < 0:
        raise InvalidArgumentError(f"Bincount: size ({n}) must be non-negative")
    flat = arr.reshape(-1)
    if flat.size and int(flat.min()) < 0:
        raise InvalidArgumentError(f"Bincount: input arr must be non-negative, got {int(flat.min())}")
    keep = flat < n
    w = weights.reshape(-1)[keep] if weights.size else None
    return xp.bincount(flat[keep], weights=w, minlength=n)[:n].astype(weights.dtype)
