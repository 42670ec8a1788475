"""``tf.sparse``: TF 1.15's sparse namespace, resolved to flowstack's ``tf.sparse_*`` functions."""

from __future__ import annotations

from trainer.tf1_aliases import resolve

_RENAMED = {"placeholder": "sparse_placeholder", "to_dense": "sparse_tensor_to_dense", "reduce_sum": "sparse_reduce_sum",
            "sparse_dense_matmul": "sparse_tensor_dense_matmul", "matmul": "sparse_tensor_dense_matmul"}


def __getattr__(name: str):
    return resolve("tf.sparse", name, _RENAMED, globals())
