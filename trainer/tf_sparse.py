"""``tf.sparse``: TF 1.15's sparse namespace. Its own functions come from trainer/sparse_ops.py and
trainer/sparse_combine.py; the rest resolve to flowstack's ``tf.sparse_*`` functions."""

from __future__ import annotations

from trainer.sparse_combine import (add, concat, expand_dims, eye, maximum, merge, minimum, reshape, slice, softmax,
                                    split, transpose)
from trainer.sparse_ops import (cross, fill_empty_rows, from_dense, mask, reduce_max_sparse, reduce_sum_sparse, reorder,
                                reset_shape, retain, segment_mean, segment_sqrt_n, segment_sum, to_indicator)
from trainer.sparse_ops import reduce_max_to_dense as reduce_max
from trainer.tf1_aliases import resolve

__all__ = ["add", "concat", "cross", "expand_dims", "eye", "fill_empty_rows", "from_dense", "mask", "maximum", "merge",
           "minimum", "reduce_max", "reduce_max_sparse", "reduce_sum_sparse", "reorder", "reset_shape", "reshape",
           "retain", "segment_mean", "segment_sqrt_n", "segment_sum", "slice", "softmax", "split", "to_indicator",
           "transpose"]

_RENAMED = {"placeholder": "sparse_placeholder", "to_dense": "sparse_tensor_to_dense", "reduce_sum": "sparse_reduce_sum",
            "sparse_dense_matmul": "sparse_tensor_dense_matmul", "matmul": "sparse_tensor_dense_matmul"}


def __getattr__(name: str):
    return resolve("tf.sparse", name, _RENAMED, globals())
