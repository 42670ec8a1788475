"""``tf.feature_column.crossed_column`` and ``weighted_categorical_column``.

A crossed column hashes every combination of its keys' entries in a row into
``hash_bucket_size`` buckets with TensorFlow's SparseCross (FarmHash Fingerprint64 folded by
FingerprintCat64 from ``hash_key``), so the ids are TensorFlow's. A key is a raw feature name (its
values hashed as they are) or a categorical column (its int64 ids hashed). A weighted column pairs
a categorical column's ids with ``features[weight_feature_key]``: an indicator column sums the
weights per id and an embedding or linear model weighs each id's row by them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainer.array_ops import boolean_mask, expand_dims, gather_nd, greater_equal, not_equal, where
from trainer.categorical_columns import IdColumn
from trainer.hashing_ops import sparse_cross_hashed
from trainer.ops import cast, convert_to_tensor, shape
from trainer.sparse_tensor import SparseTensor

__all__ = ["CrossedColumn", "WeightedCategoricalColumn", "crossed_column", "weighted_categorical_column"]


@dataclass(frozen=True)
class CrossedColumn(IdColumn):
    keys: tuple
    hash_bucket_size: int
    hash_key: int | None = None

    def leaf_keys(self) -> list:
        """The keys with nested crossed columns flattened, as TF's ``_collect_leaf_level_keys``."""
        leaves = []
        for key in self.keys:
            leaves.extend(key.leaf_keys() if isinstance(key, CrossedColumn) else [key])
        return leaves

    @property
    def name(self) -> str:
        return "_X_".join(sorted(key if isinstance(key, str) else key.name for key in self.leaf_keys()))

    @property
    def num_buckets(self) -> int:
        return self.hash_bucket_size

    def ids(self, features: dict) -> SparseTensor:
        inputs = []
        for key in self.leaf_keys():
            if isinstance(key, str):
                if key not in features:
                    raise KeyError(f"crossed_column {self.name!r}: feature {key!r} is not among the features "
                                   f"{sorted(features)}")
                inputs.append(features[key])
            else:
                inputs.append(key.ids(features))
        return sparse_cross_hashed(inputs, num_buckets=self.hash_bucket_size, hash_key=self.hash_key)

    def parse_example_spec(self) -> dict:
        from trainer.categorical_columns import make_parse_example_spec
        from trainer.parsing import VarLenFeature

        spec: dict = {}
        for key in self.leaf_keys():
            spec.update({key: VarLenFeature(np.dtype(object))} if isinstance(key, str) else make_parse_example_spec([key]))
        return spec


def crossed_column(keys, hash_bucket_size: int, hash_key: int | None = None) -> CrossedColumn:
    """Ids of the hashed cross of ``keys`` (feature names or categorical columns, at least two)."""
    keys = tuple(keys)
    if len(keys) < 2:
        raise ValueError(f"crossed_column: keys must be a list with length > 1, given {list(keys)!r}")
    if hash_bucket_size is None or int(hash_bucket_size) < 1:
        raise ValueError(f"crossed_column: hash_bucket_size must be > 1, given {hash_bucket_size!r}")
    for key in keys:
        if not isinstance(key, str) and not hasattr(key, "ids"):
            raise ValueError(f"crossed_column: each key must be a feature name (string) or a categorical column, "
                             f"given {type(key).__name__} {key!r}")
        if isinstance(key, WeightedCategoricalColumn):
            raise ValueError(f"crossed_column does not support weighted columns, given {key.name!r}")
    return CrossedColumn(keys, int(hash_bucket_size), hash_key)


def _weight_entries(value) -> SparseTensor:
    """The weights as a SparseTensor: a dense weight tensor's 0.0s are no entry, as TF drops them."""
    if isinstance(value, SparseTensor):
        return value
    dense = convert_to_tensor(value)
    if dense.shape is not None and len(dense.shape) == 1:
        dense = expand_dims(dense, 1)
    indices = where(not_equal(dense, np.array(0, np.dtype(dense.dtype))))
    return SparseTensor(indices, gather_nd(dense, indices), shape(dense))


@dataclass(frozen=True)
class WeightedCategoricalColumn(IdColumn):
    categorical_column: object
    weight_feature_key: str
    dtype: np.dtype = np.dtype(np.float32)

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_weighted_by_{self.weight_feature_key}"

    @property
    def num_buckets(self) -> int:
        return self.categorical_column.num_buckets

    def id_weights(self, features: dict) -> tuple[SparseTensor, SparseTensor]:
        """The ids and their weights, paired entry by entry; an entry without an id is dropped with its weight."""
        if self.weight_feature_key not in features:
            raise KeyError(f"weighted_categorical_column {self.name!r}: missing weights {self.weight_feature_key!r} "
                           f"among the features {sorted(features)}")
        source = self.categorical_column
        ids = source.entry_ids(features) if hasattr(source, "entry_ids") else source.ids(features)
        weights = _weight_entries(features[self.weight_feature_key])
        if np.dtype(weights.values.dtype) != self.dtype:
            raise ValueError(f"weighted_categorical_column {self.name!r}: bad dtype, expected {self.dtype}, but got "
                             f"{np.dtype(weights.values.dtype)}")
        keep = greater_equal(ids.values, 0)
        kept_indices = boolean_mask(ids.indices, keep)
        values = weights.values if self.dtype.kind == "f" else cast(weights.values, np.float32)
        return (SparseTensor(kept_indices, boolean_mask(ids.values, keep), ids.dense_shape),
                SparseTensor(kept_indices, boolean_mask(values, keep), ids.dense_shape))

    def ids(self, features: dict) -> SparseTensor:
        return self.id_weights(features)[0]

    def parse_example_spec(self) -> dict:
        from trainer.categorical_columns import make_parse_example_spec
        from trainer.parsing import VarLenFeature

        return {**make_parse_example_spec([self.categorical_column]),
                self.weight_feature_key: VarLenFeature(self.dtype)}


def weighted_categorical_column(categorical_column, weight_feature_key: str, dtype=np.float32
                                ) -> WeightedCategoricalColumn:
    """``categorical_column``'s ids each weighted by the matching entry of ``features[weight_feature_key]``."""
    kind = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    if kind.kind not in "fiu":
        raise ValueError(f"weighted_categorical_column: dtype {kind} is not convertible to float")
    if not isinstance(categorical_column, IdColumn):
        raise ValueError(f"weighted_categorical_column: categorical_column must be a categorical column, given "
                         f"{type(categorical_column).__name__}")
    if not isinstance(weight_feature_key, str) or not weight_feature_key:
        raise ValueError(f"weighted_categorical_column: weight_feature_key must be a feature name, given "
                         f"{weight_feature_key!r}")
    return WeightedCategoricalColumn(categorical_column, weight_feature_key, kind)
