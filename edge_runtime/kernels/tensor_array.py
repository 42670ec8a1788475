"""Kernels of the TensorArray ops (schemas/ops/tensor_array.py): functional writes of a flow."""

from __future__ import annotations

from edge_runtime.kernels.registry import kernel
from schemas.registry import ShapeError

D = "flowstack"


def _unwritten(flow) -> bool:
    return flow.ndim == 1 and flow.shape[0] == 0


@kernel("TensorArrayScatter", domain=D)
def tensor_array_scatter(flow, indices, value, size, *, xp, dynamic_size):
    size = int(size)
    idx = indices.reshape(-1).astype(xp.int64)
    rows = value.reshape((idx.size,) + value.shape[indices.ndim:])
    if idx.size and idx.min() < 0:
        raise ShapeError(f"TensorArray: cannot write to negative index {int(idx.min())}")
    needed = int(idx.max()) + 1 if idx.size else 0
    length = 0 if _unwritten(flow) else flow.shape[0]
    limit = size if size >= 0 and not dynamic_size else None
    if limit is not None and needed > limit:
        raise ShapeError(f"TensorArray of size {limit}: index {needed - 1} is out of range (give dynamic_size=True "
                         f"to let it grow)")
    if not _unwritten(flow) and rows.shape[1:] != flow.shape[1:]:
        raise ShapeError(f"TensorArray holds elements of shape {tuple(flow.shape[1:])}; cannot write one of shape "
                         f"{tuple(rows.shape[1:])}")
    n = max(length, needed, size if size >= 0 else 0)
    out = xp.zeros((n,) + rows.shape[1:], dtype=value.dtype)
    if length:
        out[:length] = flow
    out[idx] = rows
    return out


@kernel("TensorArraySize", domain=D)
def tensor_array_size(flow, size, *, xp):
    return xp.asarray(max(int(size), 0) if _unwritten(flow) else flow.shape[0], dtype=xp.int32)


@kernel("TensorArrayStack", domain=D)
def tensor_array_stack(flow, *, xp, element_shape, element_shape_known):
    if _unwritten(flow) and element_shape_known:
        return xp.zeros((0,) + tuple(element_shape), dtype=flow.dtype)
    return flow
