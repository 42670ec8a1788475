"""``tensorflow.TensorProto``, wire-compatible with TensorFlow's tensor.proto: the bytes
``tf.io.serialize_tensor`` writes and ``tf.io.parse_tensor`` reads, and the messages
``tf.make_tensor_proto`` / ``tf.make_ndarray`` trade in.

As in trainer/example_proto.py, the message classes are made by protobuf's runtime from a
descriptor written here, in a private pool (a TensorFlow installed beside flowstack never clashes).
"""

from __future__ import annotations

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from trainer.dtypes import as_dtype

__all__ = ["TensorProto", "TensorShapeProto", "make_ndarray", "make_tensor_proto", "parse_tensor_proto",
           "serialize_array"]

_F = descriptor_pb2.FieldDescriptorProto

# numpy dtype name -> TensorFlow's DataType enum number (types.proto).
DATA_TYPES = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "object": 7,
              "complex64": 8, "int64": 9, "bool": 10, "uint16": 17, "complex128": 18, "float16": 19,
              "uint32": 22, "uint64": 23}
_DTYPE_OF = {number: np.dtype(name) for name, number in DATA_TYPES.items()}

# The typed value field a TensorProto without tensor_content keeps a dtype's values in.
_VALUE_FIELDS = {"float32": "float_val", "float64": "double_val", "int32": "int_val", "uint8": "int_val",
                 "int16": "int_val", "int8": "int_val", "object": "string_val", "complex64": "scomplex_val",
                 "int64": "int64_val", "bool": "bool_val", "uint16": "int_val", "complex128": "dcomplex_val",
                 "float16": "half_val", "uint32": "uint32_val", "uint64": "uint64_val"}


def _file() -> descriptor_pb2.FileDescriptorProto:
    fd = descriptor_pb2.FileDescriptorProto(name="flowstack/tensor.proto", package="tensorflow", syntax="proto3")
    shape = fd.message_type.add(name="TensorShapeProto")
    dim = shape.nested_type.add(name="Dim")
    dim.field.add(name="size", number=1, type=_F.TYPE_INT64, label=_F.LABEL_OPTIONAL)
    dim.field.add(name="name", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    shape.field.add(name="dim", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                    type_name=".tensorflow.TensorShapeProto.Dim")
    shape.field.add(name="unknown_rank", number=3, type=_F.TYPE_BOOL, label=_F.LABEL_OPTIONAL)
    tensor = fd.message_type.add(name="TensorProto")
    tensor.field.add(name="dtype", number=1, type=_F.TYPE_INT32, label=_F.LABEL_OPTIONAL)  # the DataType enum
    tensor.field.add(name="tensor_shape", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                     type_name=".tensorflow.TensorShapeProto")
    tensor.field.add(name="version_number", number=3, type=_F.TYPE_INT32, label=_F.LABEL_OPTIONAL)
    tensor.field.add(name="tensor_content", number=4, type=_F.TYPE_BYTES, label=_F.LABEL_OPTIONAL)
    for name, number, kind in (("float_val", 5, _F.TYPE_FLOAT), ("double_val", 6, _F.TYPE_DOUBLE),
                               ("int_val", 7, _F.TYPE_INT32), ("string_val", 8, _F.TYPE_BYTES),
                               ("scomplex_val", 9, _F.TYPE_FLOAT), ("int64_val", 10, _F.TYPE_INT64),
                               ("bool_val", 11, _F.TYPE_BOOL), ("dcomplex_val", 12, _F.TYPE_DOUBLE),
                               ("half_val", 13, _F.TYPE_INT32), ("uint32_val", 16, _F.TYPE_UINT32),
                               ("uint64_val", 17, _F.TYPE_UINT64)):
        field = tensor.field.add(name=name, number=number, type=kind, label=_F.LABEL_REPEATED)
        if kind != _F.TYPE_BYTES:
            field.options.packed = True
    return fd


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file())
TensorShapeProto = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.TensorShapeProto"))
TensorProto = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.TensorProto"))


def _data_type(dtype: np.dtype, what: str) -> int:
    number = DATA_TYPES.get(np.dtype(dtype).name)
    if number is None:
        raise TypeError(f"{what}: dtype {np.dtype(dtype).name} has no TensorFlow DataType")
    return number


