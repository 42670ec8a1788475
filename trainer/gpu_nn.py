"""Loss, pooling-gradient, activation-gradient and reduction kernels on CuPy, one launch where the
portable kernels make many.

- ``SparseSoftmaxCrossEntropyWithLogits``: one block a row computes its maximum, its sum of
  exponentials, the loss and the gradient row (the portable kernel is a dozen launches with
  fancy indexing). A label outside ``[0, classes)`` gives that row a NaN loss and NaN gradient, as
  TensorFlow's GPU kernel does, where the CPU kernel raises.
- ``MaxPoolGrad`` (2-D, float): one thread per pooled output finds its window's first maximum and
  adds dY there (an atomic add: windows may overlap); a window holding a NaN routes nothing, as the
  portable kernel's equality test does. The portable kernel is ~20 launches for a 2x2 pool.
- ``ReluGrad``: one elementwise launch instead of a comparison and a product.
- ``ReduceSum``: a bias gradient sums ``(N, C, H, W)`` over ``(0, 2, 3)``; CuPy gives such a
  reduction one block per output (64 blocks for 64 channels), so the contiguous trailing axes are
  summed first, then the rest.

Imports CuPy: imported only when a GPU device is opened (through ``trainer.gpu_kernels``).
"""

from __future__ import annotations

import cupy

from edge_runtime.kernels import get_kernel
from edge_runtime.kernels.nn import pool_window
from edge_runtime.kernels.reduce import reduction_axes
from trainer.gpu_launch import FLOAT_TYPES, THREADS, RawSource, launch_over, window_args
from trainer.kernels import math as portable_math
from trainer.kernels import nn as portable_nn

__all__ = ["OVERRIDES", "max_pool_grad", "reduce_sum", "relu_grad", "sparse_softmax_xent"]

D = "flowstack"
_LABEL_TYPES = {"int64": "long long", "int32": "int"}

_SPARSE_XENT = RawSource(r"""
#define BLOCK 256
extern "C" __global__ void sparse_xent(const T* logits, const L* labels, T* loss, T* grad, int classes) {
    __shared__ T red[BLOCK];
    long long row = blockIdx.x;
    const T* x = logits + row * classes;
    T* g = grad + row * classes;
    int tid = threadIdx.x;
    T m = x[0];
    for (int j = tid; j < classes; j += blockDim.x) m = x[j] > m ? x[j] : m;
    red[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s && red[tid + s] > red[tid]) red[tid] = red[tid + s];
        __syncthreads();
    }
    m = red[0];
    __syncthreads();
    T sum = 0;
    for (int j = tid; j < classes; j += blockDim.x) sum += exp(x[j] - m);
    red[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    T total = red[0];
    long long label = (long long)labels[row];
    bool valid = label >= 0 && label < classes;
    for (int j = tid; j < classes; j += blockDim.x)
        g[j] = valid ? exp(x[j] - m) / total - (j == label ? (T)1 : (T)0) : (T)nan("");
    if (tid == 0) loss[row] = valid ? log(total) + m - x[label] : (T)nan("");
}
""")

_MAX_POOL_GRAD = RawSource(r"""
extern "C" __global__ void max_pool_grad(const T* x, const T* dy, T* dx, long long total, int H, int W,
                                         int KH, int KW, int OH, int OW, int sh, int sw, int ph, int pw,
                                         int dh, int dw) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int ow = (int)(i % OW);
        long long t = i / OW;
        int oh = (int)(t % OH);
        long long plane = (t / OH) * H * W;
        int at = -1;
        bool has_nan = false;
        T best = 0;
        for (int kh = 0; kh < KH; ++kh) {
            int ih = oh * sh - ph + kh * dh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int iw = ow * sw - pw + kw * dw;
                if (iw < 0 || iw >= W) continue;
                T v = x[plane + ih * W + iw];
                if (v != v) has_nan = true;
                else if (at < 0 || v > best) { best = v; at = ih * W + iw; }
            }
        }
        if (at >= 0 && !has_nan) atomicAdd(dx + plane + at, dy[i]);
    }
}
""")


def _device_floats(*arrays) -> bool:
    return all(isinstance(a, cupy.ndarray) for a in arrays) and str(arrays[0].dtype) in FLOAT_TYPES and \
        all(a.dtype == arrays[0].dtype for a in arrays)


