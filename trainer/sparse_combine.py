"""TF 1.15's SparseTensor-to-SparseTensor operations: ``add`` (sparse + sparse with ``threshold``, or
sparse + dense giving dense), ``concat``, ``reshape``, ``slice``, ``split``, ``transpose``,
``expand_dims``, ``maximum`` / ``minimum``, ``softmax``, ``merge`` and ``eye``; and
``tf.edit_distance`` between the sequences two SparseTensors hold.

Each works on the three parts: an entry's place is its row-major key (``sum(index * stride)``),
so a union of entries is a sorted Unique of keys and a sum at a place is a segment sum. Results come
in row-major order, as TensorFlow's kernels give them. Gradients reach ``values`` through the
gathers and segment sums they are built of (TensorFlow's SparseAdd, SparseTensorDenseAdd,
SparseConcat, SparseReshape, SparseSlice and SparseSoftmax gradients, by composition).
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import expand_dims as dense_expand_dims
from trainer.array_ops import (boolean_mask, cumprod, floordiv, floormod, greater_equal, logical_and,
                               reduce_all, reduce_prod, reduce_sum, stack, unsorted_segment_sum)
from trainer.array_extras import tensor_scatter_nd_add
from trainer.debugging import assert_equal
from trainer.graph import Tensor, control_dependencies
from trainer.ops import concat as dense_concat
from trainer.ops import (abs as tf_abs, cast, convert_to_tensor, equal, exp, gather, identity, less, make_op, ones_like,
                         maximum as tf_maximum, minimum as tf_minimum, shape, stop_gradient, where)
from trainer.segment_ops import unsorted_segment_max
from trainer.sparse_ops import reorder
from trainer.sparse_tensor import SparseTensor

__all__ = ["add", "concat", "edit_distance", "expand_dims", "eye", "maximum", "merge", "minimum", "reshape", "slice",
           "softmax", "split", "transpose"]

I64 = np.int64


def _sparse(op: str, value, arg: str = "sp_input") -> SparseTensor:
    if not isinstance(value, SparseTensor):
        raise TypeError(f"{op}: {arg} must be a SparseTensor, got {type(value).__name__}")
    return value


def _rank(op: str, sp: SparseTensor) -> int:
    rank = sp.dense_shape.shape[0] if sp.dense_shape.shape else None
    if rank is None:
        raise ValueError(f"{op}: the SparseTensor's rank (the length of dense_shape) must be known")
    return rank


def _i64(value) -> Tensor:
    return cast(convert_to_tensor(value), I64)


def _keys(indices: Tensor, dense_shape: Tensor) -> Tensor:
    strides = cumprod(dense_shape, exclusive=True, reverse=True)
    return reduce_sum(indices * dense_expand_dims(strides, 0), axis=1)


def _coords(keys: Tensor, dense_shape: Tensor) -> Tensor:
    strides = cumprod(dense_shape, exclusive=True, reverse=True)
    place = floordiv(dense_expand_dims(keys, 1), dense_expand_dims(strides, 0))
    return floormod(place, dense_expand_dims(dense_shape, 0))


def _union(a: SparseTensor, b: SparseTensor, op: str):
    """(sorted union keys, each a-entry's and b-entry's position in them, their count), after
    checking that the two dense shapes agree."""
    check = assert_equal(a.dense_shape, b.dense_shape, message=f"{op}: the operands' dense shapes must be equal")
    with control_dependencies([check]):
        keys = dense_concat([_keys(a.indices, a.dense_shape), _keys(b.indices, b.dense_shape)], 0)
    unique, _, inverse, _ = make_op("Unique", [keys], {"sorted": 1}, num_outputs=4).outputs
    n_a = shape(a.indices)[:1]
    where_a = make_op("Slice", [inverse, np.array([0], I64), n_a]).outputs[0]
    where_b = make_op("Slice", [inverse, n_a, np.array([np.iinfo(I64).max], I64)]).outputs[0]
    return unique, where_a, where_b, shape(unique)[0]


# -- add -------------------------------------------------------------------------------------------
def add(a, b, threshold=None, thresh=None):
    """``a + b`` where at least one is a SparseTensor. Sparse + sparse is a SparseTensor on the union
    of their entries, keeping sums whose magnitude is at least ``threshold`` (all, at 0); sparse +
    dense is the dense sum."""
    if threshold is not None and thresh is not None:
        raise ValueError("sparse.add: give threshold or its deprecated name thresh, not both")
    limit = threshold if threshold is not None else (thresh if thresh is not None else 0)
    a_sparse, b_sparse = isinstance(a, SparseTensor), isinstance(b, SparseTensor)
    if not (a_sparse or b_sparse):
        raise TypeError("sparse.add: at least one of a and b must be a SparseTensor")
    if a_sparse != b_sparse:
        sp, dense = (a, b) if a_sparse else (b, a)
        return tensor_scatter_nd_add(convert_to_tensor(dense, dtype=sp.values.dtype), sp.indices, sp.values)
    if a.values.dtype != b.values.dtype:
        raise TypeError(f"sparse.add: a and b must have the same dtype, got {a.values.dtype} and {b.values.dtype}")
    keys, where_a, where_b, n = _union(a, b, "sparse.add")
    sums = unsorted_segment_sum(dense_concat([a.values, b.values], 0), dense_concat([where_a, where_b], 0), n)
    keep = greater_equal(tf_abs(sums), convert_to_tensor(limit, dtype=sums.dtype))
    return SparseTensor(_coords(boolean_mask(keys, keep), a.dense_shape), boolean_mask(sums, keep), a.dense_shape)


def _binary_on_union(op: str, fn, sp_a, sp_b, name) -> SparseTensor:
    a, b = _sparse(op, sp_a, "sp_a"), _sparse(op, sp_b, "sp_b")
    keys, where_a, where_b, n = _union(a, b, op)
    # an entry only one operand holds meets the other's implicit zero, as TensorFlow's kernel does
    a_at, b_at = unsorted_segment_sum(a.values, where_a, n), unsorted_segment_sum(b.values, where_b, n)
    return SparseTensor(_coords(keys, a.dense_shape), fn(a_at, b_at, name=name), a.dense_shape)


def maximum(sp_a, sp_b, name=None) -> SparseTensor:
    """The elementwise maximum of two SparseTensors of the same shape, on the union of their entries."""
    return _binary_on_union("sparse.maximum", tf_maximum, sp_a, sp_b, name)


def minimum(sp_a, sp_b, name=None) -> SparseTensor:
    """The elementwise minimum of two SparseTensors of the same shape, on the union of their entries."""
    return _binary_on_union("sparse.minimum", tf_minimum, sp_a, sp_b, name)


def _axis_mask(dense_shape: Tensor, axis: int) -> Tensor:
    """A 0/1 int64 vector over the dims, 1 at ``axis`` (negative counts from the end); works for a
    rank known only at run time."""
    from trainer.array_ops import range as tf_range

    rank = shape(dense_shape)[0]
    return cast(equal(tf_range(0, rank, dtype=I64), floormod(np.int64(axis), rank)), I64)


# -- concat, reshape, slice, split, transpose, expand_dims -----------------------------------------
def concat(axis, sp_inputs, name=None, expand_nonconcat_dim: bool = False, concat_dim=None,
           expand_nonconcat_dims=None) -> SparseTensor:
    """SparseTensors joined along ``axis``; the other dims must match, or with
    ``expand_nonconcat_dim`` grow to the largest."""
    axis = concat_dim if concat_dim is not None else axis
    expand = expand_nonconcat_dims if expand_nonconcat_dims is not None else expand_nonconcat_dim
    if not isinstance(sp_inputs, (list, tuple)) or not sp_inputs:
        raise ValueError("sparse.concat: sp_inputs must be a non-empty list of SparseTensors")
    sps = [_sparse("sparse.concat", sp, "sp_inputs") for sp in sp_inputs]
    if isinstance(axis, Tensor):
        raise ValueError(f"sparse.concat: axis must be a Python int, got {axis!r}")
    ranks = {sp.dense_shape.shape[0] for sp in sps if sp.dense_shape.shape and sp.dense_shape.shape[0] is not None}
    if len(ranks) > 1:
        raise ValueError(f"sparse.concat: all inputs must have the same rank, got {sorted(ranks)}")
    if ranks and not -min(ranks) <= int(axis) < min(ranks):
        raise ValueError(f"sparse.concat: axis {axis} is out of range for rank {min(ranks)}")
    along = _axis_mask(sps[0].dense_shape, int(axis))
    shapes = stack([sp.dense_shape for sp in sps])
    sizes = reduce_sum(shapes * dense_expand_dims(along, 0), axis=1)
    offsets = make_op("CumSum", [sizes, np.array(0, I64)], {"exclusive": 1}).outputs[0]
    indices = dense_concat([sp.indices + gather(offsets, k) * along for k, sp in enumerate(sps)], 0)
    other = 1 - along
    if expand:
        out_shape = make_op("ReduceMax", [shapes, np.array([0], I64)], {"keepdims": 0}).outputs[0] * other
    else:
        checks = [assert_equal(sp.dense_shape * other, sps[0].dense_shape * other,
                               message="sparse.concat: the inputs' dims other than axis must match "
                                       "(or pass expand_nonconcat_dim=True)") for sp in sps[1:]]
        with control_dependencies(checks):
            out_shape = identity(sps[0].dense_shape * other)
    out_shape = out_shape + reduce_sum(sizes) * along
    joined = SparseTensor(indices, dense_concat([sp.values for sp in sps], 0), out_shape)
    return reorder(joined, name=name)


def reshape(sp_input, shape, name=None) -> SparseTensor:  # noqa: A002 - TF's name
    """The same entries in a dense shape ``shape`` of as many elements (one dim may be -1)."""
    sp = _sparse("sparse.reshape", sp_input)
    want = _i64(shape)
    if want.shape is None or len(want.shape) != 1:
        raise ValueError(f"sparse.reshape: shape must be a 1-D vector, got {want.shape}")
    static = np.asarray(shape).reshape(-1) if not isinstance(shape, Tensor) else None
    if static is not None and (np.sum(static == -1) > 1 or np.any(static < -1)):
        raise ValueError(f"sparse.reshape: shape may hold at most one -1 and no other negative size, got "
                         f"{static.tolist()}")
    total = reduce_prod(sp.dense_shape)
    unknown = equal(want, np.int64(-1))
    known = reduce_prod(where(unknown, ones_like(want), want))
    out_shape = where(unknown, ones_like(want) * floordiv(total, tf_maximum(known, np.int64(1))), want)
    check = assert_equal(reduce_prod(out_shape), total,
                         message="sparse.reshape: the new shape must hold as many elements as the old")
    with control_dependencies([check]):
        keys = _keys(sp.indices, sp.dense_shape)
    return SparseTensor(_coords(keys, out_shape), identity(sp.values, name=name), out_shape)


def slice(sp_input, start, size, name=None) -> SparseTensor:  # noqa: A001 - TF's name
    """The entries inside the box ``[start, start + size)``, re-indexed from ``start``; the dense
    shape is the box cut to the input's."""
    sp = _sparse("sparse.slice", sp_input)
    lo, extent = _i64(start), _i64(size)
    hi = tf_minimum(lo + extent, sp.dense_shape)
    inside = reduce_all(logical_and(greater_equal(sp.indices, dense_expand_dims(lo, 0)),
                                    less(sp.indices, dense_expand_dims(hi, 0))), axis=1)
    out_shape = tf_maximum(hi - lo, np.int64(0))
    return SparseTensor(boolean_mask(sp.indices, inside) - dense_expand_dims(lo, 0),
                        boolean_mask(sp.values, inside, name=name or "boolean_mask"), out_shape)


