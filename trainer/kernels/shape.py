"""Gradient helper kernels for gathers: scatter the rows back."""

from __future__ import annotations

from edge_runtime.kernels import kernel
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
