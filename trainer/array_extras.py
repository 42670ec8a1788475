"""TF 1.15's remaining top-level array functions, composed from flowstack's ops as TensorFlow composes
most of them: ``roll`` (a gather), ``tensor_scatter_nd_*`` (ScatterND), ``searchsorted`` (a count of
smaller entries), ``unravel_index``, the fixed-width histograms, ``batch_gather`` /
``batch_scatter_update``, the broadcast-shape helpers, ``required_space_to_batch_paddings``,
``bitcast`` and ``ensure_shape``.

Gradients come from the ops they are built of: roll's is a gather's (a roll back), a tensor scatter's
reaches ``tensor`` (zero where an update overwrote it) and ``updates`` (gathered back).
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import (broadcast_to, clip_by_value, cumprod, expand_dims, floor, floordiv, floormod, gather_nd,
                               less_equal, range as tf_range, reduce_prod, reduce_sum, stack, unsorted_segment_sum)
from trainer.debugging import assert_less, assert_non_negative
from trainer.dtypes import as_numpy_dtype
from trainer.graph import Tensor, control_dependencies
from trainer.ops import cast, convert_to_tensor, gather, less, make_op, negative, reshape, shape, zeros_like
from trainer.state_ops import scatter_nd_update
from trainer.tensor_shape import TensorShape

__all__ = ["batch_gather", "batch_scatter_update", "bitcast", "broadcast_dynamic_shape", "broadcast_static_shape",
           "ensure_shape", "histogram_fixed_width", "histogram_fixed_width_bins", "required_space_to_batch_paddings",
           "roll", "searchsorted", "setdiff1d", "sparse_matmul", "tensor_scatter_add", "tensor_scatter_nd_add",
           "tensor_scatter_nd_sub", "tensor_scatter_nd_update", "tensor_scatter_sub", "tensor_scatter_update",
           "unravel_index"]

D = "flowstack"


def _static_ints(value, what: str) -> list[int]:
    """A Python int or list of ints (or a constant) as a list; tensors computed at run time are refused."""
    if isinstance(value, Tensor):
        if value.node.op_type == "Constant" or "value" in value.node.attrs:
            return [int(v) for v in np.reshape(value.node.attrs["value"], -1)]
        raise TypeError(f"{what} must be a Python int or list of ints, not a tensor computed at run time")
    return [int(v) for v in np.reshape(np.asarray(value), -1)]


def _compatible(a: tuple, b: tuple) -> bool:
    """Whether two known-rank static shapes can describe the same tensor (None matches anything)."""
    return len(a) == len(b) and all(p is None or q is None or p == q for p, q in zip(a, b))


# -- roll ------------------------------------------------------------------------------------------
def _shift_list(shift, count: int) -> list:
    """``shift`` as one entry (int or scalar tensor) per rolled axis."""
    if isinstance(shift, Tensor):
        if shift.shape == () and count == 1:
            return [shift]
        if shift.shape is None or len(shift.shape) != 1 or shift.shape[0] not in (None, count):
            raise ValueError(f"roll: shift {shift.shape} must have one entry per axis ({count})")
        return [gather(shift, k) for k in range(count)]
    values = [int(v) for v in np.reshape(np.asarray(shift), -1)]
    if len(values) != count:
        raise ValueError(f"roll: shift and axis must have the same number of entries, got {len(values)} and {count}")
    return values


def roll(input, shift, axis):  # noqa: A002 - TF's name
    """Elements shifted by ``shift`` along ``axis`` (each a scalar or matching 1-D lists), wrapping
    around; ``shift`` may be a tensor, ``axis`` is static. ``tf.roll``/``tf.manip.roll``."""
    x = convert_to_tensor(input)
    if x.shape is None:
        raise ValueError("roll: input must have a known rank")
    rank = len(x.shape)
    axes = _static_ints(axis, "roll: axis")
    for a, s in zip(axes, _shift_list(shift, len(axes))):
        if not -rank <= a < rank:
            raise ValueError(f"roll: axis {a} is out of range for input of rank {rank}")
        a %= rank
        if x.shape[a] == 0:
            continue
        n = x.shape[a]
        if n is None:
            n = gather(shape(x), a)
            positions = tf_range(0, n, dtype=np.int64)
        else:
            positions = convert_to_tensor(np.arange(n, dtype=np.int64))
        source = floormod(positions - cast(convert_to_tensor(s), np.int64), n)
        x = gather(x, source, axis=a)
    return x


# -- tensor scatters -------------------------------------------------------------------------------
def _check_scatter(op: str, tensor: Tensor, indices: Tensor, updates: Tensor) -> None:
    if indices.dtype is not None and indices.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be int32 or int64, got {indices.dtype}")
    if tensor.shape is None or indices.shape is None or updates.shape is None or indices.shape[-1:] == (None,):
        return
    if not indices.shape:
        raise ValueError(f"{op}: indices must have rank >= 1, got a scalar")
    k = indices.shape[-1]
    if k > len(tensor.shape):
        raise ValueError(f"{op}: indices' last dim ({k}) exceeds the rank of tensor {tensor.shape}")
    want = indices.shape[:-1] + tensor.shape[k:]
    if not _compatible(want, updates.shape):
        raise ValueError(f"{op}: updates must have shape {TensorShape(want)} (indices.shape[:-1] + "
                         f"tensor.shape[{k}:]), got {TensorShape(updates.shape)}")


def _tensor_scatter(op: str, tensor, indices, updates, reduction: str, negate: bool, name) -> Tensor:
    t = convert_to_tensor(tensor)
    idx = convert_to_tensor(indices)
    u = convert_to_tensor(updates, dtype=t.dtype)
    _check_scatter(op, t, idx, u)
    if negate:
        u = negative(u)
    return make_op("ScatterND", [t, cast(idx, np.int64), u], {"reduction": reduction}, name=name or op).outputs[0]


def tensor_scatter_nd_update(tensor, indices, updates, name=None) -> Tensor:
    """A copy of ``tensor`` with the slices at ``indices`` replaced by ``updates``."""
    return _tensor_scatter("TensorScatterUpdate", tensor, indices, updates, "none", False, name)


def tensor_scatter_nd_add(tensor, indices, updates, name=None) -> Tensor:
    """A copy of ``tensor`` with ``updates`` added at ``indices`` (duplicates add up)."""
    return _tensor_scatter("TensorScatterAdd", tensor, indices, updates, "add", False, name)


def tensor_scatter_nd_sub(tensor, indices, updates, name=None) -> Tensor:
    """A copy of ``tensor`` with ``updates`` subtracted at ``indices`` (duplicates add up)."""
    return _tensor_scatter("TensorScatterSub", tensor, indices, updates, "add", True, name)


tensor_scatter_update = tensor_scatter_nd_update  # TF 1.15's older spellings
tensor_scatter_add = tensor_scatter_nd_add
tensor_scatter_sub = tensor_scatter_nd_sub


# -- searchsorted, unravel_index, histograms -------------------------------------------------------
def searchsorted(sorted_sequence, values, side: str = "left", out_type=np.int32, name=None) -> Tensor:
    """For each of ``values``' innermost rows, where its entries would go in the matching row of
    ``sorted_sequence`` (sorted ascending along its last axis) to keep it sorted."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    seq = convert_to_tensor(sorted_sequence)
    v = convert_to_tensor(values, dtype=seq.dtype)
    if seq.shape is not None and v.shape is not None:
        if len(seq.shape) < 1 or len(seq.shape) != len(v.shape):
            raise ValueError(f"searchsorted: sorted_sequence {seq.shape} and values {v.shape} must have the same "
                             f"rank, at least 1")
        if not _compatible(seq.shape[:-1], v.shape[:-1]):
            raise ValueError(f"searchsorted: sorted_sequence {seq.shape} and values {v.shape} must agree on all "
                             f"but the last dim")
    before = (less if side == "left" else less_equal)(expand_dims(seq, -2), expand_dims(v, -1))
    return reduce_sum(cast(before, as_numpy_dtype(out_type)), axis=-1, name=name)