def split(*, sp_input=None, num_split=None, axis=None, name=None, split_dim=None) -> list[SparseTensor]:
    """``sp_input`` cut into ``num_split`` pieces along ``axis``; the first ``size % num_split``
    pieces get one more slice (keyword arguments only, as TensorFlow requires)."""
    sp = _sparse("sparse.split", sp_input)
    axis = split_dim if split_dim is not None else axis
    if axis is None or isinstance(axis, Tensor) or num_split is None or isinstance(num_split, Tensor):
        raise ValueError("sparse.split: axis and num_split must be given as Python ints")
    num_split = int(num_split)
    if num_split < 1:
        raise ValueError(f"sparse.split: num_split must be positive, got {num_split}")
    rank = _rank("sparse.split", sp)
    if not -rank <= int(axis) < rank:
        raise ValueError(f"sparse.split: axis {axis} is out of range for rank {rank}")
    axis = int(axis) % rank
    along = np.eye(rank, dtype=I64)[axis]
    dim = gather(sp.dense_shape, axis)
    base, extra = floordiv(dim, np.int64(num_split)), floormod(dim, np.int64(num_split))
    pieces, begin = [], convert_to_tensor(np.int64(0))
    for k in range(num_split):
        length = base + cast(less(np.int64(k), extra), I64)
        start = begin * along
        size = sp.dense_shape * (1 - along) + length * along
        pieces.append(slice(sp, start, size, name=f"{name}_{k}" if name else None))
        begin = begin + length
    return pieces


