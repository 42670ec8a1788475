"""Fused ops: the base op's own kernel, then the activation applied in place on its fresh output."""

from __future__ import annotations

from edge_runtime.kernels.math import relu_into
from edge_runtime.kernels.registry import get_kernel, kernel
from schemas.ops.fused import DOMAIN


def _relu(y, xp):
    relu_into(y, xp, out=y)


def _leaky_relu(y, xp, alpha):
    if 0.0 <= alpha <= 1.0:  # then leaky_relu(y) == max(y, alpha * y)
        xp.maximum(y, y * y.dtype.type(alpha), out=y)
    else:
        y[...] = xp.where(y < 0, y * y.dtype.type(alpha), y)


def _clip(y, xp, lo, hi):
    # min(max(y, lo), hi), as the Clip kernel: when lo > hi every element becomes hi.
    xp.clip(y, y.dtype.type(lo), y.dtype.type(hi), out=y)


def _sigmoid(y, xp):
    # sigmoid(y) == (tanh(y / 2) + 1) / 2: stable for large |y| and needs no temporary.
    y *= y.dtype.type(0.5)
    xp.tanh(y, out=y)
    y += y.dtype.type(1)
    y *= y.dtype.type(0.5)


def _tanh(y, xp):
    xp.tanh(y, out=y)


def _hard_sigmoid(y, xp, alpha, beta):
    y *= y.dtype.type(alpha)
    y += y.dtype.type(beta)
    xp.clip(y, y.dtype.type(0), y.dtype.type(1), out=y)


_ACTIVATE = {
    "Relu": _relu,
    "LeakyRelu": _leaky_relu,
    "Clip": _clip,
    "Sigmoid": _sigmoid,
    "Tanh": _tanh,
    "HardSigmoid": _hard_sigmoid,
}


def apply_activation(y, xp, activation: str, params):
    """``activation`` (an ``ACTIVATIONS`` name) applied in place on ``y``, a fresh array; returns it."""
    if not y.flags.writeable:  # the base kernels return fresh arrays; this guards a future view
        y = y.copy()
    _ACTIVATE[activation](y, xp, *params)
    return y


@kernel("FusedConv", DOMAIN)
def fused_conv(x, w, b, *, xp, activation, activation_params, **conv_attrs):
    return apply_activation(get_kernel("Conv")(x, w, b, xp=xp, **conv_attrs), xp, activation, activation_params)


@kernel("FusedGemm", DOMAIN)
def fused_gemm(a, b, c, *, xp, activation, activation_params, **gemm_attrs):
    return apply_activation(get_kernel("Gemm")(a, b, c, xp=xp, **gemm_attrs), xp, activation, activation_params)
