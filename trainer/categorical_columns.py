"""``tf.feature_column``'s categorical columns and the dense columns built on them, as the TF1
Estimator tutorials (census "wide and deep") use them.

A categorical column turns ``features[key]`` (a dense [batch] or [batch, k] tensor of strings or
ints, or a SparseTensor, as VarLenFeature parses one) into ids in ``[0, num_buckets)``, as a
SparseTensor of [batch, k]. As in TensorFlow, a dense input's empty strings (string columns) or
-1s (integer columns) are no entry, and an entry without an id (out of a vocabulary without OOV
buckets) is dropped. ``indicator_column`` makes the ids a multi-hot [batch, num_buckets] and
``embedding_column`` the combined rows of an ``embedding_weights`` variable; ``bucketized_column``
is a dense one-hot and a categorical column over a numeric one.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Callable

import numpy as np

from trainer.array_ops import (boolean_mask, expand_dims, gather_nd, greater_equal, logical_and, not_equal, reduce_sum,
                               scatter_nd, stack, where)
from trainer.lookup_ops import index_table_from_tensor, read_vocabulary
from trainer.ops import cast, convert_to_tensor, gather, less, ones_like, reshape, shape
from trainer.sparse_tensor import SparseTensor, embedding_lookup_sparse

__all__ = ["BucketizedColumn", "CategoricalColumn", "EmbeddingColumn", "IndicatorColumn", "bucketized_column",
           "categorical_column_with_hash_bucket", "categorical_column_with_identity",
           "categorical_column_with_vocabulary_file", "categorical_column_with_vocabulary_list", "embedding_column",
           "indicator_column", "make_parse_example_spec"]


def _entries(value) -> SparseTensor:
    """A feature's entries as a [batch, k] SparseTensor (a dense [batch] is [batch, 1]); a dense
    input's "" or -1 is no entry."""
    if isinstance(value, SparseTensor):
        return value
    dense = convert_to_tensor(value)
    if dense.shape is not None and len(dense.shape) == 1:
        dense = expand_dims(dense, 1)
    ignore = np.array("", dtype=object) if np.dtype(dense.dtype) == object else np.array(-1, np.dtype(dense.dtype))
    indices = where(not_equal(dense, ignore))
    return SparseTensor(indices, gather_nd(dense, indices), shape(dense))


def _kept(ids: SparseTensor) -> SparseTensor:
    """Only the entries that have an id (>= 0)."""
    keep = greater_equal(ids.values, 0)
    return SparseTensor(boolean_mask(ids.indices, keep), boolean_mask(ids.values, keep), ids.dense_shape)


class IdColumn(abc.ABC):
    """What every categorical column offers: ``ids(features)``, a [batch, k] SparseTensor of ids in
    ``[0, num_buckets)``, ``id_weights`` (those ids with a SparseTensor of their weights, or None)
    and the ``parse_example_spec`` of the features it reads."""

    name: str
    num_buckets: int

    @abc.abstractmethod
    def ids(self, features: dict) -> SparseTensor:
        """The [batch, k] ids."""

    def id_weights(self, features: dict) -> tuple[SparseTensor, SparseTensor | None]:
        return self.ids(features), None

    @abc.abstractmethod
    def parse_example_spec(self) -> dict:
        """{feature key: FixedLenFeature or VarLenFeature} of the features the column reads."""


@dataclass(frozen=True)
class CategoricalColumn(IdColumn):
    """``key``'s entries as ids in ``[0, num_buckets)``, through ``to_ids`` (a tensor of entries ->
    int64 ids, -1 for none)."""

    key: str
    num_buckets: int
    to_ids: Callable = None
    dtype: np.dtype = np.dtype(object)  # what a parsed Example holds for it

    @property
    def name(self) -> str:
        return self.key

    def entry_ids(self, features: dict) -> SparseTensor:
        """Every entry's id, -1 where it has none (``ids`` drops those)."""
        if self.key not in features:
            raise KeyError(f"feature column {self.key!r} is not among the features {sorted(features)}")
        entries = _entries(features[self.key])
        return SparseTensor(entries.indices, self.to_ids(entries.values), entries.dense_shape)

    def ids(self, features: dict) -> SparseTensor:
        return _kept(self.entry_ids(features))

    def parse_example_spec(self) -> dict:
        from trainer.parsing import VarLenFeature

        return {self.key: VarLenFeature(self.dtype)}