def _string_bytes(value) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def tensor_content_proto(array: np.ndarray, what: str = "serialize_tensor") -> TensorProto:
    """The TensorProto TensorFlow's AsProtoTensorContent writes: raw little-endian bytes in
    tensor_content (string tensors: one string_val each)."""
    array = np.asarray(array)
    proto = TensorProto(dtype=_data_type(array.dtype, what))
    proto.tensor_shape.dim.extend(TensorShapeProto.Dim(size=int(d)) for d in array.shape)
    if array.dtype == object:
        proto.string_val.extend(_string_bytes(v) for v in array.reshape(-1).tolist())
    else:
        proto.tensor_content = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
    return proto


def serialize_array(array: np.ndarray) -> bytes:
    """``tf.io.serialize_tensor``'s bytes for ``array``."""
    return tensor_content_proto(array).SerializeToString()


def make_ndarray(tensor: TensorProto) -> np.ndarray:
    """The array a TensorProto holds: tensor_content, or its typed value list (the last value
    repeated to fill the shape, as TensorFlow reads a short list)."""
    dtype = _DTYPE_OF.get(tensor.dtype)
    if dtype is None:
        raise TypeError(f"make_ndarray: unsupported TensorProto dtype {tensor.dtype}")
    shape = tuple(int(d.size) for d in tensor.tensor_shape.dim)
    count = int(np.prod(shape, dtype=np.int64))
    if tensor.tensor_content:
        wire = dtype.newbyteorder("<")
        if len(tensor.tensor_content) != count * wire.itemsize:
            raise ValueError(f"make_ndarray: tensor_content holds {len(tensor.tensor_content)} bytes, a "
                             f"{dtype.name} tensor of shape {shape} needs {count * wire.itemsize}")
        return np.frombuffer(tensor.tensor_content, wire).astype(dtype).reshape(shape)
    values = list(getattr(tensor, _VALUE_FIELDS[dtype.name]))
    if dtype.kind == "c":
        values = [complex(r, i) for r, i in zip(values[0::2], values[1::2])]
    if dtype == np.float16:
        values = np.array(values, np.uint16).view(np.float16).tolist()
    if len(values) > count:
        raise ValueError(f"make_ndarray: {len(values)} values for a tensor of shape {shape}")
    if values and len(values) < count:
        values = values + [values[-1]] * (count - len(values))
    if dtype == object:
        out = np.empty(count, dtype=object)
        out[:] = values if values else [b""] * count
        return out.reshape(shape)
    return (np.array(values, dtype) if values else np.zeros(count, dtype)).reshape(shape)


def parse_tensor_proto(data: bytes, out_type: np.dtype) -> np.ndarray:
    """``tf.io.parse_tensor``: the array serialized TensorProto bytes hold, checked to be ``out_type``."""
    from google.protobuf.message import DecodeError

    try:
        proto = TensorProto.FromString(bytes(data))
    except DecodeError:
        raise ValueError("ParseTensor: could not parse the input as a TensorProto") from None
    parsed = _DTYPE_OF.get(proto.dtype)
    if parsed != np.dtype(out_type):
        name = "an unknown dtype" if parsed is None else parsed.name
        raise ValueError(f"ParseTensor: type mismatch between parsed tensor ({name}) and dtype "
                         f"({np.dtype(out_type).name})")
    return make_ndarray(proto)


def make_tensor_proto(values, dtype=None, shape=None, verify_shape: bool = False,
                      allow_broadcast: bool = False) -> TensorProto:
    """``tf.make_tensor_proto``: ``values`` (cast to ``dtype``, broadcast or filled to ``shape``) as a TensorProto."""
    np_dtype = None if dtype is None else np.dtype(as_dtype(dtype).as_numpy_dtype)
    array = np.asarray(values, dtype=np_dtype)
    if array.dtype.kind in "US":
        array = array.astype(object)
    if np_dtype is None and array.dtype == np.float64 and not isinstance(values, np.ndarray):
        array = array.astype(np.float32)  # TensorFlow reads Python floats as float32
    if shape is not None:
        shape = tuple(int(d) for d in shape)
        if verify_shape and array.shape != shape:
            raise TypeError(f"make_tensor_proto: expected shape {shape}, got {array.shape}")
        if array.size == 1:
            array = np.full(shape, array.reshape(()), array.dtype)
        elif array.shape != shape:
            if not allow_broadcast and array.size != int(np.prod(shape, dtype=np.int64)):
                raise ValueError(f"make_tensor_proto: {array.size} values do not fill shape {shape}")
            array = np.broadcast_to(array, shape) if allow_broadcast else array.reshape(shape)
    return tensor_content_proto(array, "make_tensor_proto")
