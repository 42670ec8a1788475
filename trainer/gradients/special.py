"""Gradients of the special-function ops, as TensorFlow 1.15 registers them (math_grad.py):
the order and ``a`` arguments of Polygamma, Zeta and Betainc get none."""

from __future__ import annotations

import numpy as np

from trainer.gradients.helpers import binary, fs, onnx, unary, unbroadcast, zero_grad
from trainer.gradients.registry import register_gradient

reg = register_gradient
D = "flowstack"

reg("Lgamma", D)(unary(lambda g, x, y: g * fs("Digamma", [x])))
reg("Digamma", D)(unary(lambda g, x, y: g * fs("Polygamma", [fs("OnesLike", [x]), x])))
reg("Polygamma", D)(binary(None, lambda g, a, x, y: g * fs("Polygamma", [a + 1.0, x])))
reg("Zeta", D)(binary(None, lambda g, x, q, y: g * -x * fs("Zeta", [x + 1.0, q])))
reg("Atan2", D)(binary(lambda g, y, x, z: g * x / (x * x + y * y), lambda g, y, x, z: -(g * y) / (x * x + y * y)))
zero_grad("NextAfter", "InvertPermutation", "IgammaGradA", domain=D)


def _igamma_dx(a, x):
    """dP(a, x)/dx = exp(-x + (a - 1) log x - lgamma(a))."""
    return onnx("Exp", [-x + (a - 1.0) * onnx("Log", [x]) - fs("Lgamma", [a])])


reg("Igamma", D)(binary(lambda g, a, x, y: g * fs("IgammaGradA", [a, x]), lambda g, a, x, y: g * _igamma_dx(a, x)))
reg("Igammac", D)(binary(lambda g, a, x, y: -(g * fs("IgammaGradA", [a, x])),
                         lambda g, a, x, y: -(g * _igamma_dx(a, x))))


@reg("Betainc", D)
def _betainc(node, grads):
    # d I_x(a, b)/dx = x^(a-1) (1-x)^(b-1) / B(a, b); TensorFlow gives a and b none.
    a, b, x = node.inputs
    y = node.outputs[0]
    log_beta = fs("Lgamma", [a]) + fs("Lgamma", [b]) - fs("Lgamma", [a + b])
    dx = onnx("Exp", [(a - 1.0) * onnx("Log", [x]) + (b - 1.0) * onnx("Log", [1.0 - x]) - log_beta])
    return [None, None, unbroadcast(grads[0] * dx, x, y)]


reg("BesselI0e", D)(unary(lambda g, x, y: g * (fs("BesselI1e", [x]) - onnx("Sign", [x]) * y)))


@reg("BesselI1e", D)
def _bessel_i1e(node, grads):
    # TensorFlow's rule: i0e(x) - y (sign(x) + 1/x), and 0.5 at |x| <= eps where 1/x blows up.
    x, y = node.inputs[0], node.outputs[0]
    eps = float(np.finfo(x.dtype).eps) if x.dtype is not None and x.dtype.kind == "f" else 1e-7
    not_tiny = onnx("Greater", [onnx("Abs", [x]), eps])
    safe_x = onnx("Where", [not_tiny, x, fs("OnesLike", [x]) * eps])
    dy = fs("BesselI0e", [safe_x]) - y * (onnx("Sign", [safe_x]) + onnx("Reciprocal", [safe_x]))
    return [grads[0] * onnx("Where", [not_tiny, dy, fs("OnesLike", [x]) * 0.5])]


@reg("CumulativeLogsumexp", D)
def _cumulative_logsumexp(node, grads):
    # TensorFlow's rule: the gradient's positive and negative parts, each in log space, through the
    # reversed cumulative logsumexp, so nothing overflows.
    x, axis = node.inputs
    y, g = node.outputs[0], grads[0]
    attrs = {"exclusive": node.attrs["exclusive"], "reverse": 1 - node.attrs["reverse"]}
    lowest = fs("OnesLike", [g]) * float(np.finfo(g.dtype).min)
    parts = []
    for positive in (onnx("Greater", [g, 0.0]), onnx("Less", [g, 0.0])):
        magnitude = onnx("Abs", [g])
        safe = onnx("Where", [positive, magnitude, fs("OnesLike", [g])])
        log_g = onnx("Where", [positive, onnx("Log", [safe]), lowest])
        parts.append(onnx("Exp", [fs("CumulativeLogsumexp", [log_g - y, axis], attrs) + x]))
    return [parts[0] - parts[1], None]


def _complex_of(re, im):
    return fs("Complex", [re, im])


reg("Real", D)(unary(lambda g, x, y: _complex_of(g, fs("ZerosLike", [g]))))
reg("Imag", D)(unary(lambda g, x, y: _complex_of(fs("ZerosLike", [g]), g)))
reg("Conj", D)(unary(lambda g, x, y: fs("Conj", [g])))
reg("Complex", D)(binary(lambda g, re, im, y: fs("Real", [g]), lambda g, re, im, y: fs("Imag", [g])))


@reg("Angle", D)
def _angle(node, grads):
    # TensorFlow's rule: -complex(g, 0) / complex(imag(x), real(x)).
    x, g = node.inputs[0], grads[0]
    z = onnx("Reciprocal", [_complex_of(fs("Imag", [x]), fs("Real", [x]))])
    return [-(_complex_of(g, fs("ZerosLike", [g])) * z)]
