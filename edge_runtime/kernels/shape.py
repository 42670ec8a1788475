"""Shape, layout, indexing and constant ops: what moves or picks elements without computing on them."""

from __future__ import annotations

import math

import numpy as np

from edge_runtime.kernels.registry import kernel
from schemas.ops.shape import dtype_from_code, onnx_slice
from schemas.registry import ShapeError, UnsupportedOpError

INT64 = np.int64


def ints(array) -> list[int]:
    """A small integer tensor (shape, axes, pads, ...) as Python ints, read back from the device.
    Called by every Reshape, Slice, Squeeze...: one ``tolist`` and no array built on the way for
    the usual 1-d tensor."""
    values = array.tolist()
    if not isinstance(values, list):  # a 0-d tensor
        return [int(values)]
    if values and isinstance(values[0], list):
        values = np.asarray(values).reshape(-1).tolist()
    return [int(v) for v in values]


def _axes(axes, rank: int) -> list[int]:
    return [a % rank if rank else 0 for a in axes]


def _positive(indices, size, xp):
    """ONNX indices may count from the end; NumPy fancy indexing does too, but ufunc.at and
    take_along_axis on some backends do not, so normalize once."""
    return xp.where(indices < 0, indices + size, indices)


@kernel("Constant")
def constant(*, xp, value, sparse_value, value_float, value_floats, value_int, value_ints, value_string,
             value_strings):
    if sparse_value is not None:
        raise UnsupportedOpError("Constant: sparse_value (sparse tensors) is not supported")
    if value is not None:
        return np.asarray(value) if np.asarray(value).dtype == object else xp.asarray(value)
    if value_float is not None or value_floats is not None:
        return xp.asarray(value_float if value_floats is None else value_floats, dtype=np.float32)
    if value_int is not None or value_ints is not None:
        return xp.asarray(value_int if value_ints is None else value_ints, dtype=INT64)
    if value_string is not None:
        return np.array(value_string, dtype=object)
    if value_strings is not None:
        return np.array(value_strings, dtype=object)
    raise ShapeError("Constant: no value attribute is set")


@kernel("Reshape", host_inputs=(1,))
def reshape(data, shape, *, xp, allowzero):
    target = ints(shape)
    if not allowzero:
        target = [data.shape[i] if t == 0 else t for i, t in enumerate(target)]
    return data.reshape(target)


@kernel("Flatten")
def flatten(x, *, xp, axis):
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


@kernel("Transpose")
def transpose(data, *, xp, perm):
    return xp.transpose(data, perm)


@kernel("Squeeze", host_inputs=(1,))
def squeeze(data, axes, *, xp):
    if axes is None:
        return xp.squeeze(data)
    return xp.squeeze(data, axis=tuple(_axes(ints(axes), data.ndim)))


@kernel("Unsqueeze", host_inputs=(1,))
def unsqueeze(data, axes, *, xp):
    axes = ints(axes)
    return data.reshape(_unsqueezed_shape(data.shape, _axes(axes, data.ndim + len(axes))))


def _unsqueezed_shape(shape, axes):
    dims = iter(shape)
    return tuple(1 if i in axes else next(dims) for i in range(len(shape) + len(axes)))


@kernel("Concat")
def concat(*inputs, xp, axis):
    return xp.concatenate(inputs, axis=axis)


