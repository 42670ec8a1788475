"""TF 1.15's ``tf.sparse`` functions on a SparseTensor's three parts (trainer/sparse_tensor.py):
``from_dense``, ``reorder``, ``retain``, ``reset_shape``, ``fill_empty_rows``, ``to_indicator``,
``reduce_sum_sparse`` / ``reduce_max_sparse``, the sparse segment reductions and ``mask``, and
``tf.sparse_to_dense``.

Each is composed from gathers, scatters, sorts and segment sums, as TensorFlow composes several of
them, so gradients reach ``values`` (and ``default_value``) where TensorFlow registers one: a
reorder or retain gathers the incoming gradient back, fill_empty_rows sums the filled rows'
gradient into ``default_value``.
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import (argsort, cumprod, expand_dims, fill, gather_nd, logical_not, not_equal, reduce_any,
                               reduce_max, reduce_sum, scatter_nd, where)
from trainer.debugging import assert_greater_equal
from trainer.gradients import IndexedSlices
from trainer.graph import Tensor, control_dependencies
from trainer.ops import (cast, concat, convert_to_tensor, equal, gather, greater, identity, make_op, maximum, ones_like,
                         reshape, shape, sqrt, zeros_like)
from trainer.sparse_tensor import SparseTensor, sparse_reduce_sum

__all__ = ["cross", "fill_empty_rows", "from_dense", "mask", "reduce_max_sparse", "reduce_max_to_dense",
           "reduce_sum_sparse", "reorder", "reset_shape", "retain", "segment_mean", "segment_sqrt_n", "segment_sum",
           "sparse_to_dense", "to_indicator"]

I64 = np.int64


def _sparse(op: str, sp_input) -> SparseTensor:
    if not isinstance(sp_input, SparseTensor):
        raise TypeError(f"{op}: sp_input must be a SparseTensor, got {type(sp_input).__name__}")
    return sp_input


def _nonzero(x: Tensor) -> Tensor:
    """Where ``x`` holds a value: non-zero, or for strings non-empty."""
    if x.dtype == np.dtype(object):
        from trainer.string_ops import length

        return greater(length(x), 0)
    return not_equal(x, np.zeros((), x.dtype))


def _column(indices: Tensor, k: int) -> Tensor:
    return gather(indices, k, axis=1)


def from_dense(tensor, name=None) -> SparseTensor:
    """The SparseTensor of ``tensor``'s non-zero (non-empty, for strings) entries, in row-major order."""
    x = convert_to_tensor(tensor)
    indices = where(_nonzero(x))
    return SparseTensor(indices, gather_nd(x, indices, name=name), cast(shape(x), I64))


def _row_major_keys(sp: SparseTensor) -> Tensor:
    strides = cumprod(sp.dense_shape, exclusive=True, reverse=True)
    return reduce_sum(sp.indices * expand_dims(strides, 0), axis=1)


def reorder(sp_input, name=None) -> SparseTensor:
    """The same SparseTensor with its entries in row-major (canonical) order."""
    sp = _sparse("sparse.reorder", sp_input)
    order = argsort(_row_major_keys(sp), stable=True)
    return SparseTensor(gather(sp.indices, order), gather(sp.values, order, name=name), sp.dense_shape)


def retain(sp_input, to_retain) -> SparseTensor:
    """The entries where the 1-D bool ``to_retain`` (one per entry) is true; the shape stays."""
    sp = _sparse("sparse.retain", sp_input)
    keep = convert_to_tensor(to_retain)
    if keep.shape is not None and len(keep.shape) != 1:
        raise ValueError(f"sparse.retain: to_retain must be 1-D, got shape {keep.shape}")
    if keep.dtype is not None and keep.dtype != np.dtype(bool):
        raise TypeError(f"sparse.retain: to_retain must be bool, got {keep.dtype}")
    kept = reshape(where(keep), [-1])
    return SparseTensor(gather(sp.indices, kept), gather(sp.values, kept), sp.dense_shape)


