"""Quantization: linear (de)quantization and integer / quantized-linear matmul and convolution.

Integer products accumulate in int32 as ONNX specifies; requantization rounds half to even.
"""

from __future__ import annotations

import math

import numpy as np

from edge_runtime.kernels.element_casts import cast_numeric, integer_range, is_integer
from edge_runtime.kernels.registry import kernel
from schemas.ops.quantize import check_quantized
from schemas.ops.shape import dtype_from_code

INT32 = np.int32


def _along_axis(param, x, axis: int, block_size: int, xp):
    """Broadcast a scale or zero point against ``x``: one value, one per slice of ``axis``, or one
    per block of ``block_size`` elements along ``axis``."""
    if param.size == 1:
        return param.reshape(())
    axis %= x.ndim
    if block_size:
        param = xp.repeat(param, block_size, axis=axis)
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, x.shape[axis])
        return param[tuple(index)]
    shape = [1] * x.ndim
    shape[axis] = param.size
    return param.reshape(shape)


def _saturate(values, dtype, xp):
    low, high = integer_range(dtype)
    return xp.clip(values, low, high).astype(dtype)


@kernel("QuantizeLinear")
def quantize_linear(x, y_scale, y_zero_point, *, xp, axis, block_size, output_dtype, precision, saturate):
    if y_zero_point is not None:
        dtype = y_zero_point.dtype
    else:
        dtype = dtype_from_code(output_dtype, "QuantizeLinear") if output_dtype else np.dtype(np.uint8)
    check_quantized(dtype, "QuantizeLinear")
    scale = _along_axis(y_scale, x, axis, block_size, xp)
    if precision:
        compute = dtype_from_code(precision, "QuantizeLinear")
        x, scale = x.astype(compute), scale.astype(compute)
    if not is_integer(dtype):  # a float8 or float4 grid: the nearest value, no integer rounding
        q = x / scale
        if y_zero_point is not None and y_zero_point.astype(np.float32).any():  # +0 would turn -0 into 0
            q = q + _along_axis(y_zero_point, x, axis, block_size, xp).astype(np.float32)
        return cast_numeric(q, dtype, bool(saturate))
    if x.dtype == np.float32 and dtype.itemsize == 1:  # 8-bit and smaller grids: exact in float32, no int64 pass
        q = xp.rint(x / scale)
        if y_zero_point is not None:
            q += _along_axis(y_zero_point, x, axis, block_size, xp).astype(np.float32)
        return _saturate(q, dtype, xp)
    q = xp.rint(x / scale).astype(np.int64)
    if y_zero_point is not None:
        q = q + _along_axis(y_zero_point, x, axis, block_size, xp).astype(np.int64)
    return _saturate(q, dtype, xp)


@kernel("DequantizeLinear")
def dequantize_linear(x, x_scale, x_zero_point, *, xp, axis, block_size, output_dtype):
    check_quantized(x.dtype, "DequantizeLinear")
    dtype = dtype_from_code(output_dtype, "DequantizeLinear") if output_dtype else x_scale.dtype
    if x.dtype.itemsize <= 2:
        # 16-bit and smaller values (integers, float8, float4) and their differences are exact in
        # float32: no int64 pass
        values = x.astype(np.float32)
        if x_zero_point is not None:
            values -= _along_axis(x_zero_point, x, axis, block_size, xp).astype(np.float32)
        y = values * _along_axis(x_scale, x, axis, block_size, xp)
        return y if y.dtype == dtype else y.astype(dtype)
    values = x.astype(np.int64)
    if x_zero_point is not None:
        values = values - _along_axis(x_zero_point, x, axis, block_size, xp).astype(np.int64)
    scale = _along_axis(x_scale, x, axis, block_size, xp)
    return (values.astype(scale.dtype) * scale).astype(dtype)


@kernel("DynamicQuantizeLinear")
def dynamic_quantize_linear(x, *, xp):
    # The range always includes 0 so that 0 is exactly representable; ONNX computes it in float32.
    low = np.float32(min(float(x.min()), 0.0) if x.size else 0.0)
    high = np.float32(max(float(x.max()), 0.0) if x.size else 0.0)
    scale = (high - low if high != low else np.float32(1)) / np.float32(255)
    zero_point = np.uint8(np.clip(np.rint(-low / scale), 0, 255))
    y = _saturate(xp.rint(x / scale) + int(zero_point), np.uint8, xp)
    return y, xp.asarray(scale, dtype=np.float32), xp.asarray(zero_point, dtype=np.uint8)