def _vocabulary_ids(keys: np.ndarray, num_oov_buckets: int, default_value: int):
    """Ids by a vocabulary table, built in the graph of each call (columns are graph-independent)."""
    return lambda values: index_table_from_tensor(keys, num_oov_buckets=num_oov_buckets,
                                                  default_value=default_value).lookup(values)


def categorical_column_with_vocabulary_list(key: str, vocabulary_list, dtype=None, default_value: int = -1,
                                            num_oov_buckets: int = 0) -> CategoricalColumn:
    vocabulary = list(vocabulary_list)
    if not vocabulary or len(set(vocabulary)) != len(vocabulary):
        raise ValueError(f"categorical_column_with_vocabulary_list {key!r}: the vocabulary must be non-empty and "
                         f"without duplicates")
    keys = np.array(vocabulary, dtype=object if isinstance(vocabulary[0], (str, bytes)) else np.int64)
    return CategoricalColumn(key, len(vocabulary) + num_oov_buckets, _vocabulary_ids(keys, num_oov_buckets, default_value),
                             keys.dtype)


def categorical_column_with_vocabulary_file(key: str, vocabulary_file, vocabulary_size=None, num_oov_buckets: int = 0,
                                            default_value=None, dtype=None) -> CategoricalColumn:
    """As ``categorical_column_with_vocabulary_list`` over the file's tokens, one a line (read now)."""
    tokens = read_vocabulary(vocabulary_file, vocabulary_size, f"categorical_column_with_vocabulary_file {key!r}")
    keys = np.array(tokens, dtype=object)
    fallback = -1 if default_value is None else default_value
    return CategoricalColumn(key, len(tokens) + num_oov_buckets, _vocabulary_ids(keys, num_oov_buckets, fallback))


def categorical_column_with_hash_bucket(key: str, hash_bucket_size: int, dtype=None) -> CategoricalColumn:
    """Ids by FarmHash Fingerprint64 of each entry modulo ``hash_bucket_size`` (an integer entry
    hashed as its decimal text), as TensorFlow's, so the ids match TF's."""
    from trainer.hashing_ops import hash_bucket_ids

    if hash_bucket_size < 1:
        raise ValueError(f"categorical_column_with_hash_bucket {key!r}: hash_bucket_size must be at least 1")
    kind = np.dtype(object) if dtype is None else np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    if kind != object and kind.kind not in "iu":
        raise ValueError(f"categorical_column_with_hash_bucket {key!r}: dtype must be string or integer, got {kind}")
    return CategoricalColumn(key, int(hash_bucket_size), lambda values: hash_bucket_ids(values, hash_bucket_size),
                             kind)


def categorical_column_with_identity(key: str, num_buckets: int, default_value=None) -> CategoricalColumn:
    """The entries are the ids; one outside ``[0, num_buckets)`` gets ``default_value`` (else is dropped)."""
    def to_ids(values):
        ids = cast(values, np.int64)
        inside = logical_and(greater_equal(ids, 0), less(ids, num_buckets))
        fallback = -1 if default_value is None else int(default_value)
        return where(inside, ids, ids * 0 + fallback)

    return CategoricalColumn(key, int(num_buckets), to_ids, np.dtype(np.int64))


@dataclass(frozen=True)
class IndicatorColumn:
    categorical_column: object

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_indicator"

    @property
    def size(self) -> int:
        return self.categorical_column.num_buckets

    def dense(self, features: dict, scope_variable):
        """The multi-hot (counts of each id, or the sums of their weights) [batch, num_buckets]."""
        ids, weights = self.categorical_column.id_weights(features)
        return _multi_hot(ids, self.size, weights)


def _multi_hot(ids: SparseTensor, buckets: int, weights: SparseTensor | None = None):
    rows = gather(ids.indices, 0, axis=1)
    target = stack([rows, ids.values], axis=1)
    out_shape = stack([gather(ids.dense_shape, 0), convert_to_tensor(np.int64(buckets))])
    updates = cast(ones_like(ids.values), np.float32) if weights is None else weights.values
    return scatter_nd(target, updates, out_shape)


