"""``tf.feature_column.linear_model``: a weighted sum of the columns plus a bias.

As TensorFlow's, a categorical column's weights are a ``[num_buckets, units]`` table whose rows
its ids pick (weighted by a weighted column's weights, combined by ``sparse_combiner``; ids and
weights that are invalid or non-positive drop, as safe_embedding_lookup_sparse drops them) and a
dense column's a ``[size, units]`` matrix; all start at zero, named
``linear_model/<column name>/weights`` with ``linear_model/bias_weights``, the columns taken in
order of their names.
"""

from __future__ import annotations

import numpy as np

from trainer import init
from trainer.categorical_columns import IdColumn
from trainer.feature_column import column_variables, dense_value
from trainer.graph import Tensor
from trainer.nn import bias_add
from trainer.ops import add_n, matmul
from trainer.tf1 import add_to_collections
from trainer.sparse_tensor import safe_embedding_lookup_sparse
from trainer.variable_scopes import get_variable, variable_scope

__all__ = ["linear_model"]

SPARSE_COMBINERS = ("mean", "sqrtn", "sum")


def _zeros(shape, dtype=np.float32, **_):
    return init.zeros(shape, dtype=dtype)


def linear_model(features: dict, feature_columns, units: int = 1, sparse_combiner: str = "sum",
                 weight_collections=None, trainable: bool = True, cols_to_vars: dict | None = None) -> Tensor:
    """The (batch, units) float32 logits of a linear model over ``feature_columns``; ``cols_to_vars``,
    when a dict, gets each column's variables and ``'bias'``'s."""
    columns = sorted(feature_columns, key=lambda c: c.name)
    if not columns:
        raise ValueError("linear_model: feature_columns must not be empty")
    if not isinstance(features, dict):
        raise TypeError(f"linear_model: features must be a dict of name -> tensor, got {type(features).__name__}")
    if sparse_combiner not in SPARSE_COMBINERS:
        raise ValueError(f"linear_model: sparse_combiner must be one of {SPARSE_COMBINERS}, given {sparse_combiner!r}")
    if int(units) < 1:
        raise ValueError(f"linear_model: units must be at least 1, given {units}")
    collections = list(weight_collections or ())

    def weight(name: str, shape: tuple):
        variable = get_variable(name, shape, dtype=np.float32, initializer=_zeros, trainable=trainable)
        if collections:
            add_to_collections(collections, variable)
        return variable

    sums = []
    with variable_scope("linear_model"):
        for column in columns:
            value = None if isinstance(column, IdColumn) else dense_value(column, features, column_variables(trainable))
            with variable_scope(column.name):
                if value is None:
                    table = weight("weights", (column.num_buckets, int(units)))
                    ids, id_weights = column.id_weights(features)
                    sums.append(safe_embedding_lookup_sparse(table, ids, id_weights, combiner=sparse_combiner))
                else:
                    table = weight("weights", (column.size, int(units)))
                    sums.append(matmul(value, table))
            if cols_to_vars is not None:
                cols_to_vars[column] = [table]
        bias = weight("bias_weights", (int(units),))
        if cols_to_vars is not None:
            cols_to_vars["bias"] = [bias]
        return bias_add(sums[0] if len(sums) == 1 else add_n(sums), bias, name="weighted_sum")
