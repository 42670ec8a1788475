"""``tf.io.serialize_sparse`` / ``serialize_many_sparse`` / ``deserialize_many_sparse``: a
SparseTensor as TensorProto bytes of its three parts (trainer/tensor_proto.py), e.g. to pass
sparse examples through a string queue, and back."""

from __future__ import annotations

import numpy as np

from trainer.array_ops import stack
from trainer.dtypes import as_dtype
from trainer.graph import Tensor
from trainer.ops import convert_to_tensor, make_op
from trainer.sparse_tensor import SparseTensor
from trainer.string_ops import serialize_tensor

__all__ = ["deserialize_many_sparse", "serialize_many_sparse", "serialize_sparse"]


def _string_out(op: str, sp_input, out_type) -> SparseTensor:
    if np.dtype(as_dtype(out_type).as_numpy_dtype) != np.dtype(object):
        raise ValueError(f"{op}: out_type must be tf.string (flowstack has no variant tensors), got {out_type}")
    if not isinstance(sp_input, SparseTensor):
        raise TypeError(f"{op}: sp_input must be a SparseTensor, got {type(sp_input).__name__}")
    return sp_input


def serialize_sparse(sp_input, name=None, out_type=object) -> Tensor:
    """A [3] string vector: the serialized indices, values and dense_shape."""
    sp = _string_out("serialize_sparse", sp_input, out_type)
    return stack([serialize_tensor(sp.indices), serialize_tensor(sp.values), serialize_tensor(sp.dense_shape)],
                 name=name or "SerializeSparse")


def serialize_many_sparse(sp_input, name=None, out_type=object) -> Tensor:
    """[N, 3] strings, one serialized SparseTensor (rank one less) per row of the first dimension."""
    sp = _string_out("serialize_many_sparse", sp_input, out_type)
    return make_op("SerializeManySparse", [sp.indices, sp.values, sp.dense_shape], domain="flowstack",
                   name=name or "SerializeManySparse").outputs[0]


def deserialize_many_sparse(serialized_sparse, dtype, rank=None, name=None) -> SparseTensor:
    """The [N, 3] serialized SparseTensors joined along a new first dimension of N rows."""
    np_dtype = np.dtype(as_dtype(dtype).as_numpy_dtype)
    indices, values, dense_shape = make_op("DeserializeManySparse", [convert_to_tensor(serialized_sparse)],
                                           {"dtype": np_dtype.name}, domain="flowstack",
                                           name=name or "DeserializeManySparse", num_outputs=3).outputs
    if rank is not None:
        from schemas.registry import TensorType

        indices.type = TensorType(np.dtype(np.int64), (None, int(rank)))
        dense_shape.type = TensorType(np.dtype(np.int64), (int(rank),))
    return SparseTensor(indices, values, dense_shape)
