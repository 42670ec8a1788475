"""Tensor data types of the KServe v2 protocol, and decoding and encoding of tensor contents.

Every decoder checks sizes against the declared shape before allocating, so a request that
declares a huge shape with little data is refused instead of exhausting memory.
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Any, Iterable

import numpy as np

from schemas import dtypes
from serving.errors import InvalidRequest, shown

_TO_NUMPY = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}
_FROM_NUMPY = {dtype: name for name, dtype in _TO_NUMPY.items()}
# Datatypes whose NumPy dtype comes from ml_dtypes (the ``edge`` extra), looked up on first use.
_EXTENDED = {"BF16": dtypes.BFLOAT16}
_EXTENDED_BY_CODE = {code: name for name, code in _EXTENDED.items()}
NAMES = sorted([*_TO_NUMPY, *_EXTENDED])

# Triton's model configuration spells the same types TYPE_<NAME>, with STRING for BYTES.
CONFIG_TYPE_NAMES = {name: ("TYPE_STRING" if name == "BYTES" else f"TYPE_{name}") for name in NAMES}
# TensorFlow's DataType names, as TF Serving's metadata gives them.
TF_TYPE_NAMES = {"BOOL": "DT_BOOL", "UINT8": "DT_UINT8", "UINT16": "DT_UINT16", "UINT32": "DT_UINT32",
                 "UINT64": "DT_UINT64", "INT8": "DT_INT8", "INT16": "DT_INT16", "INT32": "DT_INT32", "INT64": "DT_INT64",
                 "FP16": "DT_HALF", "BF16": "DT_BFLOAT16", "FP32": "DT_FLOAT", "FP64": "DT_DOUBLE", "BYTES": "DT_STRING"}


def to_numpy(datatype: str, tensor: str = "") -> np.dtype:
    """The NumPy dtype for a protocol datatype name, or InvalidRequest naming the tensor."""
    where = f"input {shown(tensor)}: " if tensor else ""
    try:
        return _TO_NUMPY[datatype]
    except (KeyError, TypeError):
        if datatype not in _EXTENDED:
            raise InvalidRequest(f"{where}unknown datatype {shown(datatype)}; expected one of {NAMES}") from None
    try:
        return dtypes.to_numpy(_EXTENDED[datatype])
    except dtypes.MissingDTypePackage as exc:
        raise InvalidRequest(f"{where}datatype {datatype}: the server cannot hold it ({exc})") from None


def from_numpy(dtype: np.dtype) -> str:
    """The protocol datatype name for a NumPy dtype (strings and bytes map to BYTES)."""
    name = _FROM_NUMPY.get(dtype)  # a dtype (or type) named in the table: every response's outputs
    if name is not None:
        return name
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return "BYTES"
    try:
        return _FROM_NUMPY[dtype]
    except KeyError:
        pass
    name = _EXTENDED_BY_CODE.get(dtypes.from_numpy(dtype)) if dtypes.is_extended(dtype) else None
    if name is not None:
        return name
    raise ValueError(f"dtype {dtype} has no KServe v2 datatype")


# NumPy 1.x arrays have at most 32 dimensions (2.x: 64); a shape with more failed in reshape.
MAX_RANK = 32
# NumPy refuses even an empty array ("array is too big") whose nonzero dimensions times its item
# size (8 bytes at most here) pass the largest index.
_MAX_EMPTY_EXTENT = np.iinfo(np.intp).max // 8


def check_shape(name: str, shape: Any, max_elements: int) -> tuple[int, ...]:
    """Validate a declared shape: a list of non-negative ints whose product is within limits."""
    if type(shape) is list and len(shape) <= MAX_RANK:  # every request's: one loop, no generators
        count = 1
        for d in shape:
            if type(d) is not int or d < 0:
                break
            count *= d
        else:
            if 0 < count <= max_elements:
                return tuple(shape)
    if not isinstance(shape, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise InvalidRequest(f"input {shown(name)}: shape must be a list of integers, got {shown(shape)}")
    if len(shape) > MAX_RANK:
        raise InvalidRequest(
            f"input {shown(name)}: shape {shown(list(shape))} has {len(shape)} dimensions, more than the {MAX_RANK} an array can have"
        )
    if any(d < 0 for d in shape):
        raise InvalidRequest(f"input {shown(name)}: shape {shown(list(shape))} has a negative dimension")
    count = math.prod(shape)
    if count > max_elements:
        raise InvalidRequest(f"input {shown(name)}: shape {shown(list(shape))} declares {shown(count)} elements, "
                             f"more than the limit of {max_elements}")
    if count == 0 and math.prod(d for d in shape if d) > _MAX_EMPTY_EXTENT:
        raise InvalidRequest(
            f"input {shown(name)}: shape {shown(list(shape))} is empty, but its other dimensions are too large for an array"
        )
    return tuple(shape)


def from_json(name: str, datatype: str, shape: tuple[int, ...], data: Any) -> np.ndarray:
    """Decode JSON tensor data (flat or nested, row-major) into an array of the declared shape."""
    dtype = to_numpy(datatype, name)
    if data is None:
        raise InvalidRequest(f"input {shown(name)}: no 'data' and no binary_data_size parameter")
    if dtype.kind == "O":  # BYTES
        array = bytes_from_json(name, data)
    else:
        try:
            array = np.asarray(data)
        except (ValueError, TypeError) as exc:
            raise InvalidRequest(f"input {shown(name)}: data is not a regular array: {exc}") from None
        kind = array.dtype.kind
        if dtype.kind in "iu" and kind in "fO":
            array = _exact_integers(name, datatype, dtype, data)
            kind = array.dtype.kind
        if kind in "OUSV":
            raise InvalidRequest(f"input {shown(name)}: data for datatype {datatype} must be numbers")
        if datatype == "BOOL":
            if kind != "b":
                raise InvalidRequest(f"input {shown(name)}: data for datatype BOOL must be true/false")
        elif kind == "b":
            raise InvalidRequest(f"input {shown(name)}: data for datatype {datatype} must be numbers, got true/false")
        if dtype.kind in "iu" and array.size and kind in "iu":
            info = np.iinfo(dtype)
            if array.min() < info.min or array.max() > info.max:
                raise InvalidRequest(f"input {shown(name)}: a value is out of range for {datatype}")
    expected = math.prod(shape)
    if array.size != expected:
        raise InvalidRequest(f"input {shown(name)}: shape {shown(list(shape))} needs {expected} elements, data has {array.size}")
    try:
        array = array.astype(dtype, copy=False)
    except RuntimeWarning:
        # Numbers past FP16's or FP32's range become +-inf, as NumPy casts them (and as the JSON
        # Infinity literal reads). NumPy warns of the overflow; where warnings are errors (-W error,
        # pytest's settings) that warning would fail the request, so it is silenced here only.
        with np.errstate(over="ignore"):
            array = array.astype(dtype, copy=False)
    return array.reshape(shape)


def _exact_integers(name: str, datatype: str, dtype: np.dtype, data: Any) -> np.ndarray:
    """Integer data that NumPy did not read as integers: read exactly, or refused naming why.

    NumPy reads a list holding an integer past INT64's range beside any other integer as float64
    (or as objects, past UINT64's), so UINT64 data would lose precision or be refused as floats.
    Integer literals past 64 bits arrive as integral floats (orjson reads them so) and are
    reported as out of range. Anything else comes back as an object array for the caller to refuse.
    """
    values = np.asarray(data, dtype=object)
    flat = values.reshape(-1).tolist()
    types = set(map(type, flat))
    info = np.iinfo(dtype)
    if types <= {int}:
        if flat and (min(flat) < info.min or max(flat) > info.max):
            raise InvalidRequest(f"input {shown(name)}: a value is out of range for {datatype}")
        return np.array(flat, dtype=dtype).reshape(values.shape)
    if types <= {int, float}:
        if any(type(v) is float and v.is_integer() and not info.min <= v <= info.max for v in flat):
            raise InvalidRequest(f"input {shown(name)}: a value is out of range for {datatype}")
        raise InvalidRequest(f"input {shown(name)}: data for datatype {datatype} must be integers, got floats")
    return values


def bytes_from_json(name: str, data: Any, *, b64: bool = False) -> np.ndarray:
    """BYTES data as JSON holds it (a string, or lists of strings nested to any depth) as an object
    array of bytes in the shape of that nesting; strings are UTF-8 encoded. Ragged nesting is
    refused, as NumPy refuses it for numbers, rather than flattened into some other shape.

    With ``b64`` (TensorFlow Serving REST), a value may also be ``{"b64": "<base64>"}``: its bytes.

    >>> bytes_from_json("t", [["a", {"b64": "/w=="}]], b64=True)
    array([[b'a', b'\\xff']], dtype=object)
    """
    flat, shape = _flatten(name, data, b64)
    array = np.empty(len(flat), dtype=object)
    array[:] = flat
    return array.reshape(shape)


def _flatten(name: str, data: Any, b64: bool) -> tuple[list[bytes], tuple[int, ...]]:
    """The leaves of nested-list BYTES data in row-major order, and the shape of the nesting.

    The first element of each list, followed down, gives the shape; every other list must then
    have its depth's length and every value the innermost depth (as TensorFlow Serving reads it)."""
    shape: list[int] = []
    probe = data
    while isinstance(probe, list):
        shape.append(len(probe))
        probe = probe[0] if probe else None
    rank = len(shape)
    if not rank:
        return [_bytes_value(name, data, b64)], ()
    out: list[bytes] = []
    stack = [iter(data)]
    while stack:
        depth = len(stack)  # of the items of the innermost list being read
        for item in stack[-1]:
            if isinstance(item, list):
                if depth == rank or len(item) != shape[depth]:
                    raise _ragged(name, shape, depth, item)
                stack.append(iter(item))
                break
            if depth != rank:
                raise _ragged(name, shape, depth, item)
            out.append(_bytes_value(name, item, b64))
        else:
            stack.pop()
    return out, tuple(shape)


def _bytes_value(name: str, value: Any, b64: bool) -> bytes:
    if isinstance(value, str):
        try:
            return value.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate, which JSON's \ud800 escapes can spell
            raise InvalidRequest(f"input {shown(name)}: BYTES data holds a string that is not valid Unicode: {exc.reason}") from None
    if isinstance(value, bytes):
        return value
    if b64 and isinstance(value, dict):
        return _b64_value(name, value)
    expected = 'strings or {"b64": "<base64>"} objects' if b64 else "strings"
    raise InvalidRequest(f"input {shown(name)}: BYTES data must be {expected}, got {type(value).__name__}")


def _b64_value(name: str, value: dict) -> bytes:
    """TensorFlow Serving's binary value: ``{"b64": "<standard base64>"}`` and no other key.
    Like TF Serving's decoder, padding may be left out; whitespace (line-wrapped output of the
    ``base64`` tool) is skipped."""
    encoded = value.get("b64")
    if len(value) != 1 or not isinstance(encoded, str):
        raise InvalidRequest(f'input {shown(name)}: a binary value must be an object {{"b64": "<base64 string>"}} '
                             f"and nothing else, got {shown(value)}")
    encoded = "".join(encoded.split())
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except ValueError as exc:  # binascii.Error, or non-ASCII characters
        raise InvalidRequest(f"input {shown(name)}: 'b64' value {shown(encoded)} is not valid base64: {exc}") from None


def _ragged(name: str, shape: list[int], depth: int, item: Any) -> InvalidRequest:
    rank = len(shape)
    if not isinstance(item, list):
        why = f"the first value is at depth {rank}, another at depth {depth}"
    elif depth == rank:
        why = f"the first value is at depth {rank}, others deeper"
    else:
        why = f"a list at depth {depth} has {len(item)} elements where the first there has {shape[depth]}"
    return InvalidRequest(f"input {shown(name)}: data is not a regular array: {why}")


def from_raw(name: str, datatype: str, shape: tuple[int, ...], raw: bytes | memoryview) -> np.ndarray:
    """Decode raw little-endian row-major bytes (BYTES: each element a 4-byte length then its bytes)."""
    dtype = to_numpy(datatype, name)
    expected = math.prod(shape)
    if dtype == object:
        return _bytes_from_raw(name, shape, raw, expected)
    need = expected * dtype.itemsize
    if len(raw) != need:
        raise InvalidRequest(f"input {shown(name)}: shape {shown(list(shape))} of {datatype} needs {need} bytes, got {len(raw)}")
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False).reshape(shape)


