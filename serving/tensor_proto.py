"""TensorFlow's ``TensorProto`` to and from NumPy arrays, as TF Serving's gRPC Predict reads and writes it.

A request tensor may carry its values either as ``tensor_content`` (raw little-endian bytes, what
``tf.make_tensor_proto`` writes for arrays) or in the typed ``*_val`` field of its dtype (what hand-written
clients and scalars use). Read from a typed field, TensorFlow's rule applies: fewer values than the shape
holds are padded with the last one, none at all means zeros. Answers are written in the typed fields, as
TF Serving writes them, since clients read ``response.outputs[name].float_val`` directly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from serving import datatypes
from serving.errors import InvalidRequest, shown

__all__ = ["DATA_TYPES", "decode_tensor", "encode_tensor", "tensor_shape"]

# TensorFlow's DataType enum (tensorflow/core/framework/types.proto) -> the protocol datatype name.
DATA_TYPES: dict[int, str] = {1: "FP32", 2: "FP64", 3: "INT32", 4: "UINT8", 5: "INT16", 6: "INT8", 7: "BYTES",
                              9: "INT64", 10: "BOOL", 14: "BF16", 17: "UINT16", 19: "FP16", 22: "UINT32",
                              23: "UINT64"}
_NUMBERS = {name: number for number, name in DATA_TYPES.items()}
# The typed field each datatype's values travel in; 16-bit floats travel as their bit patterns.
_VALUE_FIELDS = {"FP32": "float_val", "FP64": "double_val", "INT32": "int_val", "UINT8": "int_val",
                 "INT16": "int_val", "INT8": "int_val", "UINT16": "int_val", "INT64": "int64_val",
                 "BOOL": "bool_val", "BYTES": "string_val", "FP16": "half_val", "BF16": "half_val",
                 "UINT32": "uint32_val", "UINT64": "uint64_val"}
_BIT_PATTERNS = {"FP16", "BF16"}


def tensor_shape(proto: Any, name: str, max_elements: int) -> tuple[int, ...]:
    """The dimensions of a ``TensorProto``'s shape, checked against the element budget."""
    if proto.tensor_shape.unknown_rank:
        raise InvalidRequest(f"input {shown(name)}: tensor_shape has unknown_rank; a request tensor needs its shape")
    return datatypes.check_shape(name, [d.size for d in proto.tensor_shape.dim], max_elements)


def decode_tensor(name: str, proto: Any, max_elements: int) -> tuple[str, tuple[int, ...], np.ndarray]:
    """A request ``TensorProto`` as (datatype, shape, array); InvalidRequest names the input."""
    datatype = DATA_TYPES.get(proto.dtype)
    if datatype is None:
        known = ", ".join(datatypes.TF_TYPE_NAMES[d] for d in DATA_TYPES.values())
        raise InvalidRequest(f"input {shown(name)}: DataType {proto.dtype} is not served; expected one of {known}")
    shape = tensor_shape(proto, name, max_elements)
    count = int(np.prod(shape, dtype=np.int64))
    if proto.tensor_content:
        if datatype == "BYTES":
            raise InvalidRequest(f"input {shown(name)}: DT_STRING values go in string_val, not tensor_content")
        return datatype, shape, datatypes.from_raw(name, datatype, shape, proto.tensor_content)
    values = getattr(proto, _VALUE_FIELDS[datatype])
    if len(values) > count:
        raise InvalidRequest(f"input {shown(name)}: {len(values)} values in {_VALUE_FIELDS[datatype]} for shape "
                             f"{list(shape)}, which holds {count}")
    dtype = datatypes.to_numpy(datatype, name)
    if datatype == "BYTES":
        flat = np.empty(count, dtype=object)
        flat[:len(values)] = list(values)
        flat[len(values):] = values[-1] if len(values) else b""
        return datatype, shape, flat.reshape(shape)
    stored = np.uint16 if datatype in _BIT_PATTERNS else dtype
    try:
        given = np.array(values, dtype=stored)
    except OverflowError:
        raise InvalidRequest(f"input {shown(name)}: a value in {_VALUE_FIELDS[datatype]} is out of range for "
                             f"{datatypes.TF_TYPE_NAMES[datatype]}") from None
    flat = np.zeros(count, dtype=stored)
    flat[:given.size] = given
    if 0 < given.size < count:
        flat[given.size:] = given[-1]
    return datatype, shape, flat.view(dtype).reshape(shape)


def encode_tensor(array: np.ndarray, proto: Any) -> None:
    """Write ``array`` into the empty ``TensorProto`` ``proto``: dtype, shape and its typed values."""
    datatype = datatypes.from_numpy(array.dtype)
    proto.dtype = _NUMBERS[datatype]
    for size in array.shape:
        proto.tensor_shape.dim.add(size=size)
    flat = array.reshape(-1)
    if datatype in _BIT_PATTERNS:
        flat = flat.view(np.uint16)
    elif datatype == "BYTES":
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in flat]
    getattr(proto, _VALUE_FIELDS[datatype]).extend(flat if isinstance(flat, list) else flat.tolist())
