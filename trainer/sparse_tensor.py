"""``tf.SparseTensor`` and the TF 1.x functions on it: a sparse value as three tensors, ``indices``
(int64 [N, rank]), ``values`` ([N]) and ``dense_shape`` (int64 [rank]).

A SparseTensor is fed (``sparse_placeholder``, fed a ``SparseTensorValue`` or an (indices, values,
shape) tuple) and fetched (a ``SparseTensorValue``) like a tensor; ``sparse_tensor_to_dense``,
``sparse_reduce_sum``, ``sparse_tensor_dense_matmul`` and ``nn.embedding_lookup_sparse`` are built
from gathers, ScatterND and segment sums, so gradients reach ``values`` and the dense operands.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from trainer.array_ops import expand_dims, fill, less_equal, reduce_sum, scatter_nd
from trainer.dtypes import as_dtype
from trainer.graph import Tensor
from trainer.ops import (cast, concat, constant, convert_to_tensor, gather, identity, make_op, ones_like, placeholder,
                         reshape, shape, sqrt, transpose)

__all__ = ["SparseTensor", "SparseTensorValue", "embedding_lookup_sparse", "safe_embedding_lookup_sparse",
           "sparse_placeholder", "sparse_reduce_sum",
           "sparse_tensor_dense_matmul", "sparse_tensor_to_dense"]

SparseTensorValue = namedtuple("SparseTensorValue", ["indices", "values", "dense_shape"])


class SparseTensor:
    """``SparseTensor(indices, values, dense_shape)``, each a tensor or a value convertible to one."""

    def __init__(self, indices, values, dense_shape):
        self.indices = cast(convert_to_tensor(indices), np.int64) if not _is_int64(indices) else indices
        self.values = convert_to_tensor(values)
        self.dense_shape = cast(convert_to_tensor(dense_shape), np.int64) if not _is_int64(dense_shape) else dense_shape

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def graph(self):
        return self.values.graph

    @property
    def shape(self):
        rank = self.dense_shape.shape[0] if self.dense_shape.shape else None
        return None if rank is None else (None,) * rank

    def get_shape(self):
        from trainer.tensor_shape import TensorShape

        return TensorShape(self.shape)

    # -- the Session's composite protocol: fetched and fed as its three parts ---------------------
    def composite_parts(self) -> list[Tensor]:
        return [self.indices, self.values, self.dense_shape]

    @staticmethod
    def composite_value(values) -> SparseTensorValue:
        return SparseTensorValue(*values)

    @staticmethod
    def composite_feed(value) -> list:
        """A fed ``SparseTensorValue`` (or an (indices, values, dense_shape) tuple) as its three arrays."""
        if isinstance(value, SparseTensorValue) or (isinstance(value, tuple) and len(value) == 3):
            indices, values, dense_shape = value
            return [np.asarray(indices, np.int64), np.asarray(values), np.asarray(dense_shape, np.int64)]
        raise TypeError(f"a SparseTensor is fed a SparseTensorValue or an (indices, values, dense_shape) tuple, got "
                        f"{type(value).__name__}")

    def __repr__(self) -> str:
        return f"SparseTensor(indices={self.indices!r}, values={self.values!r}, dense_shape={self.dense_shape!r})"


def _is_int64(x) -> bool:
    return isinstance(x, Tensor) and x.dtype == np.int64


def sparse_placeholder(dtype, shape=None, name=None) -> SparseTensor:
    """A SparseTensor whose indices, values and dense shape are fed together."""
    rank = None if shape is None else len(shape)
    prefix = name or "Placeholder"
    return SparseTensor(placeholder(np.int64, [None, rank], name=f"{prefix}/indices"),
                        placeholder(as_dtype(dtype).as_numpy_dtype, [None], name=f"{prefix}/values"),
                        placeholder(np.int64, [rank], name=f"{prefix}/shape"))


def sparse_tensor_to_dense(sp_input: SparseTensor, default_value=None, validate_indices: bool = True,
                           name=None) -> Tensor:
    """The dense tensor: ``values`` at ``indices``, ``default_value`` (0, or "" for strings) elsewhere.
    The values are written over a tensor of the default, so any dtype works (string_split's words
    included); the gradient reaches ``values`` through ScatterND's."""
    values = convert_to_tensor(sp_input.values)
    dtype = np.dtype(values.dtype)
    if default_value is None:
        default_value = "" if dtype.kind in "OUS" else 0
    fill_value = np.asarray(default_value, dtype=object if dtype.kind in "OUS" else dtype)
    base = fill(cast(sp_input.dense_shape, np.int64), fill_value)
    indices = cast(convert_to_tensor(sp_input.indices), np.int64)
    dense = make_op("ScatterND", [base, indices, values], name=name).outputs[0]
    return dense


def sparse_reduce_sum(sp_input: SparseTensor, axis=None, keepdims: bool = False, reduction_axes=None,
                      keep_dims=None) -> Tensor:
    axis = axis if axis is not None else reduction_axes
    return reduce_sum(sparse_tensor_to_dense(sp_input), axis=axis, keepdims=bool(keepdims or keep_dims))