@kernel("Split", host_inputs=(1,))
def split(x, sizes, *, xp, axis, num_outputs):
    dim = x.shape[axis]
    if sizes is not None:
        sizes = ints(sizes)
    elif num_outputs is None:
        raise ShapeError("Split: needs the split input or num_outputs (importers set it from the node's outputs)")
    else:
        chunk = -(-dim // num_outputs)
        sizes = [max(0, min(chunk, dim - chunk * i)) for i in range(num_outputs)]
    return tuple(xp.split(x, np.cumsum(sizes)[:-1].tolist(), axis=axis))


@kernel("Slice", host_inputs=(1, 2, 3, 4))
def slice_(data, starts, ends, axes, steps, *, xp):
    starts, ends = ints(starts), ints(ends)
    axes = list(range(len(starts))) if axes is None else _axes(ints(axes), data.ndim)
    steps = [1] * len(starts) if steps is None else ints(steps)
    index = [slice(None)] * data.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        index[a] = onnx_slice(data.shape[a], s, e, st)
    return data[tuple(index)]


@kernel("Gather")
def gather(data, indices, *, xp, axis):
    if xp.ndim(indices) == 0 and data.ndim > 1 and xp.__name__ == "numpy":
        # One index: a view, as data[..., i, ...] is. PyTorch's attention export takes Q, K and V
        # out of the packed projection this way, and each copy is then made again by the
        # attention kernel itself (ViT-Tiny: 36 copies of 197x192 a run).
        index = int(indices)
        if not -data.shape[axis] <= index < data.shape[axis]:
            raise IndexError(f"Gather: index {index} is out of range for axis {axis} of size {data.shape[axis]}")
        return data[(slice(None),) * (axis % data.ndim) + (index,)]
    return xp.take(data, _positive(indices, data.shape[axis], xp), axis=axis)


@kernel("GatherElements")
def gather_elements(data, indices, *, xp, axis):
    """output[..., i, ...] = data[..., indices[..., i, ...], ...] along ``axis``. On the other axes
    ``indices`` may be shorter than ``data`` (ONNX reads the leading part; ``take_along_axis``
    would broadcast a length of 1 over all of ``data`` instead, and refuse other lengths)."""
    axis %= data.ndim
    if indices.shape != data.shape:
        over = [a for a in range(data.ndim) if a != axis and indices.shape[a] > data.shape[a]]
        if over:
            raise ValueError(f"GatherElements: indices {tuple(indices.shape)} are longer than data "
                             f"{tuple(data.shape)} on axis {over[0]}")
        data = data[tuple(slice(None) if a == axis else slice(0, n) for a, n in enumerate(indices.shape))]
    if isinstance(data, np.ndarray) and indices.size:
        return _gather_elements_flat(data, indices, axis)
    return xp.take_along_axis(data, _positive(indices, data.shape[axis], xp), axis=axis)


def _gather_elements_flat(data: np.ndarray, indices: np.ndarray, axis: int) -> np.ndarray:
    """GatherElements as one ``np.take`` from the flattened data, each index offset by its position
    on the other axes: DeBERTa's relative-position gathers, (12, 128, 512) -> (12, 128, 128), take
    0.73 ms where ``take_along_axis`` (fancy indexing with a broadcast index per axis) takes 2.4."""
    size = data.shape[axis]
    low, high = int(indices.min()), int(indices.max())
    if low < -size or high >= size:  # checked here: a flat offset past a row would read the next row
        bad = low if low < -size else high
        raise IndexError(f"GatherElements: index {bad} is out of bounds for axis {axis} with size {size}")
    data = np.ascontiguousarray(data)
    steps = [math.prod(data.shape[a + 1:]) for a in range(data.ndim)]  # C-order element strides
    flat = indices.astype(np.intp)
    if low < 0:
        flat[flat < 0] += size
    flat *= steps[axis]
    for a, n in enumerate(indices.shape):
        if a != axis and n > 1:
            flat += (np.arange(n, dtype=np.intp) * steps[a]).reshape([n if b == a else 1 for b in range(data.ndim)])
    return np.take(data.reshape(-1), flat)


@kernel("GatherND")
def gather_nd(data, indices, *, xp, batch_dims):
    b, k = batch_dims, indices.shape[-1]
    batch = math.prod(data.shape[:b])
    flat_data = data.reshape((batch,) + data.shape[b:])
    flat_idx = indices.reshape(batch, -1, k)
    flat_idx = _positive(flat_idx, xp.asarray(data.shape[b:b + k], dtype=indices.dtype), xp)
    batch_index = xp.arange(batch)[:, None]
    picked = flat_data[(batch_index,) + tuple(flat_idx[..., j] for j in range(k))]
    return picked.reshape(indices.shape[:-1] + data.shape[b + k:])


def _scatter(out, index, updates, reduction, xp):
    if reduction == "none":
        out[index] = updates
        return out
    ufuncs = {"add": xp.add, "mul": xp.multiply, "max": xp.maximum, "min": xp.minimum}
    if reduction not in ufuncs:
        raise UnsupportedOpError(f"scatter reduction {reduction!r} is not one of none, {', '.join(ufuncs)}")
    ufuncs[reduction].at(out, index, updates)
    return out


@kernel("ScatterND")
def scatter_nd(data, indices, updates, *, xp, reduction):
    k = indices.shape[-1]
    flat_idx = _positive(indices.reshape(-1, k), xp.asarray(data.shape[:k], dtype=indices.dtype), xp)
    flat_updates = updates.reshape((flat_idx.shape[0],) + data.shape[k:])
    index = tuple(flat_idx[:, j] for j in range(k))
    return _scatter(data.copy(), index, flat_updates, reduction, xp)


@kernel("ScatterElements")
def scatter_elements(data, indices, updates, *, xp, axis, reduction):
    axis %= data.ndim
    index = list(xp.indices(indices.shape, sparse=True))
    index[axis] = _positive(indices, data.shape[axis], xp)
    return _scatter(data.copy(), tuple(index), updates, reduction, xp)


@kernel("Scatter")
def scatter(data, indices, updates, *, xp, axis):
    return scatter_elements(data, indices, updates, xp=xp, axis=axis, reduction="none")


@kernel("Expand", host_inputs=(1,))
def expand(x, shape, *, xp):
    target = np.broadcast_shapes(x.shape, tuple(ints(shape)))
    return xp.broadcast_to(x, target).copy()  # a writable array of its own, not a broadcast view


@kernel("Tile", host_inputs=(1,))
def tile(x, repeats, *, xp):
    return xp.tile(x, ints(repeats))


@kernel("Pad", host_inputs=(1, 3))
def pad(data, pads, constant_value, axes, *, xp, mode):
    axes = list(range(data.ndim)) if axes is None else _axes(ints(axes), data.ndim)
    pads = ints(pads)
    n = len(axes)
    width = [[0, 0] for _ in range(data.ndim)]
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + n]]
    # Negative pads crop; crop first, then pad by what is left.
    crop = tuple(slice(-min(lo, 0), data.shape[a] + min(hi, 0)) for a, (lo, hi) in enumerate(width))
    data = data[crop]
    width = [(max(lo, 0), max(hi, 0)) for lo, hi in width]
    if mode == "constant":
        value = 0 if constant_value is None else constant_value.reshape(-1)[0].item()
        return xp.pad(data, width, mode="constant", constant_values=value)
    if mode not in ("reflect", "edge", "wrap"):
        raise UnsupportedOpError(f"Pad: mode {mode!r} is not one of constant, reflect, edge, wrap")
    return xp.pad(data, width, mode=mode)


