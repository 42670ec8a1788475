"""Element types of .flow tensors. Codes follow ONNX's TensorProto.DataType so imports map 1:1.

NumPy has no bfloat16, float8, float4, int4/uint4 or int2/uint2; the ``ml_dtypes`` package gives
them NumPy dtypes. It is an optional dependency (``pip install ml_dtypes``, in the ``edge`` extra),
imported only when a model uses one of those types.
"""

from __future__ import annotations

import numpy as np

UNDEFINED = 0  # element type not known (intermediates of imported graphs)
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL = 1, 2, 3, 4, 5, 6, 7, 8, 9
FLOAT16, DOUBLE, UINT32, UINT64, COMPLEX64, COMPLEX128, BFLOAT16 = 10, 11, 12, 13, 14, 15, 16
FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ = 17, 18, 19, 20
UINT4, INT4, FLOAT4E2M1, FLOAT8E8M0, UINT2, INT2 = 21, 22, 23, 24, 25, 26
# Non-tensor values flowing between ops (ONNX sequences and optionals); codes of our own.
SEQUENCE, OPTIONAL = 100, 101

_NUMPY_BY_CODE: dict[int, np.dtype] = {
    FLOAT: np.dtype(np.float32),
    UINT8: np.dtype(np.uint8),
    INT8: np.dtype(np.int8),
    UINT16: np.dtype(np.uint16),
    INT16: np.dtype(np.int16),
    INT32: np.dtype(np.int32),
    INT64: np.dtype(np.int64),
    STRING: np.dtype(object),
    BOOL: np.dtype(np.bool_),
    FLOAT16: np.dtype(np.float16),
    DOUBLE: np.dtype(np.float64),
    UINT32: np.dtype(np.uint32),
    UINT64: np.dtype(np.uint64),
    COMPLEX64: np.dtype(np.complex64),
    COMPLEX128: np.dtype(np.complex128),
}
_CODE_BY_NUMPY = {v: k for k, v in _NUMPY_BY_CODE.items()}
# The types ml_dtypes holds: code -> the name of its scalar type (and of its NumPy dtype).
_ML_DTYPES_NAMES = {
    BFLOAT16: "bfloat16",
    FLOAT8E4M3FN: "float8_e4m3fn",
    FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    FLOAT8E5M2: "float8_e5m2",
    FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    UINT4: "uint4",
    INT4: "int4",
    FLOAT4E2M1: "float4_e2m1fn",
    FLOAT8E8M0: "float8_e8m0fnu",
    UINT2: "uint2",
    INT2: "int2",
}
_CODE_BY_ML_DTYPES_NAME = {v: k for k, v in _ML_DTYPES_NAMES.items()}
# Sub-byte types: bits per element where they are packed (ONNX's raw_data, .flow buffers), lowest
# bits first; in memory ml_dtypes holds one element per byte.
PACKED_BITS = {UINT4: 4, INT4: 4, FLOAT4E2M1: 4, UINT2: 2, INT2: 2}
FLOAT8_TYPES = frozenset({FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2, FLOAT8E5M2FNUZ})
SUB_BYTE_INTEGERS = frozenset({UINT4, INT4, UINT2, INT2})
NAMES = {
    UNDEFINED: "UNDEFINED",
    FLOAT: "FP32", UINT8: "UINT8", INT8: "INT8", UINT16: "UINT16", INT16: "INT16", INT32: "INT32",
    INT64: "INT64", STRING: "BYTES", BOOL: "BOOL", FLOAT16: "FP16", DOUBLE: "FP64",
    UINT32: "UINT32", UINT64: "UINT64", COMPLEX64: "COMPLEX64", COMPLEX128: "COMPLEX128",
    BFLOAT16: "BF16", FLOAT8E4M3FN: "FLOAT8E4M3FN", FLOAT8E4M3FNUZ: "FLOAT8E4M3FNUZ",
    FLOAT8E5M2: "FLOAT8E5M2", FLOAT8E5M2FNUZ: "FLOAT8E5M2FNUZ", UINT4: "UINT4", INT4: "INT4",
    FLOAT4E2M1: "FLOAT4E2M1", FLOAT8E8M0: "FLOAT8E8M0", UINT2: "UINT2", INT2: "INT2",
    SEQUENCE: "SEQUENCE", OPTIONAL: "OPTIONAL",
}
# ONNX types flowstack has no dtype for at all, named so that errors say which one was asked for.
UNSUPPORTED_NAMES = {27: "FLOAT6E2M3", 28: "FLOAT6E3M2"}


class DTypeError(ValueError):
    pass


class MissingDTypePackage(DTypeError):
    """An element type that needs the optional ml_dtypes package, which is not installed."""


def is_known(code: int) -> bool:
    return code in NAMES


def name(code: int) -> str:
    """The element type's name in messages (``INT4``, ``FP32``, ``code 99``)."""
    return NAMES.get(code) or UNSUPPORTED_NAMES.get(code) or f"code {code}"


def _ml_dtype(code: int) -> np.dtype:
    try:
        import ml_dtypes  # imported on first use: the edge runtime's own dependencies are numpy and flatbuffers
    except ImportError:
        raise MissingDTypePackage(f"element type {NAMES[code]} needs the ml_dtypes package: pip install ml_dtypes") from None
    return np.dtype(getattr(ml_dtypes, _ML_DTYPES_NAMES[code]))


def to_numpy(code: int) -> np.dtype:
    """The NumPy dtype for a .flow dtype code (an ml_dtypes dtype for the types NumPy lacks)."""
    found = _NUMPY_BY_CODE.get(code)
    if found is not None:
        return found
    if code in _ML_DTYPES_NAMES:
        return _ml_dtype(code)
    raise DTypeError(f"element type {name(code)} has no NumPy equivalent")


def from_numpy(dtype: np.dtype | type) -> int:
    dt = np.dtype(dtype)
    if dt.kind in "US":
        return STRING
    found = _CODE_BY_NUMPY.get(dt)
    if found is not None:
        return found
    # An ml_dtypes array exists only where ml_dtypes is imported: known by its scalar type's module.
    if dt.type.__module__ == "ml_dtypes" and dt.name in _CODE_BY_ML_DTYPES_NAME:
        return _CODE_BY_ML_DTYPES_NAME[dt.name]
    raise DTypeError(f"NumPy dtype {dt} has no .flow element type")


def is_extended(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of ml_dtypes' (NumPy computes on few of them: see kernels)."""
    return np.dtype(dtype).type.__module__ == "ml_dtypes"
