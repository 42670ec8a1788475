"""Gradient helper kernels for gathers (scatter the rows back), and TensorFlow's Bitcast and
BroadcastArgs."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from trainer.errors import InvalidArgumentError
from schemas.ops.shape import onnx_slice

D = "flowstack"


@kernel("ScatterToDense", domain=D)
def scatter_to_dense(values, indices, like, *, xp):
    out = xp.zeros(like.shape, dtype=values.dtype)
    xp.add.at(out, indices.reshape(-1), values.reshape((-1,) + like.shape[1:]))
    return out


@kernel("GatherGrad", domain=D)
def gather_grad(dy, indices, x, *, xp, axis):
    axis = axis % x.ndim
    out = xp.zeros(x.shape, dtype=dy.dtype)
    idx = xp.where(indices < 0, indices + x.shape[axis], indices)
    moved = xp.moveaxis(out, axis, 0)
    g = dy.reshape(dy.shape[:axis] + (-1,) + dy.shape[axis + idx.ndim:])
    xp.add.at(moved, idx.reshape(-1), xp.moveaxis(g, axis, 0))
    return out


@kernel("SliceGrad", domain=D)
def slice_grad(dy, x, *, xp, starts, ends, axes, steps):
    out = xp.zeros(x.shape, dtype=dy.dtype)
    index = [slice(None)] * x.ndim
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a % x.ndim] = onnx_slice(x.shape[a % x.ndim], s, e, st)
    out[tuple(index)] = dy
    return out


@kernel("Bitcast", domain=D)
def bitcast(x, *, xp, type):  # noqa: A002 - the attribute's name
    out = np.dtype(type)
    a, b = x.dtype.itemsize, out.itemsize
    if a < b and (x.ndim == 0 or x.shape[-1] != b // a):
        raise InvalidArgumentError(f"Bitcast: cannot bitcast {x.dtype} of shape {list(x.shape)} to {out}: the last "
                                   f"dim must be {b // a}")
    data = np.ascontiguousarray(x)
    shape = x.shape if a == b else (x.shape + (a // b,) if a > b else x.shape[:-1])
    return data.view(out).reshape(shape)


@kernel("BroadcastArgs", domain=D)
def broadcast_args(s0, s1, *, xp):
    try:
        shape = np.broadcast_shapes(tuple(int(d) for d in s0), tuple(int(d) for d in s1))
    except ValueError:
        raise InvalidArgumentError(f"BroadcastArgs: incompatible shapes [{','.join(map(str, s0))}] and "
                                   f"[{','.join(map(str, s1))}]") from None
    return np.asarray(shape, s0.dtype)
