"""Element types of .flow tensors. Codes follow ONNX's TensorProto.DataType so imports map 1:1."""

from __future__ import annotations

import numpy as np

UNDEFINED = 0  # element type not known (intermediates of imported graphs)
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL = 1, 2, 3, 4, 5, 6, 7, 8, 9
FLOAT16, DOUBLE, UINT32, UINT64, COMPLEX64, COMPLEX128, BFLOAT16 = 10, 11, 12, 13, 14, 15, 16
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
NAMES = {
    UNDEFINED: "UNDEFINED",
    FLOAT: "FP32", UINT8: "UINT8", INT8: "INT8", UINT16: "UINT16", INT16: "INT16", INT32: "INT32",
    INT64: "INT64", STRING: "BYTES", BOOL: "BOOL", FLOAT16: "FP16", DOUBLE: "FP64",
    UINT32: "UINT32", UINT64: "UINT64", COMPLEX64: "COMPLEX64", COMPLEX128: "COMPLEX128",
    BFLOAT16: "BF16", SEQUENCE: "SEQUENCE", OPTIONAL: "OPTIONAL",
}


class DTypeError(ValueError):
    pass


def is_known(code: int) -> bool:
    return code in NAMES


def to_numpy(code: int) -> np.dtype:
    """The NumPy dtype for a .flow dtype code."""
    try:
        return _NUMPY_BY_CODE[code]
    except KeyError:
        name = NAMES.get(code, f"code {code}")
        raise DTypeError(f"element type {name} has no NumPy equivalent") from None


def from_numpy(dtype: np.dtype | type) -> int:
    dt = np.dtype(dtype)
    if dt.kind in "US":
        return STRING
    try:
        return _CODE_BY_NUMPY[dt]
    except KeyError:
        raise DTypeError(f"NumPy dtype {dt} has no .flow element type") from None
