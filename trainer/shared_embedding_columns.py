"""``tf.feature_column.shared_embedding_columns``: embedding columns over several categorical
columns that read one ``embedding_weights`` table (e.g. a query's and a document's words).

The table is ``<scope>/<shared_embedding_collection_name>/embedding_weights``, made by the first
column that reads it and found again (AUTO_REUSE) by the others, as TF's shared columns find it in
their collection. The default collection name is the sorted column names joined by ``_`` plus
``_shared_embedding``, as TensorFlow's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from trainer.categorical_columns import IdColumn
from trainer.sparse_tensor import embedding_lookup_sparse

__all__ = ["SharedEmbeddingColumn", "shared_embedding_columns"]

COMBINERS = ("mean", "sqrtn", "sum")


@dataclass(frozen=True)
class SharedEmbeddingColumn:
    categorical_column: object
    dimension: int
    shared_embedding_collection_name: str
    combiner: str = "mean"
    initializer: Callable | None = None
    trainable: bool = True

    @property
    def name(self) -> str:
        return f"{self.categorical_column.name}_shared_embedding"

    @property
    def size(self) -> int:
        return self.dimension

    def dense(self, features: dict, scope_variable):
        """The column's ids' rows of the shared table, combined."""
        table = scope_variable(f"{self.shared_embedding_collection_name}/embedding_weights",
                               (self.categorical_column.num_buckets, self.dimension), self.initializer, self.trainable)
        ids, weights = self.categorical_column.id_weights(features)
        return embedding_lookup_sparse(table, ids, weights, combiner=self.combiner)


def shared_embedding_columns(categorical_columns, dimension: int, combiner: str = "mean", initializer=None,
                             shared_embedding_collection_name: str | None = None, ckpt_to_load_from=None,
                             tensor_name_in_ckpt=None, max_norm=None, trainable: bool = True
                             ) -> list[SharedEmbeddingColumn]:
    """One embedding column per categorical column, all reading one table of ``dimension`` columns."""
    columns = list(categorical_columns)
    if not columns:
        raise ValueError("shared_embedding_columns: categorical_columns must not be empty")
    if dimension is None or int(dimension) < 1:
        raise ValueError(f"shared_embedding_columns: invalid dimension {dimension!r}")
    if combiner not in COMBINERS:
        raise ValueError(f"shared_embedding_columns: combiner must be one of {COMBINERS}, given {combiner!r}")
    if initializer is not None and not callable(initializer):
        raise ValueError("shared_embedding_columns: initializer must be callable if specified")
    if (ckpt_to_load_from is None) != (tensor_name_in_ckpt is None):
        raise ValueError("shared_embedding_columns: must specify both `ckpt_to_load_from` and "
                         "`tensor_name_in_ckpt` or none of them")
    if ckpt_to_load_from is not None or max_norm is not None:
        raise ValueError("shared_embedding_columns: ckpt_to_load_from and max_norm are not supported here")
    for column in columns:
        if not isinstance(column, IdColumn):
            raise ValueError(f"shared_embedding_columns: all categorical_columns must be categorical columns, "
                             f"given {type(column).__name__}")
    if len({c.num_buckets for c in columns}) > 1:
        raise ValueError(f"shared_embedding_columns: to use shared_embedding_column, all categorical_columns must "
                         f"have the same number of buckets, given {[(c.name, c.num_buckets) for c in columns]}")
    name = shared_embedding_collection_name or "_".join(sorted(c.name for c in columns)) + "_shared_embedding"
    return [SharedEmbeddingColumn(c, int(dimension), name, combiner, initializer, trainable) for c in columns]
