"""``tf.feature_column``: how canned estimators turn a features dict into one dense input.

Only dense numeric columns are supported: ``numeric_column(key, shape)`` reads ``features[key]``
as float32 and flattens it to (batch, size); ``input_layer`` concatenates the columns in order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from trainer.graph import Tensor
from trainer.ops import cast, concat, convert_to_tensor, reshape

__all__ = ["NumericColumn", "input_layer", "numeric_column"]


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


def input_layer(features: dict, feature_columns) -> Tensor:
    """The columns' values side by side: a float32 tensor of shape (batch, sum of column sizes)."""
    columns = list(feature_columns)
    if not columns:
        raise ValueError("input_layer needs at least one feature column")
    if not isinstance(features, dict):
        raise TypeError(f"input_layer: features must be a dict of name -> tensor, got {type(features).__name__}")
    parts = []
    for column in columns:
        if not isinstance(column, NumericColumn):
            raise TypeError(f"input_layer: only numeric_column feature columns are supported, got "
                            f"{type(column).__name__}")
        if column.key not in features:
            raise KeyError(f"feature column {column.key!r} is not among the features {sorted(features)}")
        value = convert_to_tensor(features[column.key])
        if value.dtype != np.float32:
            value = cast(value, np.float32)
        if column.normalizer_fn is not None:
            value = column.normalizer_fn(value)
        parts.append(reshape(value, (-1, column.size)))
    return parts[0] if len(parts) == 1 else concat(parts, axis=1)