# Shape and Size answer from metadata on the host, on every device: the shape arithmetic after
# them (Gather, Concat, Reshape's target) then runs on the host too, with no copy and no GPU wait.
@kernel("Shape")
def shape(data, *, xp, start, end):
    return np.asarray(data.shape[start:end], dtype=INT64)


@kernel("Size")
def size(data, *, xp):
    return np.asarray(data.size, dtype=INT64)


@kernel("Range", host_inputs=(0, 1, 2))
def range_(start, limit, delta, *, xp, stash_type):
    dtype = start.dtype
    # float16 steps would accumulate too much error; ONNX computes them in the stash type.
    compute = dtype_from_code(stash_type, "Range") if dtype == np.float16 else dtype
    first, stop, step = (v.astype(compute).item() for v in (start, limit, delta))
    return xp.arange(first, stop, step).astype(dtype)


@kernel("ConstantOfShape", host_inputs=(0,))
def constant_of_shape(shape, *, xp, value):
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return xp.full(ints(shape), fill[0], dtype=fill.dtype)


@kernel("Identity")
def identity(x, *, xp):
    return x


@kernel("IdentityN", "flowstack")
def identity_n(*inputs, xp, num_outputs):
    return tuple(inputs)


@kernel("OneHot", host_inputs=(1,))
def one_hot(indices, depth, values, *, xp, axis):
    depth = int(depth.reshape(-1)[0].item())
    idx = indices.astype(INT64)
    idx = xp.where(idx < 0, idx + depth, idx)
    hot = idx[..., None] == xp.arange(depth)  # out-of-range indices match nothing: all off
    out = xp.where(hot, values[1], values[0])
    return xp.moveaxis(out, -1, axis % out.ndim)


