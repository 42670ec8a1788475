"""TensorFlow's set operations (``tf.sets`` in 1.15, ``tf.contrib.metrics.set_*``): each group of
the last dimension of a tensor or SparseTensor is a set of its values; ``set_size`` counts them
and ``set_intersection`` / ``set_union`` / ``set_difference`` combine two tensors' sets group by
group into a SparseTensor whose rows hold the sorted results. A dense tensor's every element is a
member; ``a`` sparse with ``b`` dense is refused, as TensorFlow refuses it."""

from __future__ import annotations

import numpy as np

from trainer.array_ops import gather_nd, where
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import convert_to_tensor, equal, make_op, shape
from trainer.sparse_tensor import SparseTensor

__all__ = ["set_difference", "set_intersection", "set_size", "set_union"]


def _as_sparse(x, what: str) -> SparseTensor:
    if isinstance(x, SparseTensor):
        return x
    dense = convert_to_tensor(x)
    if dense.shape is not None and len(dense.shape) < 2:
        raise ValueError(f"{what} must have rank >= 2 (sets are its last dimension), got shape {dense.shape}")
    kind = np.dtype(dense.dtype)
    if kind != object and kind.kind not in "iu":
        raise TypeError(f"{what}: sets hold integers or strings, got {kind}")
    indices = where(equal(dense, dense))  # every element
    return SparseTensor(indices, gather_nd(dense, indices), shape(dense))


def set_size(a, validate_indices: bool = True) -> Tensor:
    """The number of distinct values in each group of ``a``'s last dimension (int32)."""
    a = _as_sparse(a, "set_size: a")
    return make_op("SetSize", [a.indices, a.values, a.dense_shape], domain=TRAINER_DOMAIN,
                   name="SetSize").outputs[0]


def _set_operation(a, b, kind: str, what: str) -> SparseTensor:
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        raise ValueError(f"{what}: a is a SparseTensor, so b must be one too (only a dense a may meet a sparse b)")
    a, b = _as_sparse(a, f"{what}: a"), _as_sparse(b, f"{what}: b")
    if np.dtype(a.values.dtype) != np.dtype(b.values.dtype):
        raise TypeError(f"{what}: a and b must hold one dtype, got {a.values.dtype} and {b.values.dtype}")
    op = make_op("SetOperation", [a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape],
                 {"set_operation": kind}, domain=TRAINER_DOMAIN, name="SetOperation")
    return SparseTensor(*op.outputs)


def set_intersection(a, b, validate_indices: bool = True) -> SparseTensor:
    return _set_operation(a, b, "intersection", "set_intersection")


def set_union(a, b, validate_indices: bool = True) -> SparseTensor:
    return _set_operation(a, b, "union", "set_union")


def set_difference(a, b, aminusb: bool = True, validate_indices: bool = True) -> SparseTensor:
    """a - b (``aminusb``) or b - a, group by group."""
    return _set_operation(a, b, "a-b" if aminusb else "b-a", "set_difference")