def unravel_index(indices, dims, name=None) -> Tensor:
    """Flat ``indices`` (a scalar or 1-D) as coordinates into an array of shape ``dims``: shape
    ``[len(dims)]`` or ``[len(dims), N]``. An index outside ``[0, prod(dims))`` fails the run."""
    idx = convert_to_tensor(indices)
    if idx.dtype is not None and idx.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be int32 or int64, got {idx.dtype}")
    if idx.shape is not None and len(idx.shape) > 1:
        raise ValueError(f"unravel_index: indices must be a scalar or 1-D, got shape {idx.shape}")
    d = convert_to_tensor(dims, dtype=idx.dtype)
    checks = [assert_non_negative(idx, message="unravel_index: indices must be >= 0"),
              assert_less(idx, reduce_prod(d), message="unravel_index: indices must be < prod(dims)")]
    with control_dependencies(checks):
        strides = cumprod(d, exclusive=True, reverse=True)
        if idx.shape == ():
            return floormod(floordiv(idx, strides), d, name=name)
        return floormod(floordiv(expand_dims(idx, 0), expand_dims(strides, -1)), expand_dims(d, -1), name=name)


def histogram_fixed_width_bins(values, value_range, nbins: int = 100, dtype=np.int32, name=None) -> Tensor:
    """Each of ``values``' bin among ``nbins`` equal bins over ``value_range`` = [lo, hi]; values
    below lo go to bin 0, above hi to the last."""
    v = convert_to_tensor(values)
    if v.dtype is not None and v.dtype.kind not in "iuf":
        raise TypeError(f"histogram_fixed_width: values must be numeric, got {v.dtype}")
    if not isinstance(nbins, Tensor) and int(nbins) <= 0:
        raise ValueError(f"histogram_fixed_width: nbins must be positive, got {nbins}")
    work = np.float64 if v.dtype in (np.dtype(np.float64), np.dtype(np.int64)) else np.float32
    vr = cast(convert_to_tensor(value_range), work)
    lo, hi = gather(vr, convert_to_tensor(np.int64(0))), gather(vr, convert_to_tensor(np.int64(1)))
    n = cast(convert_to_tensor(nbins), work)
    scaled = floor((cast(v, work) - lo) / (hi - lo) * n)
    top = cast(convert_to_tensor(nbins), np.int64) - 1
    return cast(clip_by_value(cast(scaled, np.int64), np.int64(0), top), as_numpy_dtype(dtype), name=name)