def _centered(values, zero_point, xp, axis_for_vector: int):
    """``values - zero_point`` in int32; a 1-D zero point runs along ``axis_for_vector``."""
    out = values.astype(INT32)
    if zero_point is None:
        return out
    zp = zero_point.astype(INT32)
    if zp.size > 1:
        shape = [1] * values.ndim
        shape[axis_for_vector] = zp.size
        zp = zp.reshape(shape)
    else:
        zp = zp.reshape(())
    return out - zp


@kernel("MatMulInteger")
def matmul_integer(a, b, a_zero_point, b_zero_point, *, xp):
    # A 1-D zero point is per row of A and per column of B.
    return xp.matmul(_centered(a, a_zero_point, xp, -2), _centered(b, b_zero_point, xp, -1))


def _conv_pads(spatial, kernel_shape, strides, dilations, pads, auto_pad):
    n = len(spatial)
    if auto_pad in ("NOTSET", ""):
        return pads or [0] * (2 * n)
    if auto_pad == "VALID":
        return [0] * (2 * n)
    lo, hi = [], []
    for size, k, s, d in zip(spatial, kernel_shape, strides, dilations):
        total = max((math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small = total // 2
        lo.append(small if auto_pad == "SAME_UPPER" else total - small)
        hi.append(total - lo[-1])
    return lo + hi


def conv_int32(x, w, xp, *, auto_pad, dilations, group, kernel_shape, pads, strides):
    """N-D grouped convolution of int32 tensors accumulating in int32 (im2col and one matmul)."""
    n = x.ndim - 2
    kernel_shape = list(w.shape[2:])
    strides = strides or [1] * n
    dilations = dilations or [1] * n
    pads = _conv_pads(x.shape[2:], kernel_shape, strides, dilations, pads, auto_pad)
    x = xp.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + n]) for i in range(n)])
    extent = [(k - 1) * d + 1 for k, d in zip(kernel_shape, dilations)]
    windows = xp.lib.stride_tricks.sliding_window_view(x, extent, axis=tuple(range(2, 2 + n)))
    index = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
    index += tuple(slice(None, None, d) for d in dilations)
    windows = windows[index]  # (N, C, *out, *kernel)
    batch, channels = x.shape[:2]
    out_spatial = windows.shape[2:2 + n]
    per_group = channels // group
    # (N, g, C/g, O, K) -> (N, g, O, C/g * K) so that one matmul per group does the whole conv.
    cols = windows.reshape(batch, group, per_group, math.prod(out_spatial), math.prod(kernel_shape))
    cols = cols.transpose(0, 1, 3, 2, 4).reshape(batch, group, math.prod(out_spatial), -1)
    filters = w.reshape(group, w.shape[0] // group, -1).transpose(0, 2, 1)  # (g, C/g * K, M/g)
    out = xp.matmul(cols, filters)  # (N, g, O, M/g)
    return out.transpose(0, 1, 3, 2).reshape((batch, w.shape[0]) + tuple(out_spatial))


@kernel("ConvInteger")
def conv_integer(x, w, x_zero_point, w_zero_point, *, xp, auto_pad, dilations, group, kernel_shape, pads,
                 strides):
    # Padding after removing the zero point pads with the zero point, as ONNX specifies.
    return conv_int32(
        _centered(x, x_zero_point, xp, 1), _centered(w, w_zero_point, xp, 0), xp,
        auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
        strides=strides,
    )


def _requantize(acc, multiplier, y_zero_point, xp):
    values = xp.rint(acc * multiplier) + y_zero_point.astype(np.float64)
    return _saturate(values, y_zero_point.dtype, xp)


@kernel("QLinearMatMul")
def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, *, xp):
    acc = matmul_integer(a, b, a_zero_point, b_zero_point, xp=xp)
    a_scale = a_scale.reshape(-1, 1) if a_scale.size > 1 else a_scale.reshape(())
    multiplier = (a_scale * b_scale / y_scale).astype(np.float64)
    return _requantize(acc, multiplier, y_zero_point, xp)


@kernel("QLinearConv")
def qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B, *, xp,
                 auto_pad, dilations, group, kernel_shape, pads, strides):
    acc = conv_integer(x, w, x_zero_point, w_zero_point, xp=xp, auto_pad=auto_pad, dilations=dilations,
                       group=group, kernel_shape=kernel_shape, pads=pads, strides=strides)
    if B is not None:
        acc = acc + B.astype(INT32).reshape((1, -1) + (1,) * (acc.ndim - 2))
    # A 1-D weight scale is per output channel.
    w_scale = w_scale.reshape((1, -1) + (1,) * (acc.ndim - 2)) if w_scale.size > 1 else w_scale.reshape(())
    multiplier = (x_scale.reshape(()) * w_scale / y_scale.reshape(())).astype(np.float64)
    return _requantize(acc, multiplier, y_zero_point.reshape(()), xp)