def transpose(sp_input, perm=None, name=None) -> SparseTensor:
    """The SparseTensor with its dims permuted by ``perm`` (reversed by default), in row-major order."""
    sp = _sparse("sparse.transpose", sp_input)
    rank = _rank("sparse.transpose", sp)
    order = list(range(rank))[::-1] if perm is None else [int(p) for p in np.reshape(np.asarray(perm), -1)]
    if sorted(order) != list(range(rank)):
        raise ValueError(f"sparse.transpose: perm must be a permutation of 0..{rank - 1}, got {order}")
    perm_t = convert_to_tensor(np.asarray(order, I64))
    moved = SparseTensor(gather(sp.indices, perm_t, axis=1), sp.values, gather(sp.dense_shape, perm_t))
    return reorder(moved, name=name)


def expand_dims(sp_input, axis=None, name=None) -> SparseTensor:
    """A dim of size 1 inserted at ``axis`` (negative counts from the end of the result)."""
    sp = _sparse("sparse.expand_dims", sp_input)
    rank = _rank("sparse.expand_dims", sp)
    axis = -1 if axis is None else int(axis)
    if not -rank - 1 <= axis <= rank:
        raise ValueError(f"sparse.expand_dims: axis {axis} is out of range for rank {rank}")
    axis %= rank + 1
    n = shape(sp.indices)[:1]
    zeros = make_op("ConstantOfShape", [dense_concat([n, np.array([1], I64)], 0)],
                    {"value": np.zeros(1, I64)}).outputs[0]
    before = make_op("Slice", [sp.indices, np.array([0], I64), np.array([axis], I64), np.array([1], I64)]).outputs[0]
    after = make_op("Slice", [sp.indices, np.array([axis], I64), np.array([rank], I64), np.array([1], I64)]).outputs[0]
    dims_before = make_op("Slice", [sp.dense_shape, np.array([0], I64), np.array([axis], I64)]).outputs[0]
    dims_after = make_op("Slice", [sp.dense_shape, np.array([axis], I64), np.array([rank], I64)]).outputs[0]
    return SparseTensor(dense_concat([before, zeros, after], 1), identity(sp.values, name=name),
                        dense_concat([dims_before, np.array([1], I64), dims_after], 0))