def histogram_fixed_width(values, value_range, nbins: int = 100, dtype=np.int32, name=None) -> Tensor:
    """How many of ``values`` fall in each of ``nbins`` equal bins over ``value_range`` (outliers
    count in the end bins)."""
    bins = histogram_fixed_width_bins(values, value_range, nbins, np.int64)
    ones = cast(zeros_like(bins), as_numpy_dtype(dtype)) + np.ones((), as_numpy_dtype(dtype))
    return unsorted_segment_sum(reshape(ones, [-1]), reshape(bins, [-1]), nbins, name=name)


def setdiff1d(x, y, index_dtype=np.int32, name=None):
    """(the entries of 1-D ``x`` not in ``y``, in ``x``'s order, and their positions in ``x``)."""
    from trainer.array_ops import boolean_mask, logical_not, reduce_any
    from trainer.ops import equal

    a = convert_to_tensor(x)
    b = convert_to_tensor(y, dtype=a.dtype)
    for label, t in (("x", a), ("y", b)):
        if t.shape is not None and len(t.shape) != 1:
            raise ValueError(f"setdiff1d: {label} must be 1-D, got shape {t.shape}")
    keep = logical_not(reduce_any(equal(expand_dims(a, 1), expand_dims(b, 0)), axis=1))
    positions = tf_range(0, gather(shape(a), convert_to_tensor(np.int64(0))), dtype=as_numpy_dtype(index_dtype))
    return boolean_mask(a, keep, name=name or "setdiff1d"), boolean_mask(positions, keep)


