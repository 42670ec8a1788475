"""The trainer's kernels of string ops that decode protobuf (which the edge runtime does not
carry): SerializeTensor and ParseTensor, through trainer/tensor_proto.py."""

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