def reset_shape(sp_input, new_shape=None) -> SparseTensor:
    """The same entries with ``dense_shape`` = ``new_shape`` (it must cover the old one), or with
    ``new_shape=None`` the tightest shape: the largest index plus one in each dimension."""
    sp = _sparse("sparse.reset_shape", sp_input)
    if new_shape is None:
        tight = reduce_max(sp.indices, axis=0) + 1
        return SparseTensor(sp.indices, sp.values, maximum(tight, zeros_like(sp.dense_shape)))
    wanted = cast(convert_to_tensor(new_shape), I64)
    if wanted.shape is not None and sp.dense_shape.shape is not None and wanted.shape != sp.dense_shape.shape:
        raise ValueError(f"sparse.reset_shape: new_shape has rank {wanted.shape} but the SparseTensor has rank "
                         f"{sp.dense_shape.shape}")
    check = assert_greater_equal(wanted, sp.dense_shape,
                                 message="sparse.reset_shape: new_shape must be >= the old dense_shape in every "
                                         "dimension")
    with control_dependencies([check]):
        wanted = identity(wanted)
    return SparseTensor(sp.indices, sp.values, wanted)


def fill_empty_rows(sp_input, default_value, name=None):
    """``(filled, empty_row_indicator)``: each row (first index) that holds no entry gets one,
    ``default_value`` at column 0 (all later indices 0); entries stay ordered by row."""
    sp = _sparse("sparse.fill_empty_rows", sp_input)
    rows = _column(sp.indices, 0)
    n_rows = gather(sp.dense_shape, 0)
    counts = scatter_nd(expand_dims(rows, 1), ones_like(rows), reshape(n_rows, [1]))
    empty = equal(counts, 0)
    empty_rows = where(empty)  # [k, 1]
    rank = gather(shape(sp.indices), [1])
    filler = concat([empty_rows, fill(concat([gather(shape(empty_rows), [0]), rank - 1], 0), np.int64(0))], 1)
    default = cast(convert_to_tensor(default_value), sp.values.dtype) if sp.values.dtype != np.dtype(object) \
        else convert_to_tensor(np.asarray(default_value, dtype=object))
    # a gather of the default (not a Tile): its gradient sums the filled entries' gradients
    fill_values = gather(reshape(default, [1]), zeros_like(reshape(empty_rows, [-1])))
    indices = concat([sp.indices, filler], 0)
    values = concat([sp.values, fill_values], 0)
    order = argsort(_column(indices, 0), stable=True)
    filled = SparseTensor(gather(indices, order), gather(values, order, name=name), sp.dense_shape)
    return filled, empty


def to_indicator(sp_input, vocab_size: int, name=None) -> Tensor:
    """A dense bool tensor [*dense_shape[:-1], vocab_size]: true at each row's ids (the values)."""
    sp = _sparse("sparse.to_indicator", sp_input)
    if sp.values.dtype is not None and sp.values.dtype.kind not in "iu":
        raise TypeError(f"sparse.to_indicator: the values must be integer ids, got {sp.values.dtype}")
    outer = make_op("Slice", [sp.indices, np.array([0, 0], I64),
                              concat([np.array([2**62], I64), gather(shape(sp.indices), [1]) - 1], 0)]).outputs[0]
    ids = expand_dims(cast(sp.values, I64), 1)
    out_shape = concat([make_op("Slice", [sp.dense_shape, np.array([0], I64), np.array([-1], I64)]).outputs[0],
                        np.array([int(vocab_size)], I64)], 0)
    counts = scatter_nd(concat([outer, ids], 1), ones_like(cast(sp.values, np.int32)), out_shape)
    return greater(counts, 0) if name is None else identity(greater(counts, 0), name=name)


def _reduced_sparse(dense: Tensor, present: Tensor) -> SparseTensor:
    indices = where(present)
    return SparseTensor(indices, gather_nd(dense, indices), cast(shape(dense), I64))


def _axes(axis, reduction_axes):
    return axis if axis is not None else reduction_axes


def reduce_sum_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None) -> SparseTensor:
    """The sum over ``axis`` as a SparseTensor: one entry per output position some entry reduces
    into (a sum that comes to zero stays an entry)."""
    sp = _sparse("sparse.reduce_sum_sparse", sp_input)
    axes, keep = _axes(axis, reduction_axes), bool(keepdims or keep_dims)
    total = sparse_reduce_sum(sp, axis=axes, keepdims=keep)
    counts = sparse_reduce_sum(SparseTensor(sp.indices, ones_like(cast(sp.values, np.int32)), sp.dense_shape),
                               axis=axes, keepdims=keep)
    return _reduced_sparse(total, greater(counts, 0))