@dataclass(frozen=True)
class EmbeddingColumn:
    categorical_column: object
    dimension: int
    combiner: str = "mean"
    initializer: Callable | None = None
    trainable: bool = True

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_embedding"

    @property
    def size(self) -> int:
        return self.dimension

    def dense(self, features: dict, scope_variable):
        """Each example's ids' rows of the ``embedding_weights`` variable, combined."""
        weights = scope_variable(f"{self.name}/embedding_weights", (self.categorical_column.num_buckets, self.dimension),
                                 self.initializer, self.trainable)
        ids, id_weights = self.categorical_column.id_weights(features)
        return embedding_lookup_sparse(weights, ids, id_weights, combiner=self.combiner)


@dataclass(frozen=True)
class BucketizedColumn:
    source_column: object
    boundaries: tuple

    @property
    def name(self) -> str:
        return f"{self.source_column.name}_bucketized"

    @property
    def key(self) -> str:
        return self.source_column.key

    @property
    def num_buckets(self) -> int:
        return (len(self.boundaries) + 1) * self.source_column.size

    @property
    def size(self) -> int:
        return self.num_buckets

    def ids(self, features: dict) -> SparseTensor:
        """Each value's bucket (the number of boundaries at or below it), offset per element of the source."""
        values = reshape(cast(convert_to_tensor(features[self.key]), np.float32), [-1, self.source_column.size])
        bounds = np.asarray(self.boundaries, np.float32)
        bucket = cast(greater_equal(expand_dims(values, 2), bounds), np.int64)
        index = reduce_sum(bucket, axis=2) + np.arange(self.source_column.size, dtype=np.int64) * (len(bounds) + 1)
        return _entries(index)

    def dense(self, features: dict, scope_variable):
        return _multi_hot(self.ids(features), self.num_buckets)


def make_parse_example_spec(feature_columns) -> dict:
    """What ``parse_example`` needs to read the columns' features: a FixedLenFeature per numeric
    column, a VarLenFeature per categorical one."""
    from trainer.feature_column import NumericColumn
    from trainer.parsing import FixedLenFeature

    spec: dict = {}
    for column in feature_columns:
        source = column if isinstance(column, IdColumn) else (
            getattr(column, "categorical_column", None) or getattr(column, "source_column", None) or column)
        if isinstance(source, NumericColumn):
            wanted = {source.key: FixedLenFeature(source.shape, source.dtype, source.default_value)}
        elif isinstance(source, IdColumn):
            wanted = source.parse_example_spec()
        else:
            raise TypeError(f"make_parse_example_spec: unsupported feature column {type(column).__name__}")
        for key, feature in wanted.items():
            if spec.get(key, feature) != feature:
                raise ValueError(f"make_parse_example_spec: feature {key!r} is wanted as both {spec[key]} and {feature}")
            spec[key] = feature
    return spec


def indicator_column(categorical_column) -> IndicatorColumn:
    return IndicatorColumn(categorical_column)


def embedding_column(categorical_column, dimension: int, combiner: str = "mean", initializer=None, ckpt_to_load_from=None,
                     tensor_name_in_ckpt=None, max_norm=None, trainable: bool = True) -> EmbeddingColumn:
    if dimension < 1:
        raise ValueError(f"embedding_column: dimension must be at least 1, got {dimension}")
    if ckpt_to_load_from is not None or max_norm is not None:
        raise NotImplementedError("embedding_column: ckpt_to_load_from and max_norm are not supported")
    return EmbeddingColumn(categorical_column, int(dimension), combiner, initializer, trainable)


def bucketized_column(source_column, boundaries) -> BucketizedColumn:
    bounds = tuple(float(b) for b in boundaries)
    if not bounds or list(bounds) != sorted(set(bounds)):
        raise ValueError(f"bucketized_column: boundaries must be a sorted list without duplicates, got {boundaries!r}")
    return BucketizedColumn(source_column, bounds)