# -- batched gathers and scatters ------------------------------------------------------------------
def batch_gather(params, indices, name=None) -> Tensor:
    """``out[b..., k] = params[b..., indices[b..., k]]`` over the leading (batch) dims of ``indices``."""
    idx = convert_to_tensor(indices)
    if idx.shape is None:
        raise ValueError("batch_gather: indices must have a known rank")
    p = convert_to_tensor(params)
    if p.shape is not None and len(p.shape) < len(idx.shape):
        raise ValueError(f"batch_gather: params {p.shape} must have at least the rank of indices {idx.shape}")
    return gather_nd(p, expand_dims(idx, -1), batch_dims=len(idx.shape) - 1, name=name)


def batch_scatter_update(ref, indices, updates, use_locking: bool = True, name=None) -> Tensor:
    """``ref[b..., indices[b..., k]] = updates[b..., k]`` for the variable ``ref``; returns its new value."""
    idx = convert_to_tensor(indices)
    if idx.shape is None or not idx.shape:
        raise ValueError("batch_scatter_update: indices must have a known rank of at least 1")
    idx = cast(idx, np.int64)
    full = shape(idx)
    rank = len(idx.shape)
    coords = []
    for j in range(rank - 1):
        layout = [1] * rank
        layout[j] = -1
        coords.append(broadcast_to(reshape(tf_range(0, gather(full, j), dtype=np.int64), layout), full))
    nd = stack(coords + [idx], axis=-1)
    return scatter_nd_update(ref, nd, updates, use_locking=use_locking, name=name)


# -- broadcast shapes ------------------------------------------------------------------------------
def broadcast_static_shape(shape_x, shape_y) -> TensorShape:
    """The TensorShape two static shapes broadcast to; ValueError when they cannot."""
    x, y = TensorShape(shape_x), TensorShape(shape_y)
    if x.ndims is None or y.ndims is None:
        return TensorShape(None)
    a, b = list(x.as_list()), list(y.as_list())
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    out = []
    for p, q in zip(a, b):
        if p is None or q is None:
            known = q if p is None else p
            out.append(known if known is not None and known > 1 else None)
        elif p == q or q == 1:
            out.append(p)
        elif p == 1:
            out.append(q)
        else:
            raise ValueError(f"Incompatible shapes for broadcasting: {x} and {y}")
    return TensorShape(out)


def broadcast_dynamic_shape(shape_x, shape_y) -> Tensor:
    """The shape (a 1-D tensor) two shape vectors broadcast to; incompatible ones fail the run."""
    sx = convert_to_tensor(shape_x)
    sy = convert_to_tensor(shape_y)
    if sx.dtype is not None and sy.dtype is not None and sx.dtype != sy.dtype and sy.dtype.kind in "iu":
        sy = cast(sy, sx.dtype)  # int32 and int64 shape vectors mix freely
    return make_op("BroadcastArgs", [sx, sy], domain=D, name="BroadcastArgs").outputs[0]


