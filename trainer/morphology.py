"""``tf.nn.dilation2d`` and ``tf.nn.erosion2d``: grayscale morphology on NHWC images, composed from
strided slices and a max over the filter taps, so the gradients come from those ops' rules (the
gradient goes to the tap that attains the max, as TF's Dilation2DBackprop* do).

dilation2d: ``out[b, y, x, c] = max over (i, j) of in[b, y*sh + i*rh, x*sw + j*rw, c] + filter[i, j, c]``
with SAME padding positions left out of the max (padded with -inf). erosion2d is TF's
``-dilation2d(-value, reverse(kernel, [0, 1]))``.
"""

from __future__ import annotations

import math

import numpy as np

from trainer import ops
from trainer.array_ops import pad, reduce_max, reverse, stack

__all__ = ["dilation2d", "erosion2d"]


def _four(values, what: str, op: str) -> tuple[int, int]:
    vals = [int(v) for v in values]
    if len(vals) != 4 or vals[0] != 1 or vals[3] != 1:
        raise ValueError(f"{op}: {what} must be [1, {what}_height, {what}_width, 1], got {list(values)}")
    if min(vals) < 1:
        raise ValueError(f"{op}: {what} must be positive, got {list(values)}")
    return vals[1], vals[2]


def _out_and_pads(size: int, kernel: int, stride: int, rate: int, padding: str) -> tuple[int, int, int]:
    effective = (kernel - 1) * rate + 1
    if padding == "VALID":
        return math.ceil((size - effective + 1) / stride), 0, 0
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + effective - size, 0)
    return out, total // 2, total - total // 2


def dilation2d(input, filter=None, strides=None, rates=None, padding=None, name=None, filters=None,  # noqa: A002
               data_format="NHWC", dilations=None):
    """Grayscale dilation of ``input`` [batch, H, W, depth] by ``filter`` [fh, fw, depth]."""
    op = "dilation2d"
    filt = ops.convert_to_tensor(filter if filter is not None else filters)
    x = ops.convert_to_tensor(input)
    if data_format != "NHWC":
        raise ValueError(f"{op}: only data_format='NHWC' is supported, got {data_format!r}")
    rates = rates if rates is not None else dilations
    if strides is None or rates is None or padding is None:
        raise ValueError(f"{op}: strides, rates and padding are required")
    padding = str(padding).upper()
    if padding not in ("SAME", "VALID"):
        raise ValueError(f"{op}: padding must be 'SAME' or 'VALID', got {padding!r}")
    if x.shape is None or len(x.shape) != 4 or x.shape[1] is None or x.shape[2] is None:
        raise ValueError(f"{op}: input must be 4-D [batch, height, width, depth] with a static height and width, "
                         f"got shape {x.shape}")
    if filt.shape is None or len(filt.shape) != 3 or None in filt.shape:
        raise ValueError(f"{op}: filter must be a static 3-D [filter_height, filter_width, depth], got {filt.shape}")
    if x.shape[3] is not None and filt.shape[2] != x.shape[3]:
        raise ValueError(f"{op}: input depth {x.shape[3]} and filter depth {filt.shape[2]} differ")
    (sh, sw), (rh, rw) = _four(strides, "strides", op), _four(rates, "rates", op)
    fh, fw = int(filt.shape[0]), int(filt.shape[1])
    oh, top, bottom = _out_and_pads(int(x.shape[1]), fh, sh, rh, padding)
    ow, left, right = _out_and_pads(int(x.shape[2]), fw, sw, rw, padding)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: the filter ({fh}x{fw} at rates {rh}x{rw}) is larger than the input "
                         f"{x.shape[1]}x{x.shape[2]} for VALID padding")
    graph = x.graph
    with graph.as_default(), graph.name_scope(name or "dilation2d"):
        padded = x
        if top or bottom or left or right:
            padded = pad(x, [[0, 0], [top, bottom], [left, right], [0, 0]],
                         constant_values=np.asarray(-np.inf, x.dtype))
        taps = []
        for i in range(fh):
            for j in range(fw):
                window = padded[:, i * rh: i * rh + (oh - 1) * sh + 1: sh, j * rw: j * rw + (ow - 1) * sw + 1: sw, :]
                taps.append(window + filt[i, j])
        return reduce_max(stack(taps), axis=0)


def erosion2d(value, kernel, strides, rates, padding, name=None):
    """Grayscale erosion of ``value`` [batch, H, W, depth] by ``kernel`` [kh, kw, depth]."""
    graph = ops.convert_to_tensor(value).graph
    with graph.as_default(), graph.name_scope(name or "erosion2d"):
        flipped = reverse(ops.convert_to_tensor(kernel), [0, 1])
        return ops.negative(dilation2d(ops.negative(value), flipped, strides, rates, padding))
