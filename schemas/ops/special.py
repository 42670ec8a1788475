"""Special functions and the elementwise math TensorFlow has and ONNX lacks: log-gamma and its
derivatives, Hurwitz zeta, the incomplete gamma and beta integrals, scaled Bessel functions,
atan2, nextafter, and InvertPermutation (TensorFlow's ops of the same names)."""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import broadcast_shapes, common_dtype, const_ints, normalize_axis
from schemas.registry import Attr, TensorType, op

D = "flowstack"


def _floating(ctx):
    """Rule: one output broadcasting every input, all of one float dtype (TensorFlow's half/float/double)."""
    indices = list(range(ctx.num_inputs))
    dtype = common_dtype(ctx, indices)
    if dtype is not None and dtype.kind != "f":
        names = ", ".join(ctx.schema.inputs[i].name for i in indices)
        raise ctx.fail(f"{names} must be floating point (float16, float32 or float64), got {dtype}")
    return [TensorType(dtype, broadcast_shapes(ctx, [ctx.input(i).shape for i in indices]))]


op("Lgamma", domain=D, inputs=["x"], outputs=["y"], differentiable=True,
   doc="log |Gamma(x)| elementwise; +inf at the poles.")(_floating)
op("Digamma", domain=D, inputs=["x"], outputs=["y"], differentiable=True,
   doc="psi(x), the derivative of Lgamma; NaN at the poles.")(_floating)
op("Polygamma", domain=D, inputs=["a", "x"], outputs=["z"], differentiable=True,
   doc="The a-th derivative of Digamma at x (a a non-negative integer held in a float; NaN otherwise).")(_floating)
op("Zeta", domain=D, inputs=["x", "q"], outputs=["z"], differentiable=True,
   doc="The Hurwitz zeta function sum over k >= 0 of (k + q)^-x.")(_floating)
op("Igamma", domain=D, inputs=["a", "x"], outputs=["z"], differentiable=True,
   doc="The regularized lower incomplete gamma integral P(a, x).")(_floating)
op("Igammac", domain=D, inputs=["a", "x"], outputs=["z"], differentiable=True,
   doc="The regularized upper incomplete gamma integral Q(a, x) = 1 - P(a, x).")(_floating)
op("IgammaGradA", domain=D, inputs=["a", "x"], outputs=["z"],
   doc="dP(a, x)/da, the gradient of Igamma with respect to a.")(_floating)
op("Betainc", domain=D, inputs=["a", "b", "x"], outputs=["z"], differentiable=True,
   doc="The regularized incomplete beta integral I_x(a, b).")(_floating)
op("BesselI0e", domain=D, inputs=["x"], outputs=["y"], differentiable=True,
   doc="exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0.")(_floating)
op("BesselI1e", domain=D, inputs=["x"], outputs=["y"], differentiable=True,
   doc="exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1.")(_floating)
op("Atan2", domain=D, inputs=["y", "x"], outputs=["z"], differentiable=True,
   doc="The angle of the point (x, y), in [-pi, pi], elementwise with broadcasting.")(_floating)
op("NextAfter", domain=D, inputs=["x1", "x2"], outputs=["output"],
   doc="The next representable value after x1 in the direction of x2.")(_floating)


@op("InvertPermutation", domain=D, inputs=["x"], outputs=["y"],
    doc="y[x[i]] = i for a vector x holding a permutation of 0..n-1 (int32 or int64).")
def _invert_permutation(ctx):
    x = ctx.input(0)
    if x.dtype is not None and x.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ctx.fail(f"x must be int32 or int64, got {x.dtype}")
    if x.shape is not None and len(x.shape) != 1:
        raise ctx.fail(f"x must be a vector, got shape {x.shape}")
    return [x]


@op("CumulativeLogsumexp", domain=D, inputs=["x", "axis"], outputs=["out"], differentiable=True,
    attrs={"exclusive": Attr("int", 0), "reverse": Attr("int", 0)},
    doc="log(cumsum(exp(x))) along axis, by a running logaddexp (TensorFlow's CumulativeLogsumexp).")
def _cumulative_logsumexp(ctx):
    x = ctx.input(0)
    if x.dtype is not None and x.dtype.kind != "f":
        raise ctx.fail(f"x must be floating point, got {x.dtype}")
    axis = const_ints(ctx, 1)
    if axis is not None and x.rank is not None:
        normalize_axis(ctx, axis[0], x.rank)
    return [x]


# -- complex numbers: float32 parts make complex64, float64 parts complex128 ---------------------
# Their gradients (TensorFlow's) are registered, but they are not marked differentiable: the
# finite-difference table (tests/trainer/test_gradients.py) takes float inputs and outputs only.
# tests/tf1_compat/test_math_complex.py checks them through real-valued chains instead.
_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
_PART = {c: f for f, c in _COMPLEX.items()}


@op("Complex", domain=D, inputs=["real", "imag"], outputs=["out"],
    doc="real + 1j * imag elementwise with broadcasting.")
def _complex(ctx):
    dtype = common_dtype(ctx, [0, 1])
    if dtype is not None and dtype not in _COMPLEX:
        raise ctx.fail(f"real and imag must be float32 or float64, got {dtype}")
    shape = broadcast_shapes(ctx, [ctx.input(0).shape, ctx.input(1).shape])
    return [TensorType(None if dtype is None else _COMPLEX[dtype], shape)]


def _complex_to_part(ctx):
    x = ctx.input(0)
    if x.dtype is not None and x.dtype not in _PART:
        raise ctx.fail(f"input must be complex64 or complex128, got {x.dtype}")
    return [TensorType(None if x.dtype is None else _PART[x.dtype], x.shape)]


def _complex_in_out(ctx):
    x = ctx.input(0)
    if x.dtype is not None and x.dtype not in _PART:
        raise ctx.fail(f"input must be complex64 or complex128, got {x.dtype}")
    return [x]


op("Real", domain=D, inputs=["input"], outputs=["output"],
   doc="The real part of each complex element.")(_complex_to_part)
op("Imag", domain=D, inputs=["input"], outputs=["output"],
   doc="The imaginary part of each complex element.")(_complex_to_part)
op("Angle", domain=D, inputs=["input"], outputs=["output"],
   doc="The argument of each complex element, in [-pi, pi].")(_complex_to_part)
op("Conj", domain=D, inputs=["input"], outputs=["output"],
   doc="The complex conjugate of each element.")(_complex_in_out)
