"""TensorFlow's hashed feature ids: a hash-bucket column's ids (``StringToHashBucketFast``) and the
hashed ``SparseCross`` (``tf.sparse.cross_hashed``), with TF's FarmHash Fingerprint64, so the
bucket ids match TensorFlow's (edge_runtime/string_hashes.py)."""

from __future__ import annotations

import numpy as np

from trainer.array_ops import expand_dims
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import convert_to_tensor, make_op
from trainer.sparse_ops import as_sparse_rows
from trainer.sparse_tensor import SparseTensor
from trainer.string_ops import as_string, to_hash_bucket_fast

__all__ = ["DEFAULT_HASH_KEY", "hash_bucket_ids", "sparse_cross_hashed"]

DEFAULT_HASH_KEY = 0xDECAFCAFFE  # sparse_ops._DEFAULT_HASH_KEY


def hash_bucket_ids(values: Tensor, num_buckets: int) -> Tensor:
    """A hash-bucket column's ids: strings hashed as they are, integers as their decimal text (TF's as_string)."""
    values = convert_to_tensor(values)
    text = values if np.dtype(values.dtype) == object else as_string(values)
    return to_hash_bucket_fast(text, num_buckets)


def _every_entry(value) -> SparseTensor:
    """A dense [batch] or [batch, k] feature as a SparseTensor of all its entries (SparseCross keeps every element)."""
    dense = convert_to_tensor(value)
    if dense.shape is not None and len(dense.shape) == 1:
        dense = expand_dims(dense, 1)
    return as_sparse_rows(dense, "sparse_cross_hashed")


def sparse_cross_hashed(inputs, num_buckets: int = 0, hash_key: int | None = None, name=None) -> SparseTensor:
    """``tf.sparse.cross_hashed``: each row's combinations of one entry per input, hashed
    (FingerprintCat64 from ``hash_key``) into ``[0, num_buckets)`` (int64 max when 0)."""
    parts = [x if isinstance(x, SparseTensor) else _every_entry(x) for x in inputs]
    if not parts:
        raise ValueError("sparse_cross_hashed: inputs must hold at least one tensor")
    for i, part in enumerate(parts):
        kind = np.dtype(part.values.dtype)
        if kind != object and kind.kind not in "iu":
            raise TypeError(f"sparse_cross_hashed: input {i} must hold strings or integers, got {kind}")
    if int(num_buckets) < 0:
        raise ValueError(f"sparse_cross_hashed: num_buckets must be >= 0, got {num_buckets}")
    key = DEFAULT_HASH_KEY if hash_key is None else int(hash_key)
    flat = [p.indices for p in parts] + [p.values for p in parts] + [p.dense_shape for p in parts]
    op = make_op("SparseCross", flat, {"N": len(parts), "hashed_output": 1, "num_buckets": int(num_buckets),
                                       "hash_key": key},
                 domain=TRAINER_DOMAIN, name=name or "SparseCross")
    return SparseTensor(*op.outputs)
