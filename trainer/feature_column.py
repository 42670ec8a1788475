"""``tf.feature_column``: how canned estimators turn a features dict into one dense input.

``numeric_column(key, shape)`` reads ``features[key]`` as float32 and flattens it to (batch,
size); the categorical columns and the dense columns over them (``indicator_column``,
``embedding_column``, ``bucketized_column``) are in trainer/categorical_columns.py.
``input_layer`` concatenates the dense columns in order, as TF's does (a categorical column must be
wrapped in an indicator or embedding column first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from trainer.graph import Tensor, name_scope
from trainer.ops import cast, concat, convert_to_tensor, reshape
from trainer.variable_scopes import AUTO_REUSE

__all__ = ["NumericColumn", "column_variables", "dense_value", "input_layer", "linear_columns", "numeric_column"]


@dataclass(frozen=True)
class NumericColumn:
    key: str
    shape: tuple
    default_value: object = None
    dtype: np.dtype = np.dtype(np.float32)
    normalizer_fn: Callable | None = None

    @property
    def name(self) -> str:
        return self.key

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def numeric_column(key: str, shape=(1,), default_value=None, dtype=np.float32, normalizer_fn=None) -> NumericColumn:
    """A dense feature of ``shape`` per example, read from ``features[key]``."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"numeric_column: key must be a non-empty string, got {key!r}")
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    if any(d <= 0 for d in shape):
        raise ValueError(f"numeric_column {key!r}: shape must be positive, got {shape}")
    if hasattr(dtype, "as_numpy_dtype"):
        dtype = dtype.as_numpy_dtype
    return NumericColumn(key, shape, default_value, np.dtype(dtype), normalizer_fn)


def input_layer(features: dict, feature_columns, weight_collections=None, trainable: bool = True) -> Tensor:
    """The columns' values side by side: a float32 tensor of shape (batch, sum of column sizes).
    Embedding columns make their ``embedding_weights`` under the ``input_layer`` variable scope."""
    from trainer.variable_scopes import variable_scope

    columns = list(feature_columns)
    if not columns:
        raise ValueError("input_layer needs at least one feature column")
    if not isinstance(features, dict):
        raise TypeError(f"input_layer: features must be a dict of name -> tensor, got {type(features).__name__}")
    with variable_scope("input_layer", reuse=AUTO_REUSE):
        parts = [dense_value(column, features, column_variables(trainable)) for column in columns]
    return parts[0] if len(parts) == 1 else concat(parts, axis=1)


def column_variables(trainable: bool) -> Callable:
    """The ``scope_variable(name, shape, initializer, column_trainable)`` a dense column makes its
    variables with (truncated normal of stddev 1/sqrt(last dim) unless an initializer is given)."""
    from trainer import init
    from trainer.variable_scopes import get_variable

    def scope_variable(name: str, shape: tuple, initializer, column_trainable: bool):
        return get_variable(name, shape, dtype=np.float32, trainable=trainable and column_trainable,
                            initializer=initializer or (lambda s, dtype=np.float32: init.truncated_normal(
                                s, stddev=1 / math.sqrt(shape[-1]), dtype=dtype)))

    return scope_variable


def dense_value(column, features: dict, scope_variable: Callable) -> Tensor:
    """One dense column's float32 (batch, size) value (a categorical one must be wrapped first)."""
    from trainer.categorical_columns import IdColumn

    if isinstance(column, IdColumn):
        raise TypeError(f"input_layer: feature column {column.name!r} is categorical; wrap it with "
                        f"indicator_column or embedding_column")
    if hasattr(column, "dense"):
        return reshape(column.dense(features, scope_variable), (-1, column.size))
    if not isinstance(column, NumericColumn):
        raise TypeError(f"input_layer: unsupported feature column {type(column).__name__}")
    if column.key not in features:
        raise KeyError(f"feature column {column.key!r} is not among the features {sorted(features)}")
    with name_scope(column.name):  # as TF scopes each column's ops: a node's name says its column
        value = convert_to_tensor(features[column.key])
        if value.dtype != np.float32:
            value = cast(value, np.float32)
        if column.normalizer_fn is not None:
            value = column.normalizer_fn(value)
        return reshape(value, (-1, column.size))


def linear_columns(feature_columns) -> list:
    """The columns as a linear model reads them: a categorical column as its indicator (one weight
    per id, as TF's linear model keeps them)."""
    from trainer.categorical_columns import IdColumn, indicator_column

    return [indicator_column(c) if isinstance(c, IdColumn) else c for c in feature_columns]


# The categorical columns and their dense wrappers, as tf.feature_column names them.
LAZY_ATTRIBUTES = {name: ("trainer.categorical_columns", name) for name in (
    "bucketized_column", "categorical_column_with_hash_bucket", "categorical_column_with_identity",
    "categorical_column_with_vocabulary_file", "categorical_column_with_vocabulary_list", "embedding_column",
    "indicator_column", "make_parse_example_spec")}
LAZY_ATTRIBUTES.update({name: ("trainer.crossed_columns", name) for name in (
    "crossed_column", "weighted_categorical_column")})
LAZY_ATTRIBUTES.update({"linear_model": ("trainer.linear_model", "linear_model"),
                        "shared_embedding_columns": ("trainer.shared_embedding_columns", "shared_embedding_columns")})


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in LAZY_ATTRIBUTES:
        return resolve_lazy(name, LAZY_ATTRIBUTES)
    raise missing_symbol("tf.feature_column", name, globals())
