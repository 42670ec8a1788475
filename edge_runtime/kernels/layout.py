"""Channels-last kernels: convolution and max pooling on (N, spatial..., C) arrays (see schemas.ops.layout)."""

from __future__ import annotations

import math

from edge_runtime.kernels import sliding_windows
from edge_runtime.kernels.fused import activate_scaled, input_scale, scaled
from edge_runtime.kernels.nn import max_windows
from edge_runtime.kernels.registry import kernel
from schemas.ops.fused import DOMAIN


def _window(xl, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode=0):
    return sliding_windows.resolve_window(xl.shape[1:-1], tuple(kernel_shape), strides, dilations, pads, auto_pad, ceil_mode)


@kernel("ChannelsLastConv", DOMAIN)
def channels_last_conv(x, w, b, *, xp, activation, activation_params, auto_pad, dilations, group, kernel_shape, pads,
                       strides):
    if group == 1 and _pointwise(w, strides, pads):
        return _pointwise_conv(x, w, b, xp, activation, activation_params)
    depthwise = group == x.shape[-1] == w.shape[0] and w.shape[-1] == 1
    if group != 1 and not depthwise:
        raise ValueError(f"group={group}: channels-last convolution is implemented for group 1 and depthwise "
                         f"(one filter per channel) only, got {x.shape[-1]} channels and weights {tuple(w.shape)}")
    win = _window(x, kernel_shape or w.shape[1:-1], strides, dilations, pads, auto_pad)
    # the weights scaled for the activation's cheaper form where that takes fewer multiplies than
    # the output has values (a depthwise convolution's always)
    factor = input_scale(activation, activation_params)
    if factor != 1.0 and w.size > x.shape[0] * math.prod(win.out) * w.shape[0]:
        factor = 1.0
    w, b = scaled(w, factor), scaled(b, factor)

    def finish(rows):  # on each chunk of output rows while it is in cache
        if b is not None:
            rows += b
        if activation:
            activate_scaled(rows, xp, activation, activation_params, factor)

    if sliding_windows.runs_tap_products(x, xp, group, win):
        return sliding_windows.conv_channels_last_taps(x, w, xp, win, finish)
    padded = sliding_windows.pad_channels_last(x, xp, win.pad_begin, win.padded_end)
    if depthwise and group > 1:
        return sliding_windows.depthwise_channels_last(padded, w, xp, win, finish)
    return sliding_windows.conv_channels_last(padded, w, xp, win, finish)


def _pointwise(w, strides, pads) -> bool:
    """A 1x1 convolution with stride 1 and no padding (any auto_pad then pads nothing)."""
    return (all(k == 1 for k in w.shape[1:-1]) and all(s == 1 for s in strides or ())
            and not any(pads or ()))


def _pointwise_conv(x, w, b, xp, activation, params):
    """A 1x1 convolution channels-last is one matmul over the channels: (rows, C) @ (C, M), with
    none of the window arithmetic (MobileNetV2 and EfficientNet-B0 run 28 and 50 of these, 24 of
    EfficientNet's on 1x1 squeeze-excite planes, where that arithmetic cost more than the product)."""
    m, c = w.shape[0], x.shape[-1]
    cols, w2 = x.reshape(-1, c), w.reshape(m, c)
    # scaled for the activation's cheaper form where that takes fewer multiplies than the output has values
    factor = input_scale(activation, params) if c <= cols.shape[0] else 1.0
    w2, b = scaled(w2, factor), scaled(b, factor)
    if cols.shape[0] < sliding_windows.CHANNELS_LAST_FEW_ROWS:
        y = xp.ascontiguousarray(xp.matmul(w2, cols.T).T)
    else:
        y = xp.matmul(cols, w2.T)
    if b is not None:
        y += b
    if activation:
        activate_scaled(y, xp, activation, params, factor)
    return y.reshape(x.shape[:-1] + (m,))


@kernel("ChannelsLastMaxPool", DOMAIN)
def channels_last_max_pool(x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides):
    win = _window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    return max_windows(x, xp, win, lead=1)
