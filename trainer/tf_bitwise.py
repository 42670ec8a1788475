"""``tf.bitwise``: TensorFlow 1.15's bitwise operations on integer tensors (int8 ... uint64).

Two's-complement semantics, as TensorFlow's kernels: ``right_shift`` of a signed value is
arithmetic (it keeps the sign), and a shift amount is clamped to ``[0, bits - 1]`` first (C++
leaves a shift past the width undefined; TensorFlow clamps it). No op here has a gradient.
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import clip_by_value
from trainer.graph import Tensor
from trainer.ops import convert_to_tensor, make_op

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift"]


def _integer(op: str, x, like: Tensor | None = None) -> Tensor:
    typed = isinstance(x, (Tensor, np.ndarray, np.generic))  # Python numbers take the other operand's dtype
    t = convert_to_tensor(x, dtype=None if like is None or typed else like.dtype)
    if t.dtype is not None and t.dtype.kind not in "iu":
        raise TypeError(f"bitwise.{op}: expected an integer tensor (int8 ... uint64), got {t.dtype}")
    return t


def _pair(op: str, x, y) -> tuple[Tensor, Tensor]:
    a = _integer(op, x, y if isinstance(y, Tensor) else None)
    b = _integer(op, y, a)
    if a.dtype is not None and b.dtype is not None and a.dtype != b.dtype:
        raise TypeError(f"bitwise.{op}: x and y must have the same dtype, got {a.dtype} and {b.dtype}")
    return a, b


def _binary(onnx_op: str, op: str, x, y, name) -> Tensor:
    a, b = _pair(op, x, y)
    return make_op(onnx_op, [a, b], name=name or op).outputs[0]


def bitwise_and(x, y, name=None) -> Tensor:
    return _binary("BitwiseAnd", "BitwiseAnd", x, y, name)


def bitwise_or(x, y, name=None) -> Tensor:
    return _binary("BitwiseOr", "BitwiseOr", x, y, name)


def bitwise_xor(x, y, name=None) -> Tensor:
    return _binary("BitwiseXor", "BitwiseXor", x, y, name)


def invert(x, name=None) -> Tensor:
    """Every bit flipped (``~x``)."""
    return make_op("BitwiseNot", [_integer("invert", x)], name=name or "Invert").outputs[0]


def _shift(direction: str, op: str, x, y, name) -> Tensor:
    a, b = _pair(op, x, y)
    bits = np.dtype(a.dtype).itemsize * 8 if a.dtype is not None else 64
    amount = clip_by_value(b, np.zeros((), b.dtype), np.asarray(bits - 1, b.dtype))
    return make_op("BitShift", [a, amount], {"direction": direction}, name=name or op).outputs[0]


def left_shift(x, y, name=None) -> Tensor:
    """``x << y`` elementwise (``y`` clamped to [0, bits - 1])."""
    return _shift("LEFT", "LeftShift", x, y, name)


def right_shift(x, y, name=None) -> Tensor:
    """``x >> y`` elementwise, arithmetic for signed types (``y`` clamped to [0, bits - 1])."""
    return _shift("RIGHT", "RightShift", x, y, name)