def sparse_tensor_dense_matmul(sp_a: SparseTensor, b, adjoint_a: bool = False, adjoint_b: bool = False,
                               name=None) -> Tensor:
    """``A @ B`` for a 2-D sparse ``A``: each stored ``A[i, j]`` adds ``A[i, j] * B[j]`` to row ``i``."""
    b = convert_to_tensor(b)
    if adjoint_b:
        b = transpose(b, [1, 0])
    rows, cols = gather(sp_a.indices, 0, axis=1), gather(sp_a.indices, 1, axis=1)
    if adjoint_a:
        rows, cols = cols, rows
    n_rows = gather(sp_a.dense_shape, 1 if adjoint_a else 0)
    contributions = expand_dims(sp_a.values, 1) * gather(b, cols)
    out_shape = concat([reshape(n_rows, [1]), gather(shape(b), [1])], 0)
    return scatter_nd(expand_dims(rows, 1), contributions, out_shape, name=name)


_COMBINERS = ("sum", "mean", "sqrtn")


def embedding_lookup_sparse(params, sp_ids: SparseTensor, sp_weights: SparseTensor | None, partition_strategy="mod",
                            name=None, combiner: str = "mean", max_norm=None) -> Tensor:
    """Row ``i`` combines the embeddings of row ``i``'s ids (weighted by ``sp_weights``' values):
    their sum, weighted mean, or sum over the root of the summed squared weights (``sqrtn``)."""
    if combiner not in _COMBINERS:
        raise ValueError(f"combiner must be one of {_COMBINERS}, got {combiner!r}")
    if max_norm is not None:
        raise NotImplementedError("embedding_lookup_sparse: max_norm is not supported")
    table = params[0] if isinstance(params, (list, tuple)) and len(params) == 1 else params
    if isinstance(table, (list, tuple)):
        raise NotImplementedError("embedding_lookup_sparse: pass one table (a partitioned variable works as one)")
    table = convert_to_tensor(table)
    rows = expand_dims(gather(sp_ids.indices, 0, axis=1), 1)
    embedded = gather(table, sp_ids.values)
    weights = None if sp_weights is None else cast(sp_weights.values, table.dtype)
    if weights is not None:
        embedded = embedded * expand_dims(weights, 1)
    out_shape = concat([reshape(gather(sp_ids.dense_shape, 0), [1]), gather(shape(table), [1])], 0)
    total = scatter_nd(rows, embedded, out_shape)
    if combiner == "sum":
        return identity(total, name=name) if name else total
    w = weights if weights is not None else cast(ones_like(sp_ids.values), table.dtype)
    per_row = scatter_nd(rows, w if combiner == "mean" else w * w, gather(sp_ids.dense_shape, [0]))
    norm = per_row if combiner == "mean" else sqrt(per_row)
    safe = norm + cast(less_equal(norm, 0), table.dtype)  # a row with no ids stays zeros
    combined = total / expand_dims(safe, 1)
    return identity(combined, name=name) if name else combined


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids: SparseTensor,
                                 sparse_weights: SparseTensor | None = None, combiner: str = "mean", default_id=None,
                                 name=None, partition_strategy="div", max_norm=None) -> Tensor:
    """TF1's ``tf.nn.safe_embedding_lookup_sparse``: ``embedding_lookup_sparse`` over [batch, n]
    ids that ignores invalid ids (< 0) and non-positive weights; a row left with no valid id is
    zeros, or the embedding of ``default_id`` when one is given."""
    if sparse_ids.shape is not None and len(sparse_ids.shape) != 2:
        raise ValueError(f"safe_embedding_lookup_sparse: sparse_ids must be rank 2 ([batch, ids]), got shape "
                         f"{sparse_ids.shape}")
    table = convert_to_tensor(embedding_weights[0] if isinstance(embedding_weights, (list, tuple))
                              and len(embedding_weights) == 1 else embedding_weights)
    ids = cast(sparse_ids.values, np.int64)
    zero_id, zero = constant(np.asarray(0, np.int64)), constant(np.asarray(0, table.dtype))
    valid = make_op("GreaterOrEqual", [ids, zero_id]).outputs[0]
    weights = ones_like(cast(ids, table.dtype)) if sparse_weights is None else cast(sparse_weights.values, table.dtype)
    if sparse_weights is not None:
        valid = make_op("And", [valid, make_op("Greater", [weights, zero]).outputs[0]]).outputs[0]
    kept_ids = SparseTensor(sparse_ids.indices, make_op("Where", [valid, ids, zero_id]).outputs[0],
                            sparse_ids.dense_shape)
    kept_weights = SparseTensor(sparse_ids.indices, make_op("Where", [valid, weights, zero]).outputs[0],
                                sparse_ids.dense_shape)
    combined = embedding_lookup_sparse(table, kept_ids, kept_weights, combiner=combiner, max_norm=max_norm)
    if default_id is not None:
        rows = expand_dims(gather(sparse_ids.indices, 0, axis=1), 1)
        counts = scatter_nd(rows, cast(valid, table.dtype), gather(sparse_ids.dense_shape, [0]))
        empty = expand_dims(less_equal(counts, 0), 1)
        fallback = gather(table, constant(np.asarray([int(default_id)], np.int64)))
        combined = make_op("Where", [empty, fallback, combined]).outputs[0]
    return identity(combined, name=name) if name else combined