def _present_max(sp: SparseTensor, axes, keep: bool) -> tuple[Tensor, Tensor]:
    dtype = np.dtype(sp.values.dtype)
    lowest = -np.inf if dtype.kind == "f" else np.iinfo(dtype).min
    present = scatter_nd(sp.indices, ones_like(cast(sp.values, np.int32)), sp.dense_shape)
    dense = _select(greater(present, 0), scatter_nd(sp.indices, sp.values, sp.dense_shape), np.asarray(lowest, dtype))
    return reduce_max(dense, axis=axes, keepdims=keep), greater(reduce_sum(present, axis=axes, keepdims=keep), 0)


def _select(condition: Tensor, x: Tensor, y) -> Tensor:
    return make_op("Where", [condition, x, y]).outputs[0]


def reduce_max_to_dense(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None) -> Tensor:
    """``tf.sparse.reduce_max``: the dense maximum over ``axis`` of the stored entries only (absent
    entries take no part; a position no entry reduces into holds the dtype's lowest value, as
    TensorFlow's SparseReduceMax)."""
    sp = _sparse("sparse.reduce_max", sp_input)
    return _present_max(sp, _axes(axis, reduction_axes), bool(keepdims or keep_dims))[0]


def reduce_max_sparse(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None) -> SparseTensor:
    """The maximum over ``axis`` of the stored entries only, as a SparseTensor (one entry per output
    position some entry reduces into)."""
    sp = _sparse("sparse.reduce_max_sparse", sp_input)
    highest, present = _present_max(sp, _axes(axis, reduction_axes), bool(keepdims or keep_dims))
    return _reduced_sparse(highest, present)


# -- sparse segment reductions: rows of data picked by indices, then reduced by segment id -------------
def _segment_parts(data, indices, segment_ids, num_segments):
    picked = gather(convert_to_tensor(data), cast(convert_to_tensor(indices), I64))
    ids = cast(convert_to_tensor(segment_ids), I64)
    if num_segments is None:  # sorted ids: as many segments as the largest id says (none for no ids)
        count = reshape(reduce_max(concat([ids, np.array([-1], I64)], 0)) + 1, [1])
    else:
        count = reshape(cast(convert_to_tensor(num_segments), I64), [1])

    def total(x: Tensor) -> Tensor:
        inner = make_op("Slice", [cast(shape(x), I64), np.array([1], I64), np.array([2**62], I64)]).outputs[0]
        return scatter_nd(expand_dims(ids, 1), x, concat([count, inner], 0))

    return picked, total


def _scaled(data, indices, segment_ids, num_segments, name, scale) -> Tensor:
    picked, reduce = _segment_parts(data, indices, segment_ids, num_segments)
    total = reduce(picked)
    if scale is None:
        return identity(total, name=name) if name else total
    counts = scale(reduce(_rows_of(picked)))
    rank = picked.shape
    for _ in range(0 if rank is None else len(rank) - 1):
        counts = expand_dims(counts, -1)
    out = total / counts
    return identity(out, name=name) if name else out


def _rows_of(picked: Tensor) -> Tensor:
    """A 1 for each row of ``picked`` (its leading dimension), in its dtype."""
    return cast(fill(gather(shape(picked), [0]), np.int64(1)), picked.dtype)


