"""Elementwise math, activations, comparisons, logic and matrix products."""

from __future__ import annotations

from edge_runtime.kernels.registry import kernel


@kernel("Relu")
def relu(x, *, xp):
    return xp.maximum(x, x.dtype.type(0))


@kernel("Add")
def add(a, b, *, xp):
    return xp.add(a, b)


@kernel("Sub")
def sub(a, b, *, xp):
    return xp.subtract(a, b)


@kernel("Mul")
def mul(a, b, *, xp):
    return xp.multiply(a, b)


@kernel("Div")
def div(a, b, *, xp):
    if a.dtype.kind in "iu":
        return _int_div(a, b, xp)
    return xp.divide(a, b)


def _int_div(a, b, xp):
    # ONNX integer division truncates toward zero (C semantics), unlike numpy's floor_divide.
    q = xp.floor_divide(a, b)
    fix = (xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return (q + fix).astype(a.dtype)


@kernel("Equal")
def equal(a, b, *, xp):
    return xp.equal(a, b)


@kernel("MatMul")
def matmul(a, b, *, xp):
    return xp.matmul(a, b)