# -- softmax, merge, eye, reduce_max ---------------------------------------------------------------
def softmax(sp_input, name=None) -> SparseTensor:
    """Softmax over each innermost row's stored entries (absent entries take no part); same indices."""
    sp = _sparse("sparse.softmax", sp_input)
    if _rank("sparse.softmax", sp) < 2:
        raise ValueError("sparse.softmax: sp_input must have rank 2 or more")
    rows = floordiv(_keys(sp.indices, sp.dense_shape), gather(sp.dense_shape, -1))
    distinct, _, row_ids, _ = make_op("Unique", [rows], {"sorted": 1}, num_outputs=4).outputs
    n_rows = shape(distinct)[0]
    # the shift by each row's maximum only keeps exp in range: softmax does not depend on it
    shift = stop_gradient(gather(unsorted_segment_max(sp.values, row_ids, n_rows), row_ids))
    e = exp(sp.values - shift)
    return SparseTensor(sp.indices, e / gather(unsorted_segment_sum(e, row_ids, n_rows), row_ids, name=name),
                        sp.dense_shape)


def merge(sp_ids, sp_values, vocab_size, name=None, already_sorted: bool = False) -> SparseTensor:
    """``sp_values``' entries placed by id: each entry's last index is replaced by its id from
    ``sp_ids`` (one trailing dim of ``vocab_size`` per SparseTensor when given lists)."""
    ids = [sp_ids] if isinstance(sp_ids, SparseTensor) else list(sp_ids)
    sizes = [vocab_size] if isinstance(sp_ids, SparseTensor) else list(vocab_size)
    if not ids or len(ids) != len(sizes):
        raise ValueError("sparse.merge: sp_ids and vocab_size must be a SparseTensor and a size, or lists of the "
                         "same length")
    for sp in ids:
        _sparse("sparse.merge", sp, "sp_ids")
        if sp.values.dtype is not None and sp.values.dtype.kind not in "iu":
            raise TypeError(f"sparse.merge: sp_ids must hold integer ids, got {sp.values.dtype}")
    values = _sparse("sparse.merge", sp_values, "sp_values")
    rank = _rank("sparse.merge", ids[0])
    outer = make_op("Slice", [ids[0].indices, np.array([0], I64), np.array([rank - 1], I64), np.array([1], I64)])
    lead = make_op("Slice", [ids[0].dense_shape, np.array([0], I64), np.array([rank - 1], I64)]).outputs[0]
    indices = dense_concat([outer.outputs[0]] + [dense_expand_dims(_i64(sp.values), 1) for sp in ids], 1)
    out_shape = dense_concat([lead, stack([_i64(s) for s in sizes])], 0)
    merged = SparseTensor(indices, values.values, out_shape)
    return SparseTensor(merged.indices, identity(merged.values, name=name), merged.dense_shape) if already_sorted \
        else reorder(merged, name=name)


