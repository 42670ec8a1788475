"""Sparse access ops (domain ``flowstack``, TensorFlow's names): routing rows to the shards of a
partitioned variable and back, summing duplicate rows, and applying sparse gradients in place.

``DynamicPartition`` splits rows by a partition index, ``DynamicStitch`` merges them back by
position (embedding_lookup over shards is built from them); ``UnsortedSegmentSum`` sums rows that
share a segment id (duplicate ids of a sparse gradient). The ``SparseApply*`` ops update only the
rows ``indices`` names of a variable and its slots; ``indices`` must hold no duplicates (the
optimizer sums duplicates first). Their kernels are stateful (they write session state).
"""

from __future__ import annotations

import numpy as np


from schemas.ops.rules import INT64, const_ints, same_as_input
from schemas.registry import REQUIRED, Attr, TensorType, op

STRING = np.dtype(object)

D = "flowstack"


@op("DynamicPartition", domain=D, inputs=["data", "partitions"], outputs=["outputs+"],
    attrs={"num_partitions": Attr("int", REQUIRED)}, output_count_attr="num_partitions", differentiable=True,
    doc="outputs[i] = the rows (leading entries) of data whose partitions value is i, in order.")
def _dynamic_partition(ctx):
    data, parts = ctx.input(0), ctx.input(1)
    n = ctx.attrs["num_partitions"]
    if n < 1:
        raise ctx.fail(f"num_partitions must be >= 1, got {n}")
    if parts.dtype is not None and parts.dtype.kind not in "iu":
        raise ctx.fail(f"partitions must be integers, got {parts.dtype}")
    inner = None
    if data.shape is not None and parts.shape is not None:
        inner = (None,) + tuple(data.shape[len(parts.shape):])
    return [TensorType(data.dtype, inner)] * n


@op("DynamicStitch", domain=D, inputs=["inputs+"], outputs=["merged"], attrs={"N": Attr("int", REQUIRED)},
    differentiable=True,
    doc="inputs are N index tensors then N data tensors: merged[indices[i][j]] = data[i][j]; rows "
        "are the leading entries of data, so merged has max(index)+1 rows.")
def _dynamic_stitch(ctx):
    n = ctx.attrs["N"]
    if n < 1 or ctx.num_inputs != 2 * n:
        raise ctx.fail(f"needs N={n} index tensors and N data tensors, got {ctx.num_inputs} inputs")
    data, idx = ctx.input(n), ctx.input(0)
    inner = None
    if data.shape is not None and idx.shape is not None:
        inner = (None,) + tuple(data.shape[len(idx.shape):])
    return [TensorType(data.dtype, inner)]


@op("UnsortedSegmentSum", domain=D, inputs=["data", "segment_ids", "num_segments"], outputs=["output"],
    differentiable=True, doc="output[s] = sum of the rows of data whose segment id is s (num_segments rows).")
def _unsorted_segment_sum(ctx):
    data, ids = ctx.input(0), ctx.input(1)
    inner = None
    if data.shape is not None and ids.shape is not None:
        inner = (None,) + tuple(data.shape[len(ids.shape):])
    return [TensorType(data.dtype, inner)]


# -- segment reductions beyond the sum (tf.segment_max & co.) ---------------------------------------
def _integer_ids(ctx, ids):
    if ids.dtype is not None and ids.dtype.kind not in "iu":
        raise ctx.fail(f"segment_ids must be int32 or int64, got {ids.dtype}")


def _sorted_segments(ctx):
    """segment_ids is a sorted vector, one id per row of data; output rows: the last id + 1."""
    data, ids = ctx.input(0), ctx.input(1)
    _integer_ids(ctx, ids)
    if ids.shape is not None and len(ids.shape) != 1:
        raise ctx.fail(f"segment_ids should be a vector, got shape {ids.shape}")
    if data.shape is not None and ids.shape is not None:
        if not data.shape:
            raise ctx.fail("data must be at least a vector")
        if None not in (data.shape[0], ids.shape[0]) and data.shape[0] != ids.shape[0]:
            raise ctx.fail(f"segment_ids should be the same size as dimension 0 of data: {ids.shape[0]} vs "
                           f"{data.shape[0]}")
    return [TensorType(data.dtype, None if data.shape is None else (None,) + tuple(data.shape[1:]))]