def segment_sum(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """``out[s] = sum of data[indices[j]] over j with segment_ids[j] == s`` (TF's sparse segment sum)."""
    return _scaled(data, indices, segment_ids, num_segments, name, None)


def segment_mean(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """As ``segment_sum``, divided by each segment's row count (an empty segment stays 0)."""
    return _scaled(data, indices, segment_ids, num_segments, name,
                   lambda n: maximum(n, ones_like(n)))


def segment_sqrt_n(data, indices, segment_ids, name=None, num_segments=None) -> Tensor:
    """As ``segment_sum``, divided by the square root of each segment's row count."""
    return _scaled(data, indices, segment_ids, num_segments, name,
                   lambda n: sqrt(maximum(n, ones_like(n))))


def mask(a: IndexedSlices, mask_indices, name=None) -> IndexedSlices:
    """The IndexedSlices ``a`` without the slices whose index is in ``mask_indices``."""
    if not isinstance(a, IndexedSlices):
        raise TypeError(f"sparse.mask: a must be IndexedSlices, got {type(a).__name__}")
    masked = convert_to_tensor(mask_indices)
    hit = reduce_any(equal(expand_dims(a.indices, 1), expand_dims(cast(masked, a.indices.dtype), 0)), axis=1)
    kept = reshape(where(logical_not(hit)), [-1])
    return IndexedSlices(gather(a.values, kept, name=name), gather(a.indices, kept), a.dense_shape)


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0, validate_indices: bool = True,
                    name=None) -> Tensor:
    """``tf.sparse_to_dense``: a dense tensor of ``output_shape`` holding ``sparse_values`` (one, or
    one per index) at ``sparse_indices`` (a scalar, a vector of positions of a 1-D output, or
    [N, rank]) and ``default_value`` elsewhere."""
    indices = cast(convert_to_tensor(sparse_indices), I64)
    rank = None if indices.shape is None else len(indices.shape)
    if rank == 0:
        indices = reshape(indices, [1, 1])
    elif rank == 1:
        indices = expand_dims(indices, 1)
    values = convert_to_tensor(sparse_values)
    if values.shape is not None and len(values.shape) == 0:
        values = gather(reshape(values, [1]), zeros_like(gather(indices, 0, axis=1)))
    dense_shape = cast(reshape(convert_to_tensor(output_shape), [-1]), I64)
    stored = scatter_nd(indices, ones_like(cast(values, np.int32)), dense_shape)
    default = cast(convert_to_tensor(default_value), values.dtype)
    dense = _select(greater(stored, 0), scatter_nd(indices, values, dense_shape), default)
    return identity(dense, name=name) if name else dense




def as_sparse_rows(x, what: str = "sparse.cross") -> SparseTensor:
    """A SparseTensor as it is; a dense [batch, n] tensor as a SparseTensor holding every entry."""
    if isinstance(x, SparseTensor):
        return x
    dense = convert_to_tensor(x)
    if dense.shape is not None and len(dense.shape) != 2:
        raise ValueError(f"{what}: a dense input must be 2-D [batch, n], got shape {dense.shape}")
    every = where(make_op("ConstantOfShape", [shape(dense)], {"value": np.ones(1, bool)}).outputs[0])
    return SparseTensor(every, reshape(dense, [-1]), cast(shape(dense), I64))


def cross(inputs, name=None) -> SparseTensor:
    """Each row's feature crosses: every combination of the inputs' row values (int64 or string,
    SparseTensors or dense [batch, n] tensors), joined by ``"_X_"``, the last input varying fastest."""
    parts = [as_sparse_rows(x) for x in inputs]
    if not parts:
        raise ValueError("sparse.cross: inputs is empty")
    for k, p in enumerate(parts):
        if p.values.dtype is not None and p.values.dtype != np.dtype(object) and p.values.dtype.kind not in "iu":
            raise TypeError(f"sparse.cross: input {k} must hold int64 or string values, got {p.values.dtype}")
    indices, values, dense_shape = make_op(
        "SparseCross", [p.indices for p in parts] + [p.values for p in parts] + [p.dense_shape for p in parts],
        {"N": len(parts), "hashed_output": 0}, domain="flowstack", name=name or "SparseCross", num_outputs=3).outputs
    return SparseTensor(indices, values, dense_shape)

# TF 1.15's top-level spellings (tf.sparse_reorder, ...), imported by trainer/tf1.py.
TF_LEVEL_NAMES = ("sparse_fill_empty_rows", "sparse_mask", "sparse_reduce_max_sparse", "sparse_reduce_sum_sparse",
                  "sparse_reorder", "sparse_reset_shape", "sparse_retain", "sparse_segment_mean",
                  "sparse_segment_sqrt_n", "sparse_segment_sum", "sparse_to_dense", "sparse_to_indicator")
