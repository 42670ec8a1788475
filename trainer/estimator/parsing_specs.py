"""``tf.estimator.classifier_parse_example_spec`` and ``regressor_parse_example_spec``: the parse
spec of the feature columns plus the label (and the weight column), to read training Examples."""

from __future__ import annotations

import numpy as np

from trainer.categorical_columns import make_parse_example_spec
from trainer.parsing import FixedLenFeature

__all__ = ["classifier_parse_example_spec", "regressor_parse_example_spec"]


def _with_label(feature_columns, label_key: str, label: FixedLenFeature, weight_column) -> dict:
    columns = list(feature_columns)
    if weight_column is not None:
        from trainer.feature_column import numeric_column

        columns.append(numeric_column(weight_column) if isinstance(weight_column, str) else weight_column)
    spec = make_parse_example_spec(columns)
    if not isinstance(label_key, str) or not label_key:
        raise ValueError(f"label_key must be a feature name, given {label_key!r}")
    if label_key in spec:
        raise ValueError(f"label should not be used as feature. label_key: {label_key}, features: {sorted(spec)}")
    spec[label_key] = label
    return spec


def classifier_parse_example_spec(feature_columns, label_key: str, label_dtype=np.int64, label_default=None,
                                  weight_column=None) -> dict:
    """The columns' spec with ``label_key`` a FixedLenFeature of shape (1,) (int64, or string with a vocabulary)."""
    dtype = np.dtype(getattr(label_dtype, "as_numpy_dtype", label_dtype))
    if dtype != object and dtype.kind not in "iu":
        raise ValueError(f"label_dtype must be int64 or string, given {dtype}")
    return _with_label(feature_columns, label_key, FixedLenFeature((1,), dtype, label_default), weight_column)


def regressor_parse_example_spec(feature_columns, label_key: str, label_dtype=np.float32, label_default=None,
                                 label_dimension: int = 1, weight_column=None) -> dict:
    """The columns' spec with ``label_key`` a FixedLenFeature of shape (label_dimension,)."""
    if label_dimension < 1:
        raise ValueError(f"label_dimension must be >= 1, given {label_dimension}")
    dtype = np.dtype(getattr(label_dtype, "as_numpy_dtype", label_dtype))
    return _with_label(feature_columns, label_key, FixedLenFeature((int(label_dimension),), dtype, label_default),
                       weight_column)