def _unsorted_segments(ctx):
    """segment_ids leads data's shape; output rows: num_segments."""
    data, ids = ctx.input(0), ctx.input(1)
    _integer_ids(ctx, ids)
    if data.shape is None or ids.shape is None:
        return [TensorType(data.dtype, None)]
    lead = tuple(data.shape[:len(ids.shape)])
    if len(lead) != len(ids.shape) or any(a is not None and b is not None and a != b for a, b in zip(lead, ids.shape)):
        raise ctx.fail(f"segment_ids of shape {ids.shape} must lead data of shape {data.shape}")
    n = const_ints(ctx, 2)
    return [TensorType(data.dtype, (n[0] if n else None,) + tuple(data.shape[len(ids.shape):]))]


op("SegmentMax", domain=D, inputs=["data", "segment_ids"], outputs=["output"], differentiable=True,
   doc="output[s] = max of the rows of data whose (sorted) segment id is s; 0 for an empty segment.")(
    _sorted_segments)
op("SegmentMin", domain=D, inputs=["data", "segment_ids"], outputs=["output"], differentiable=True,
   doc="output[s] = min of the rows of data whose (sorted) segment id is s; 0 for an empty segment.")(
    _sorted_segments)
op("SegmentProd", domain=D, inputs=["data", "segment_ids"], outputs=["output"],
   doc="output[s] = product of the rows of data whose (sorted) segment id is s; 1 for an empty segment.")(
    _sorted_segments)
op("UnsortedSegmentMax", domain=D, inputs=["data", "segment_ids", "num_segments"], outputs=["output"],
   differentiable=True, doc="output[s] = max of the rows with segment id s (the dtype's lowest value if none); "
                            "negative ids are dropped.")(_unsorted_segments)
op("UnsortedSegmentMin", domain=D, inputs=["data", "segment_ids", "num_segments"], outputs=["output"],
   differentiable=True, doc="output[s] = min of the rows with segment id s (the dtype's highest value if none); "
                            "negative ids are dropped.")(_unsorted_segments)
op("UnsortedSegmentProd", domain=D, inputs=["data", "segment_ids", "num_segments"], outputs=["output"],
   differentiable=True, doc="output[s] = product of the rows with segment id s (1 if none); negative ids are dropped.")(
    _unsorted_segments)


# -- sparse updates: rows ``indices`` of var (and its slots), in place -------------------------
op("SparseApplyAdagrad", domain=D, inputs=["var", "accum", "lr", "grad", "indices"], outputs=["out"],
   stateful=True, doc="accum[i] += g*g; var[i] -= lr * g / sqrt(accum[i]) for the rows i in indices.")(
    same_as_input(0))
op("SparseApplyMomentum", domain=D, inputs=["var", "accum", "lr", "grad", "indices", "momentum"],
   outputs=["out"], stateful=True, attrs={"use_nesterov": Attr("int", 0)},
   doc="accum[i] = momentum*accum[i] + g; var[i] -= lr*accum[i] (Nesterov: lr*(g + momentum*accum[i])).")(
    same_as_input(0))
op("SparseApplyAdam", domain=D,
   inputs=["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad", "indices"],
   outputs=["out"], stateful=True,
   doc="Lazy Adam: m, v and var change in the rows in indices only (TF's LazyAdamOptimizer).")(
    same_as_input(0))




