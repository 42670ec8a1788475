"""2-D convolution and its two gradients on CuPy: one im2col launch, one GEMM, one col2im launch.

The portable kernels (``edge_runtime/kernels/nn.py``, ``trainer/kernels/nn.py``) are shaped for a
CPU's caches: per-example batched products and a strided add per kernel tap. On a GPU each of
those is a launch and CuPy's batched matmul builds pointer arrays on every call, so a training
step waits on the interpreter. Here the whole batch is one column matrix ``(C*KH*KW, N*OH*OW)``
built by a ``RawKernel`` straight from the unpadded input (padding and dilation in its index
arithmetic), each product is one 2-D GEMM, and the input gradient gathers its columns back by a
second ``RawKernel`` (no atomics: every input element sums its own taps). Group-1 float32/float64
2-D convolutions take this path; anything else runs the portable kernel.

Imports CuPy: imported only when a GPU device is opened (through ``trainer.gpu_kernels``).
"""

from __future__ import annotations

import math

import cupy

from edge_runtime.kernels import get_kernel
from edge_runtime.kernels.sliding_windows import Window, resolve_window
from trainer.gpu_launch import FLOAT_TYPES, RawSource, launch_over, window_args
from trainer.kernels import nn as portable

__all__ = ["OVERRIDES", "col2im", "conv", "conv_backprop_filter", "conv_backprop_input", "im2col"]

D = "flowstack"

_KERNELS = RawSource(r"""
extern "C" __global__ void im2col(const T* x, T* cols, long long total, int N, int C, int H, int W,
                                  int KH, int KW, int OH, int OW, int sh, int sw, int ph, int pw,
                                  int dh, int dw) {
    long long np = (long long)N * OH * OW;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        long long row = i / np, col = i - row * np;
        int ow = (int)(col % OW);
        long long t = col / OW;
        int oh = (int)(t % OH);
        long long n = t / OH;
        int kw = (int)(row % KW);
        long long r = row / KW;
        int kh = (int)(r % KH);
        long long c = r / KH;
        int ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
        cols[i] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? x[((n * C + c) * H + ih) * W + iw] : (T)0;
    }
}

extern "C" __global__ void col2im(const T* cols, T* x, long long total, int N, int C, int H, int W,
                                  int KH, int KW, int OH, int OW, int sh, int sw, int ph, int pw,
                                  int dh, int dw) {
    long long np = (long long)N * OH * OW;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int iw = (int)(i % W);
        long long t = i / W;
        int ih = (int)(t % H);
        t /= H;
        long long c = t % C, n = t / C;
        T acc = 0;
        for (int kh = 0; kh < KH; ++kh) {
            int y = ih + ph - kh * dh;
            if (y < 0 || y % sh) continue;
            int oh = y / sh;
            if (oh >= OH) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int xw = iw + pw - kw * dw;
                if (xw < 0 || xw % sw) continue;
                int ow = xw / sw;
                if (ow >= OW) continue;
                acc += cols[((c * KH + kh) * KW + kw) * np + (n * OH + oh) * OW + ow];
            }
        }
        x[i] = acc;
    }
}
""")


def _launch(name: str, dtype, total: int, args: tuple) -> None:
    launch_over(_KERNELS.function(name, T=FLOAT_TYPES[str(dtype)]), total, args)


def im2col(x: cupy.ndarray, win: Window) -> cupy.ndarray:
    """The columns ``(C*KH*KW, N*OH*OW)`` of a contiguous 4-D ``x`` under ``win``."""
    n, c = x.shape[:2]
    rows, cols_n = c * math.prod(win.kernel), n * math.prod(win.out)
    cols = cupy.empty((rows, cols_n), dtype=x.dtype)
    if cols.size:
        _launch("im2col", x.dtype, cols.size, (x, cols, cupy.int64(cols.size)) + window_args(x.shape, win))
    return cols