def sparse_softmax_xent(logits, labels, *, xp):
    """SparseSoftmaxCrossEntropyWithLogits: (loss per row, d loss / d logits)."""
    if not (_device_floats(logits) and isinstance(labels, cupy.ndarray) and str(labels.dtype) in _LABEL_TYPES
            and logits.ndim >= 1 and logits.shape[-1] > 0 and labels.size * logits.shape[-1] == logits.size):
        return portable_math.sparse_softmax_xent(logits, labels, xp=xp)
    logits = cupy.ascontiguousarray(logits)
    classes = logits.shape[-1]
    rows = logits.size // classes
    loss = cupy.empty(labels.shape, dtype=logits.dtype)
    grad = cupy.empty(logits.shape, dtype=logits.dtype)
    if rows:
        threads = min(THREADS, max(32, 1 << (classes - 1).bit_length()))
        _SPARSE_XENT.function("sparse_xent", T=FLOAT_TYPES[str(logits.dtype)], L=_LABEL_TYPES[str(labels.dtype)])(
            (rows,), (threads,), (logits, cupy.ascontiguousarray(labels), loss, grad, cupy.int32(classes)))
    return loss, grad


def max_pool_grad(dy, x, *, xp, auto_pad, ceil_mode, dilations, kernel_shape, pads, storage_order, strides,
                  count_include_pad):
    """MaxPoolGrad: dY routed to each window's first maximum."""
    if not (_device_floats(dy, x) and x.ndim == 4):
        return portable_nn.max_pool_grad(dy, x, xp=xp, auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations,
                                         kernel_shape=kernel_shape, pads=pads, storage_order=storage_order,
                                         strides=strides, count_include_pad=count_include_pad)
    win = pool_window(x, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    dx = cupy.zeros(x.shape, dtype=x.dtype)
    dy = cupy.ascontiguousarray(dy)
    if dy.size:
        launch_over(_MAX_POOL_GRAD.function("max_pool_grad", T=FLOAT_TYPES[str(x.dtype)]), dy.size,
                    (cupy.ascontiguousarray(x), dy, dx, cupy.int64(dy.size)) + window_args(x.shape, win)[2:])
    return dx


_RELU_GRAD = cupy.ElementwiseKernel("T dy, T y", "T dx", "dx = dy * (y > T(0) ? T(1) : T(0))",
                                    "flowstack_relu_grad")


def relu_grad(dy, y, *, xp):
    """ReluGrad: dY where the ReLU's output is positive (dY * 0 elsewhere, so a NaN stays NaN)."""
    if not (_device_floats(dy, y) and dy.shape == y.shape):
        return portable_math.relu_grad(dy, y, xp=xp)
    return _RELU_GRAD(dy, y)


def reduce_sum(data, axes, *, xp, keepdims, noop_with_empty_axes):
    """ReduceSum, summing a contiguous array's trailing reduced axes first when others are reduced too."""
    portable = get_kernel("ReduceSum")
    if not (isinstance(data, cupy.ndarray) and data.size and data.dtype.kind == "f"):
        return portable(data, axes, xp=xp, keepdims=keepdims, noop_with_empty_axes=noop_with_empty_axes)
    reduced = reduction_axes(data, axes, noop_with_empty_axes)
    tail = 0
    while tail < len(reduced) and reduced[len(reduced) - 1 - tail] == data.ndim - 1 - tail:
        tail += 1
    if tail == 0 or tail == len(reduced) or not data.flags.c_contiguous:
        return portable(data, axes, xp=xp, keepdims=keepdims, noop_with_empty_axes=noop_with_empty_axes)
    kept_shape = data.shape[:data.ndim - tail]
    partial = data.reshape(kept_shape + (-1,)).sum(axis=-1, dtype=data.dtype)
    out = partial.sum(axis=reduced[:len(reduced) - tail], keepdims=bool(keepdims), dtype=data.dtype)
    if keepdims:
        out = out.reshape(out.shape + (1,) * tail)
    return out


OVERRIDES = {
    (D, "SparseSoftmaxCrossEntropyWithLogits"): sparse_softmax_xent,
    (D, "MaxPoolGrad"): max_pool_grad,
    (D, "ReluGrad"): relu_grad,
    ("", "ReduceSum"): reduce_sum,
}