@kernel("NonZero")
def non_zero(x, *, xp):
    if x.ndim == 0:
        return xp.zeros((0, int(bool(x))), dtype=INT64)
    return xp.stack(xp.nonzero(x)).astype(INT64).reshape(x.ndim, -1)


@kernel("Compress")
def compress(x, condition, *, xp, axis):
    return xp.compress(condition.astype(bool), x, axis=axis)


@kernel("Unique")
def unique(x, *, xp, axis, sorted):
    y, first, inverse, counts = xp.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                          axis=axis)
    inverse = inverse.reshape(-1)
    if not sorted:
        # Order the unique values by first occurrence, and renumber the inverse map to match.
        order = xp.argsort(first, kind="stable")
        rank = xp.empty_like(order)
        rank[order] = xp.arange(order.size)
        y = xp.take(y, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return y, first.astype(INT64), inverse.astype(INT64), counts.astype(INT64)


@kernel("ReverseSequence")
def reverse_sequence(x, sequence_lens, *, xp, batch_axis, time_axis):
    shape_t = [1] * x.ndim
    shape_t[time_axis] = x.shape[time_axis]
    shape_b = [1] * x.ndim
    shape_b[batch_axis] = x.shape[batch_axis]
    t = xp.arange(x.shape[time_axis]).reshape(shape_t)
    lens = sequence_lens.astype(INT64).reshape(shape_b)
    source = xp.where(t < lens, lens - 1 - t, t)
    return xp.take_along_axis(x, xp.broadcast_to(source, x.shape), axis=time_axis)


@kernel("EyeLike")
def eye_like(x, *, xp, dtype, k):
    out_dtype = x.dtype if dtype is None else dtype_from_code(dtype, "EyeLike")
    return xp.eye(x.shape[0], x.shape[1], k=k, dtype=out_dtype)


@kernel("CenterCropPad")
def center_crop_pad(input_data, shape, *, xp, axes):
    rank = input_data.ndim
    axes = _axes(axes if axes is not None else range(rank), rank)
    out_shape = list(input_data.shape)
    source = [slice(None)] * rank
    target = [slice(None)] * rank
    for a, size in zip(axes, ints(shape)):
        dim = input_data.shape[a]
        out_shape[a] = size
        # The odd element of an uneven crop or pad goes to the end.
        if size < dim:
            lo = (dim - size) // 2
            source[a] = slice(lo, lo + size)
        elif size > dim:
            lo = (size - dim) // 2
            target[a] = slice(lo, lo + dim)
    out = xp.zeros(out_shape, dtype=input_data.dtype)
    out[tuple(target)] = input_data[tuple(source)]
    return out


@kernel("TensorScatter")
def tensor_scatter(past_cache, update, write_indices, *, xp, axis, mode):
    axis %= past_cache.ndim
    batch, length, capacity = past_cache.shape[0], update.shape[axis], past_cache.shape[axis]
    starts = xp.zeros(batch, dtype=INT64) if write_indices is None else write_indices.astype(INT64)
    positions = starts[:, None] + xp.arange(length)
    if mode == "circular":
        positions = positions % capacity
    present = past_cache.copy()
    # Moving the sequence axis next to the batch axis lines up (batch, position) pairs for indexing;
    # the moved view writes through to `present`.
    view = xp.moveaxis(present, axis, 1)
    view[xp.arange(batch)[:, None], positions] = xp.moveaxis(update, axis, 1)
    return present


@kernel("BitCast")
def bit_cast(x, *, xp, to):
    dtype = dtype_from_code(to, "BitCast")
    if dtype.itemsize != x.dtype.itemsize or dtype == object:
        raise ShapeError(f"BitCast: cannot reinterpret {x.dtype} as {dtype}: bit widths differ")
    # ONNX defines the bytes as little endian, which is what NumPy uses on every supported host.
    # (ascontiguousarray makes a 0-d array 1-d: reshape keeps a scalar a scalar.)
    return xp.ascontiguousarray(x).reshape(x.shape).view(dtype)