def _bytes_from_raw(name: str, shape: tuple[int, ...], raw: bytes | memoryview, expected: int) -> np.ndarray:
    view = memoryview(raw)
    items = []
    offset = 0
    while offset < len(view):
        if offset + 4 > len(view):
            raise InvalidRequest(f"input {shown(name)}: truncated BYTES element length at byte {offset}")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > len(view):
            raise InvalidRequest(f"input {shown(name)}: BYTES element of {length} bytes runs past the end of the data")
        items.append(bytes(view[offset : offset + length]))
        offset += length
        if len(items) > expected:
            raise InvalidRequest(
                f"input {shown(name)}: shape {shown(list(shape))} needs {expected} BYTES elements, got {len(items)} or more"
            )
    if len(items) != expected:
        raise InvalidRequest(f"input {shown(name)}: shape {shown(list(shape))} needs {expected} BYTES elements, got {len(items)}")
    array = np.empty(expected, dtype=object)
    array[:] = items
    return array.reshape(shape)


def to_raw(array: np.ndarray) -> bytes:
    """Encode an array as raw row-major little-endian bytes (BYTES: length-prefixed elements)."""
    if array.dtype.kind in "OSU":
        parts = []
        for item in array.reshape(-1):
            value = item.encode() if isinstance(item, str) else bytes(item)
            parts.append(struct.pack("<I", len(value)))
            parts.append(value)
        return b"".join(parts)
    return np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()


def all_finite(arrays: Iterable[np.ndarray]) -> bool:
    """No NaN or infinity in any of the (float or complex) ``arrays``."""
    return all((a.dtype.kind not in "fc" and not dtypes.is_extended(a.dtype)) or bool(np.isfinite(a).all())
               for a in arrays)


def to_json(array: np.ndarray) -> list:
    """Flatten an array into a JSON-ready list (BYTES as UTF-8 strings)."""
    flat = array.reshape(-1)
    if array.dtype.kind in "OS":
        return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in flat]
    return flat.tolist()