def _static_space_to_batch_paddings(input_shape, block_shape, base_paddings, name):
    """The same from static values, as constants (space_to_batch_nd takes static paddings)."""
    from trainer.ops import constant

    block = np.asarray(block_shape, np.int64).reshape(-1)
    size = np.asarray(input_shape, np.int64).reshape(-1)
    base = np.zeros((block.size, 2), np.int64) if base_paddings is None else np.asarray(base_paddings, np.int64)
    if size.shape != block.shape or base.shape != (block.size, 2):
        raise ValueError(f"required_space_to_batch_paddings: input_shape {size.shape}, block_shape {block.shape} "
                         f"and base_paddings {base.shape} must describe the same {block.size} dims")
    if (block <= 0).any():
        raise ValueError(f"required_space_to_batch_paddings: block_shape must be positive, got {block.tolist()}")
    extra = (block - (size + base.sum(1)) % block) % block
    paddings = np.stack([base[:, 0], base[:, 1] + extra], 1).astype(np.int32)
    crops = np.stack([np.zeros_like(extra), extra], 1).astype(np.int32)
    prefix = f"{name}/" if name else ""
    return constant(paddings, name=prefix + "paddings"), constant(crops, name=prefix + "crops")


def required_space_to_batch_paddings(input_shape, block_shape, base_paddings=None, name=None):
    """(paddings, crops) making ``input_shape`` (plus ``base_paddings``) divisible by ``block_shape``,
    as space_to_batch_nd and batch_to_space_nd take them."""
    if not any(isinstance(v, Tensor) for v in (input_shape, block_shape, base_paddings)):
        return _static_space_to_batch_paddings(input_shape, block_shape, base_paddings, name)
    block = cast(convert_to_tensor(block_shape), np.int32)
    if block.shape is None or len(block.shape) != 1:
        raise ValueError(f"required_space_to_batch_paddings: block_shape must be 1-D, got {block.shape}")
    size = cast(convert_to_tensor(input_shape), np.int32)
    if base_paddings is None:
        base = cast(zeros_like(stack([block, block], axis=1)), np.int32)
    else:
        base = cast(convert_to_tensor(base_paddings), np.int32)
    start, end = gather(base, 0, axis=1), gather(base, 1, axis=1)
    full = size + start + end
    extra = floormod(block - floormod(full, block), block)
    paddings = stack([start, end + extra], axis=1, name=(name + "/paddings") if name else "paddings")
    crops = stack([zeros_like(extra), extra], axis=1, name=(name + "/crops") if name else "crops")
    return paddings, crops


def sparse_matmul(a, b, transpose_a: bool = False, transpose_b: bool = False, a_is_sparse: bool = False,
                  b_is_sparse: bool = False, name=None) -> Tensor:
    """``tf.sparse_matmul``: the dense product of two matrices; the ``*_is_sparse`` hints (which let
    TensorFlow pick a kernel for mostly-zero inputs) change nothing here."""
    from trainer.array_ops import matmul

    x, y = convert_to_tensor(a), convert_to_tensor(b)
    for label, t in (("a", x), ("b", y)):
        if t.dtype is not None and t.dtype.kind != "f":
            raise TypeError(f"sparse_matmul: {label} must be floating point, got {t.dtype}")
        if t.shape is not None and len(t.shape) != 2:
            raise ValueError(f"sparse_matmul: {label} must be a matrix, got shape {t.shape}")
    return matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b, name=name or "SparseMatMul")


# -- reinterpretation and checks -------------------------------------------------------------------
def bitcast(input, type, name=None) -> Tensor:  # noqa: A002 - TF's names
    """``input``'s bytes read as ``type`` (see the Bitcast op for how the shape changes)."""
    x = convert_to_tensor(input)
    out = as_numpy_dtype(type)
    return make_op("Bitcast", [x], {"type": np.dtype(out).name}, domain=D, name=name or "Bitcast").outputs[0]


def ensure_shape(x, shape, name=None) -> Tensor:  # noqa: A002
    """``x``, with ``shape`` merged into its static shape, failing the run when its actual shape
    does not match (None dims match anything)."""
    t = convert_to_tensor(x)
    want = TensorShape(shape)
    if want.ndims is None:
        from trainer.ops import identity

        return identity(t, name=name)
    dims = [-1 if d is None else int(d) for d in want.as_list()]
    return make_op("EnsureShape", [t], {"shape": dims}, domain=D, name=name or "EnsureShape").outputs[0]

