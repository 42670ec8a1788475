"""Fused ops: the base op's own kernel, then the activation applied in place on its fresh output."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from edge_runtime.kernels import pool_phases, sliding_windows, stride_phases
from edge_runtime.kernels.math import gemm, relu_into
from edge_runtime.kernels.nn import max_windows
from edge_runtime.kernels.registry import get_kernel, kernel
from schemas.ops.fused import DOMAIN, monotone_activation


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


def _swish(y, xp, alpha):
    # y * sigmoid(alpha y), the sigmoid as (tanh(alpha y / 2) + 1) / 2: one temporary
    gate = y * y.dtype.type(alpha / 2)
    xp.tanh(gate, out=gate)
    gate *= y.dtype.type(0.5)
    gate += y.dtype.type(0.5)
    y *= gate


def _hard_swish(y, xp):
    # y * clip(y / 6 + 1/2, 0, 1) with one temporary, alpha 1/6 multiplied as ONNX writes it
    gate = y * y.dtype.type(1 / 6)
    gate += y.dtype.type(0.5)
    xp.clip(gate, y.dtype.type(0), y.dtype.type(1), out=gate)
    y *= gate


# SiLU (Swish at alpha 1) is y * sigmoid(y) = h (1 + tanh h) with h = y / 2. A kernel that scales
# its weights and bias by SILU_INPUT_SCALE computes h itself (a power-of-two scaling is exact, so h is
# y / 2 to the bit) and ``activate_scaled`` then takes three passes where ``_swish`` takes five, with
# the same result to the bit: round(2h * round(t + 1) / 2) == round(h * round(t + 1)).
SILU_INPUT_SCALE = 0.5


def input_scale(activation: str, params) -> float:
    """The factor a kernel may scale its weights and bias by before ``activate_scaled``."""
    return SILU_INPUT_SCALE if activation == "Swish" and list(params) == [1.0] else 1.0


def scaled(a, factor: float):
    """``a`` times ``factor`` (``a`` itself at 1, None stays None)."""
    return a if a is None or factor == 1.0 else a * a.dtype.type(factor)


def activate_scaled(y, xp, activation: str, params, factor: float):
    """``activation`` in place on the fresh ``y``, the output of weights and bias scaled by
    ``factor`` (1, or ``input_scale(activation, params)``); returns it."""
    if factor == 1.0:
        return apply_activation(y, xp, activation, params)
    gate = xp.tanh(y)
    gate += y.dtype.type(1)
    y *= gate
    return y


@lru_cache(maxsize=64)
def keeps_zero_at_zero(activation: str, params: tuple) -> bool:
    """Whether ``activation`` ("" for none) maps 0 to 0 (Relu, Clip around 0, SiLU; not Sigmoid)."""
    return not activation or bool(apply_activation(np.zeros(1), np, activation, params)[0] == 0)


_ACTIVATE = {
    "Relu": _relu,
    "LeakyRelu": _leaky_relu,
    "Clip": _clip,
    "Sigmoid": _sigmoid,
    "Tanh": _tanh,
    "HardSigmoid": _hard_sigmoid,
    "Swish": _swish,
    "HardSwish": _hard_swish,
}


def apply_activation(y, xp, activation: str, params):
    """``activation`` (an ``ACTIVATIONS`` name) applied in place on ``y``, a fresh array; returns it."""
    # the base kernels return fresh arrays; this guards a future view (CuPy arrays are always writeable)
    if not getattr(y.flags, "writeable", True):
        y = y.copy()
    _ACTIVATE[activation](y, xp, *params)
    return y


@kernel("FusedConv", DOMAIN)
def fused_conv(x, w, b, *, xp, activation, activation_params, **conv_attrs):
    factor = input_scale(activation, activation_params)
    strides = math.prod(conv_attrs.get("strides") or [1])
    if factor != 1.0 and w.size * strides <= x.shape[0] * w.shape[0] * math.prod(x.shape[2:]):
        # the weights scaled in fewer multiplies than the output has values
        y = get_kernel("Conv")(x, scaled(w, factor), scaled(b, factor), xp=xp, **conv_attrs)
        return activate_scaled(y, xp, activation, activation_params, factor)
    return apply_activation(get_kernel("Conv")(x, w, b, xp=xp, **conv_attrs), xp, activation, activation_params)


@kernel("FusedGemm", DOMAIN)
def fused_gemm(a, b, c, *, xp, activation, activation_params, **gemm_attrs):
    return apply_activation(gemm(a, b, c, xp=xp, **gemm_attrs), xp, activation, activation_params)


@kernel("FusedConvMaxPool", DOMAIN)
def fused_conv_max_pool(x, w, b, *, xp, activation, activation_params, pool_kernel_shape, pool_strides, pool_pads,
                        auto_pad, dilations, group, kernel_shape, pads, strides):
    """MaxPool(activation(Conv(x))), pooled first: a max commutes with adding a per-channel bias and
    with a non-decreasing activation, so both run on the pooled output (a quarter of the conv's
    under a 2x2 pool). Where the pool's windows allow, the convolution runs over the pool's phases
    (``pool_phases``: the pool is the maximum over whole channel blocks); else the pool reads the
    convolution's output as its im2col path left it (flat columns' uncropped rows, or
    channels-last, pooled before the one transpose back to planar)."""
    win = sliding_windows.resolve_window(x.shape[2:], tuple(kernel_shape or w.shape[2:]), strides, dilations, pads, auto_pad)
    pool_win = sliding_windows.resolve_window(win.out, tuple(pool_kernel_shape), pool_strides, None, pool_pads, "NOTSET")
    if not monotone_activation(activation, activation_params):
        y = sliding_windows.conv(x, w, b, xp, group=group, win=win)
        return max_windows(apply_activation(y, xp, activation, activation_params), xp, pool_win, lead=2)
    phase_plan = pool_phases.plan(x, w, group, win, pool_win, xp)
    if phase_plan is not None:
        pooled, channels_last = pool_phases.conv_max_pool(x, w, xp, win, phase_plan), phase_plan.channels_last
    else:
        y, channels_last = sliding_windows.conv_unfinished(x, w, xp, group=group, win=win)
        pooled = max_windows(y, xp, pool_win, lead=1 if channels_last else 2)
    if channels_last:  # the bias added as the planar copy is written
        planar = pooled.transpose((0, pooled.ndim - 1) + tuple(range(1, pooled.ndim - 1)))
        out = xp.empty(planar.shape, dtype=pooled.dtype)
        if b is None:
            out[...] = planar
        else:
            xp.add(planar, b.reshape((-1,) + (1,) * (out.ndim - 2)), out=out)
    else:
        out = xp.ascontiguousarray(pooled)  # the pools write fresh arrays: a copy only if strided
        if b is not None:
            out += b.reshape((-1,) + (1,) * (out.ndim - 2))
    if activation:
        apply_activation(out, xp, activation, activation_params)
    return out


@kernel("FusedConvPointwise", DOMAIN)
def fused_conv_pointwise(x, w, b, w_pointwise, b_pointwise, *, xp, activation, activation_params,
                         pointwise_activation, pointwise_activation_params, auto_pad, dilations, group,
                         kernel_shape, pads, strides):
    """A convolution and its activation, then the 1x1 convolution that reads it (and its activation).

    Where the first runs as flat im2col, the 1x1 reads its output as computed, every row as wide as
    the padded input row (``sliding_windows.conv_wide_rows``), instead of a cropped copy, and its own output
    is cropped: MobileNetV2's project layers have a sixth of the channels of the depthwise output
    they read (dw 3x3 + project at 144@56x56: 1171-1235 -> 1099-1110 us). The exporter's
    ``fuse_pointwise`` pass leaves pairs apart where a padded row is much wider than an output row."""
    win = sliding_windows.resolve_window(x.shape[2:], tuple(kernel_shape or w.shape[2:]), strides, dilations, pads, auto_pad)
    if sliding_windows.runs_wide_rows(x, w, xp, group, win):
        y, crop = sliding_windows.conv_wide_rows(x, w, xp, win, group), sliding_windows.flat_crop(x.shape, win)
    else:
        y, crop = sliding_windows.conv(x, w, None, xp, group=group, win=win), None
    n, m = y.shape[:2]
    if b is not None:
        y += b.reshape((1, m) + (1,) * (y.ndim - 2))
    if activation:
        apply_activation(y, xp, activation, activation_params)
    m2 = w_pointwise.shape[0]
    z = xp.matmul(w_pointwise.reshape(m2, m), y.reshape(n, m, math.prod(y.shape[2:]))).reshape((n, m2) + y.shape[2:])
    if crop is not None:
        z = z[crop]
    z = xp.ascontiguousarray(z) if b_pointwise is None else z + b_pointwise.reshape((1, m2) + (1,) * (z.ndim - 2))
    if pointwise_activation:
        apply_activation(z, xp, pointwise_activation, pointwise_activation_params)
    return z


_ONE_BY_ONE = {"auto_pad": "NOTSET", "dilations": None, "group": 1, "kernel_shape": None, "pads": None, "strides": None}


def _conv_then_activation(x, w, b, xp, activation, params, **conv_attrs):
    if activation:
        return fused_conv(x, w, b, xp=xp, activation=activation, activation_params=params, **conv_attrs)
    return get_kernel("Conv")(x, w, b, xp=xp, **conv_attrs)


@kernel("FusedPointwiseConv", DOMAIN)
def fused_pointwise_conv(x, w_pointwise, b_pointwise, w, b, *, xp, pointwise_activation, pointwise_activation_params,
                         activation, activation_params, auto_pad, dilations, group, kernel_shape, pads, strides):
    """A 1x1 convolution (and its activation), then the convolution that reads it (and its
    activation). A strided depthwise second convolution runs over stride phases on NumPy
    (``stride_phases``: the 1x1 convolution writes its output split into phases, so no tap is
    gathered with a stride); anything else (an empty batch too) runs as the two convolutions."""
    win = sliding_windows.resolve_window(x.shape[2:], tuple(kernel_shape or w.shape[2:]), strides, dilations, pads, auto_pad)
    if xp.__name__ != "numpy" or x.size == 0 or not stride_phases.fits(x, w_pointwise, w, group, win):
        e = _conv_then_activation(x, w_pointwise, b_pointwise, xp, pointwise_activation, pointwise_activation_params,
                                  **_ONE_BY_ONE)
        return _conv_then_activation(e, w, b, xp, activation, activation_params, auto_pad=auto_pad,
                                     dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                                     strides=strides)
    geo = stride_phases.geometry(tuple(x.shape[2:]), win)
    # both weights are small beside the tensors they make: scaled for the activations' cheaper form
    first = input_scale(pointwise_activation, pointwise_activation_params)
    keeps_zero = keeps_zero_at_zero(pointwise_activation, tuple(pointwise_activation_params))
    e = stride_phases.expand_into_phases(x, scaled(w_pointwise, first), scaled(b_pointwise, first), xp, geo,
                                         bias_on_padding=not keeps_zero)
    if pointwise_activation:
        activate_scaled(e, xp, pointwise_activation, pointwise_activation_params, first)
    if not keeps_zero:
        stride_phases.zero_padding(e, geo)
    second = input_scale(activation, activation_params)
    wide = stride_phases.depthwise_over_phases(e, scaled(w, second), scaled(b, second), xp, geo)
    y = xp.empty(wide.shape[:3] + (win.out[1],), dtype=wide.dtype)
    y[...] = wide[..., : win.out[1]]
    return activate_scaled(y, xp, activation, activation_params, second) if activation else y


@kernel("FusedMatMul", DOMAIN)
def fused_matmul(a, b, c, *, xp, activation, activation_params):
    """A's rows (its last axis) times B, the bias, then the activation: one 2-D product whose right
    operand is B itself, row-major. (A channels-last 1x1 convolution's (M, C) weights are read
    transposed; OpenBLAS runs the product of few rows 10-25% slower that way.)"""
    k, n = b.shape
    rows = a.reshape(-1, k)
    # scaled for the activation's cheaper form where that takes fewer multiplies than the output has values
    factor = input_scale(activation, activation_params) if k <= rows.shape[0] else 1.0
    y = xp.matmul(rows, scaled(b, factor))
    if c is not None:
        y += scaled(c, factor)
    if activation:
        activate_scaled(y, xp, activation, activation_params, factor)
    return y.reshape(a.shape[:-1] + (n,))
