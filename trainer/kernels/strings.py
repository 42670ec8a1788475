"""The trainer's kernels of string ops that encode or decode protobuf (which the edge runtime does
not carry): SerializeTensor, ParseTensor and the sparse (de)serializers, through
trainer/tensor_proto.py."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel

__all__: list[str] = []

D = "flowstack"


@kernel("SerializeTensor", domain=D)
def serialize_tensor(tensor, *, xp):
    from trainer.tensor_proto import serialize_array

    out = np.empty((), dtype=object)
    out[()] = serialize_array(np.asarray(tensor))
    return out


@kernel("ParseTensor", domain=D)
def parse_tensor(serialized, *, xp, out_type):
    from trainer.tensor_proto import parse_tensor_proto

    data = serialized.reshape(()).item() if np.ndim(serialized) == 0 else None
    if data is None:
        raise ValueError(f"ParseTensor: serialized must be a scalar string, got shape {np.shape(serialized)}")
    return parse_tensor_proto(data.encode("utf-8") if isinstance(data, str) else data, np.dtype(out_type))


@kernel("SerializeManySparse", domain=D)
def serialize_many_sparse(sparse_indices, sparse_values, sparse_shape, *, xp):
    from trainer.tensor_proto import serialize_array

    rows = int(sparse_shape[0])
    out = np.empty((rows, 3), dtype=object)
    for r in range(rows):
        mine = sparse_indices[:, 0] == r
        out[r] = [serialize_array(np.ascontiguousarray(sparse_indices[mine, 1:])),
                  serialize_array(sparse_values[mine]), serialize_array(np.asarray(sparse_shape[1:], np.int64))]
    return out


def _bytes(value) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


@kernel("DeserializeManySparse", domain=D)
def deserialize_many_sparse(serialized_sparse, *, xp, dtype):
    from trainer.tensor_proto import parse_tensor_proto

    if serialized_sparse.ndim != 2 or serialized_sparse.shape[1] != 3:
        raise ValueError(f"DeserializeManySparse: serialized_sparse must be [N, 3], got shape "
                         f"{serialized_sparse.shape}")
    parts = [(parse_tensor_proto(_bytes(i), np.dtype(np.int64)), parse_tensor_proto(_bytes(v), np.dtype(dtype)),
              parse_tensor_proto(_bytes(s), np.dtype(np.int64))) for i, v, s in serialized_sparse.tolist()]
    ranks = {len(s) for _, _, s in parts}
    if len(ranks) > 1:
        raise ValueError(f"DeserializeManySparse: the rows have different ranks {sorted(ranks)}")
    rank = ranks.pop() if ranks else 0
    indices = [np.concatenate([np.full((len(i), 1), r, np.int64), i.reshape(len(i), rank)], axis=1)
               for r, (i, _, _) in enumerate(parts)]
    values = [v for _, v, _ in parts]
    inner = np.max(np.stack([s for _, _, s in parts]), axis=0) if parts else np.zeros(rank, np.int64)
    return (np.concatenate(indices) if indices else np.zeros((0, rank + 1), np.int64),
            np.concatenate(values) if values else np.zeros(0, dtype),
            np.concatenate([[len(parts)], inner]).astype(np.int64))
