"""Conversions to and from the element types NumPy lacks (ml_dtypes' bfloat16, float8, float4,
int4/uint4, int2/uint2), with ONNX's rules where ml_dtypes' own ``astype`` differs from them.

- float8 with ``saturate`` (Cast's default): values beyond the largest finite value, infinities
  included, become that value; ml_dtypes would make them NaN (or inf for E5M2).
- float8e8m0 (a bare power-of-two exponent): rounded by ``round_mode`` (up, down, nearest) as ONNX
  defines it, saturating at the largest exponent unless ``saturate`` is 0.
- Between two ml_dtypes types, and from bool, the value goes through float32 (ml_dtypes converts
  from and to NumPy's own types only).
"""

from __future__ import annotations

import numpy as np

from schemas import dtypes

FLOAT32 = np.dtype(np.float32)
E8M0_SPECIAL = 0xFF  # the e8m0 code of NaN, and the float32 exponent of inf and NaN
E8M0_LARGEST = 0xFE


def largest_finite(dtype: np.dtype) -> float:
    import ml_dtypes  # present: an array of one of its types exists

    return float(ml_dtypes.finfo(dtype).max)


def is_integer(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is an integer type, NumPy's or ml_dtypes' (int4, uint2, ...)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" or (dtypes.is_extended(dtype) and dtypes.from_numpy(dtype) in dtypes.SUB_BYTE_INTEGERS)


def integer_range(dtype: np.dtype) -> tuple[int, int]:
    """The smallest and largest value of an integer type, NumPy's or ml_dtypes'."""
    if dtypes.is_extended(dtype):
        import ml_dtypes

        info = ml_dtypes.iinfo(dtype)
    else:
        info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def saturate_float8(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` clamped to ``dtype``'s finite range (NaN stays NaN), then converted."""
    high = largest_finite(dtype)
    return np.clip(x.astype(FLOAT32) if dtypes.is_extended(x.dtype) else x, -high, high).astype(dtype)


def to_float8e8m0(x: np.ndarray, dtype: np.dtype, saturate: bool, round_mode: str) -> np.ndarray:
    """ONNX's float -> float8e8m0: keep float32's exponent, rounded up by the dropped mantissa."""
    bits = np.asarray(x, dtype=FLOAT32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == E8M0_SPECIAL
    if round_mode == "up":
        up = (bits & 0x7FFFFF) > 0
    elif round_mode == "nearest":
        guard, rest = (bits & 0x400000) > 0, (bits & 0x3FFFFF) > 0
        up = guard & (rest | (exponent > 0))
    elif round_mode == "down":
        up = np.zeros(bits.shape, bool)
    else:
        raise ValueError(f"Cast: round_mode {round_mode!r} is not one of 'up', 'down', 'nearest'")
    up &= ~special
    if saturate:
        up &= exponent != E8M0_LARGEST
    exponent = np.where(special, E8M0_SPECIAL, exponent + up)
    return exponent.astype(np.uint8).view(dtype)


def cast_numeric(x: np.ndarray, dtype: np.dtype, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """``x`` as ``dtype`` under ONNX's Cast rules, for numeric types of either kind."""
    target = dtypes.from_numpy(dtype) if dtypes.is_extended(dtype) else None
    if target == dtypes.FLOAT8E8M0:
        return to_float8e8m0(x, dtype, saturate, round_mode)
    if target in dtypes.FLOAT8_TYPES and saturate:
        return saturate_float8(x, dtype)
    if (dtypes.is_extended(x.dtype) and dtypes.is_extended(dtype)) or (target and x.dtype == np.bool_):
        x = x.astype(FLOAT32)
    return x.astype(dtype)