@op("SparseCross", domain=D, inputs=["inputs+"], outputs=["output_indices", "output_values", "output_shape"],
    attrs={"N": Attr("int", REQUIRED), "hashed_output": Attr("int", 1), "num_buckets": Attr("int", 0),
           "hash_key": Attr("int", 0)},
    doc="TensorFlow's SparseCross: inputs are N [nnz, 2] index tensors, N value tensors (strings or int64) "
        "and N dense shapes of [batch, k] sparse features; each row's output holds one entry per combination "
        "of one entry from every input (the last varying fastest). Hashed (hashed_output=1): FingerprintCat64 "
        "folded from hash_key, modulo num_buckets (or int64 max when 0), as int64. Otherwise the entries' "
        "text joined by '_X_', as strings.")
def _sparse_cross(ctx):
    n = ctx.attrs["N"]
    if n < 1 or ctx.num_inputs != 3 * n:
        raise ctx.fail(f"needs N={n} indices, N values and N dense shapes, got {ctx.num_inputs} inputs")
    if ctx.attrs["num_buckets"] < 0:
        raise ctx.fail(f"num_buckets must be >= 0, got {ctx.attrs['num_buckets']}")
    values = INT64 if ctx.attrs["hashed_output"] else STRING
    return [TensorType(INT64, (None, 2)), TensorType(values, (None,)), TensorType(INT64, (2,))]


@op("SetOperation", domain=D, inputs=["a_indices", "a_values", "a_shape", "b_indices", "b_values", "b_shape"],
    outputs=["result_indices", "result_values", "result_shape"],
    attrs={"set_operation": Attr("string", REQUIRED)},
    doc="TensorFlow's SparseToSparseSetOperation: for each group of the last dimension of two sparse "
        "tensors (same leading shape), the sorted a-b, b-a, intersection or union of their values.")
def _set_operation(ctx):
    kind = ctx.attrs["set_operation"]
    if kind not in ("a-b", "b-a", "intersection", "union"):
        raise ctx.fail(f"set_operation must be a-b, b-a, intersection or union, got {kind!r}")
    a, b = ctx.input(1).dtype, ctx.input(4).dtype
    if a is not None and b is not None and a != b:
        raise ctx.fail(f"a and b must hold one dtype, got {a} and {b}")
    rank = ctx.input(2).shape[0] if ctx.input(2).shape else None
    return [TensorType(INT64, (None, rank)), TensorType(a, (None,)), TensorType(INT64, (rank,))]


@op("SetSize", domain=D, inputs=["set_indices", "set_values", "set_shape"], outputs=["size"],
    doc="TensorFlow's SetSize: the number of distinct values in each group of the last dimension of a "
        "sparse tensor, as int32 of its leading shape.")
def _set_size(ctx):
    rank = ctx.input(2).shape[0] if ctx.input(2).shape else None
    return [TensorType(np.dtype(np.int32), None if rank is None else (None,) * (rank - 1))]


@op("EditDistance", domain=D,
    inputs=["hypothesis_indices", "hypothesis_values", "hypothesis_shape", "truth_indices", "truth_values",
            "truth_shape"], outputs=["output"], attrs={"normalize": Attr("int", 1)},
    doc="TensorFlow's EditDistance: the Levenshtein distance between the sequences two SparseTensors hold "
        "along their last dim, one per position of the other dims (the larger of the two shapes), divided by "
        "the truth's length when ``normalize``. float32; no gradient.")
def _edit_distance(ctx):
    for k in (0, 3):
        ind = ctx.input(k)
        if ind.shape is not None and len(ind.shape) != 2:
            raise ctx.fail(f"input {k} (indices) must be a matrix, got shape {ind.shape}")
    for k in (2, 5):
        s = ctx.input(k)
        if s.shape is not None and len(s.shape) != 1:
            raise ctx.fail(f"input {k} (dense shape) must be a vector, got shape {s.shape}")
    hv, tv = ctx.input(1), ctx.input(4)
    if hv.dtype is not None and tv.dtype is not None and hv.dtype != tv.dtype:
        raise ctx.fail(f"hypothesis and truth values must share a dtype, got {hv.dtype} and {tv.dtype}")
    shape = ctx.input(2).shape or ctx.input(5).shape
    rank = shape[0] if shape else None
    return [TensorType(np.dtype(np.float32), None if rank is None else (None,) * (rank - 1))]