def eye(num_rows, num_columns=None, dtype=np.float32, name=None) -> SparseTensor:
    """The sparse identity matrix of ``num_rows`` x ``num_columns`` (square by default)."""
    from trainer.array_ops import range as tf_range
    from trainer.dtypes import as_numpy_dtype

    rows = _i64(num_rows)
    cols = rows if num_columns is None else _i64(num_columns)
    diag = tf_range(0, tf_minimum(rows, cols), dtype=I64)
    values = cast(diag * 0 + 1, as_numpy_dtype(dtype), name=name)
    return SparseTensor(stack([diag, diag], axis=1), values, stack([rows, cols]))



def edit_distance(hypothesis, truth, normalize: bool = True, name: str = "edit_distance") -> Tensor:
    """The Levenshtein distance between the sequences ``hypothesis`` and ``truth`` (SparseTensors of
    the same rank) hold along their last dim, per position of the other dims; divided by the truth's
    length when ``normalize`` (inf where the truth is empty and the hypothesis not)."""
    h = _sparse("edit_distance", hypothesis, "hypothesis")
    t = _sparse("edit_distance", truth, "truth")
    if h.values.dtype != t.values.dtype:
        raise TypeError(f"edit_distance: hypothesis and truth must have the same dtype, got {h.values.dtype} and "
                        f"{t.values.dtype}")
    return make_op("EditDistance", [h.indices, h.values, h.dense_shape, t.indices, t.values, t.dense_shape],
                   {"normalize": int(bool(normalize))}, domain="flowstack", name=name).outputs[0]
