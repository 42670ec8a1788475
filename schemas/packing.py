"""Sub-byte element types (int4/uint4, float4, int2/uint2) packed as ONNX packs them.

On disk several elements share a byte, the first in the lowest bits (int4: two per byte, low nibble
first); in memory ml_dtypes holds one element per byte, its bits in the low end. A packed int4
weight is 8x smaller than its float32 original.

>>> import numpy as np
>>> pack(np.array([1, 2, 3], np.uint8), 4).tolist()
[33, 3]
>>> unpack(np.array([33, 3], np.uint8), 4, 3).tolist()
[1, 2, 3]
"""

from __future__ import annotations

import numpy as np

from schemas import dtypes


def packed_size(count: int, bits: int) -> int:
    """Bytes that ``count`` elements of ``bits`` bits take packed."""
    per_byte = 8 // bits
    return (count + per_byte - 1) // per_byte


def stored_size(array: np.ndarray, code: int) -> int:
    """Bytes ``array`` (of .flow element type ``code``) takes in a file: packed for sub-byte types."""
    bits = dtypes.PACKED_BITS.get(code)
    return packed_size(array.size, bits) if bits else array.nbytes


def _shifts(bits: int) -> np.ndarray:
    return np.arange(0, 8, bits, dtype=np.uint8)


def pack(array: np.ndarray, bits: int) -> np.ndarray:
    """The elements of ``array`` (one per byte, any 1-byte dtype) packed ``8 // bits`` to a byte."""
    values = np.ascontiguousarray(array).reshape(-1).view(np.uint8) & np.uint8((1 << bits) - 1)
    per_byte = 8 // bits
    padded = np.zeros(packed_size(values.size, bits) * per_byte, np.uint8)
    padded[: values.size] = values
    return np.bitwise_or.reduce(padded.reshape(-1, per_byte) << _shifts(bits), axis=1).astype(np.uint8)


def unpack(raw: np.ndarray, bits: int, count: int) -> np.ndarray:
    """``count`` elements, one per byte (uint8, to be viewed as the ml_dtypes type), from packed ``raw``."""
    values = (raw.reshape(-1, 1) >> _shifts(bits)) & np.uint8((1 << bits) - 1)
    return values.reshape(-1)[:count]