def col2im(cols: cupy.ndarray, x_shape: tuple, win: Window) -> cupy.ndarray:
    """The input-shaped sum of ``cols`` ``(C*KH*KW, N*OH*OW)``: each element adds the taps that read it."""
    x = cupy.empty(x_shape, dtype=cols.dtype)
    if x.size:
        _launch("col2im", cols.dtype, x.size, (cupy.ascontiguousarray(cols), x, cupy.int64(x.size))
                + window_args(x_shape, win))
    return x


def _takes_fast_path(x, w, group: int, b=None) -> bool:
    return (group == 1 and x.ndim == 4 and x.dtype == w.dtype and str(x.dtype) in FLOAT_TYPES
            and all(isinstance(a, cupy.ndarray) for a in (x, w) + (() if b is None else (b,))))


def _window(x_shape, w, auto_pad, dilations, kernel_shape, pads, strides) -> Window:
    return resolve_window(x_shape[2:], tuple(kernel_shape or w.shape[2:]), strides, dilations, pads, auto_pad)


def _channels_first_rows(dy: cupy.ndarray) -> cupy.ndarray:
    """``dy`` ``(N, M, OH, OW)`` as ``(M, N*OH*OW)``: the layout the column products use."""
    n, m = dy.shape[:2]
    return cupy.ascontiguousarray(dy.reshape(n, m, -1).transpose(1, 0, 2)).reshape(m, -1)


def conv(x, w, b, *, xp, auto_pad, dilations, group, kernel_shape, pads, strides):
    """ONNX Conv."""
    if not _takes_fast_path(x, w, group, b):
        return get_kernel("Conv")(x, w, b, xp=xp, auto_pad=auto_pad, dilations=dilations, group=group,
                                  kernel_shape=kernel_shape, pads=pads, strides=strides)
    win = _window(x.shape, w, auto_pad, dilations, kernel_shape, pads, strides)
    n, m = x.shape[0], w.shape[0]
    y = w.reshape(m, -1) @ im2col(cupy.ascontiguousarray(x), win)  # (M, N*P)
    out = cupy.empty((n, m, math.prod(win.out)), dtype=x.dtype)
    rows = y.reshape(m, n, -1).transpose(1, 0, 2)
    if b is None:
        out[...] = rows
    else:
        cupy.add(rows, b.reshape(1, m, 1).astype(x.dtype, copy=False), out=out)
    return out.reshape((n, m) + win.out)


def conv_backprop_filter(dy, x, w, *, xp, auto_pad, dilations, group, kernel_shape, pads, strides):
    """dL/dW of Conv: ``dY (M, N*P) @ columns(x).T``."""
    if not _takes_fast_path(x, w, group) or dy.dtype != x.dtype:
        return portable.conv_backprop_filter(dy, x, w, xp=xp, auto_pad=auto_pad, dilations=dilations, group=group,
                                             kernel_shape=kernel_shape, pads=pads, strides=strides)
    win = _window(x.shape, w, auto_pad, dilations, kernel_shape, pads, strides)
    cols = im2col(cupy.ascontiguousarray(x), win)
    return (_channels_first_rows(dy) @ cols.T).reshape(w.shape)


def conv_backprop_input(dy, w, x, *, xp, auto_pad, dilations, group, kernel_shape, pads, strides):
    """dL/dX of Conv: ``col2im(W.T @ dY (M, N*P))``."""
    if not _takes_fast_path(x, w, group) or dy.dtype != x.dtype:
        return portable.conv_backprop_input(dy, w, x, xp=xp, auto_pad=auto_pad, dilations=dilations, group=group,
                                            kernel_shape=kernel_shape, pads=pads, strides=strides)
    win = _window(x.shape, w, auto_pad, dilations, kernel_shape, pads, strides)
    m = w.shape[0]
    dcols = w.reshape(m, -1).T @ _channels_first_rows(dy)  # (C*K, N*P)
    return col2im(dcols, x.shape, win)


OVERRIDES = {
    ("", "Conv"): conv,
    (D, "ConvBackpropFilter"): conv_backprop_filter,
    (D, "ConvBackpropInput"): conv_backprop_input,
}
