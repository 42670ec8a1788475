"""Kernels of TensorFlow's FFT ops (schemas/ops/signal.py, domain flowstack) and of their gradients,
on ``numpy.fft``; results keep the input's precision (complex64 in, complex64 out)."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel

D = "flowstack"
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}
_REAL = {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}


def _axes(k: int) -> tuple[int, ...]:
    return tuple(range(-k, 0))


def _sizes(shape: tuple, k: int, fft_length, inverse_real: bool = False) -> list[int]:
    """The transform sizes over the inner ``k`` dims (-1 in ``fft_length``: from ``shape``)."""
    sizes = [n if n >= 0 else d for d, n in zip(shape[-k:], fft_length)]
    if inverse_real and fft_length[-1] < 0:
        sizes[-1] = 2 * (shape[-1] - 1)
    return sizes


def _fit(a: np.ndarray, shape: tuple) -> np.ndarray:
    """``a`` cropped or zero-padded at the end of each dim to ``shape``."""
    out = np.zeros(shape, a.dtype)
    common = tuple(slice(0, min(p, q)) for p, q in zip(a.shape, shape))
    out[common] = a[common]
    return out


@kernel("ComplexFFT", domain=D)
def complex_fft(x, *, xp, fft_rank, inverse, adjoint):
    axes = _axes(fft_rank)
    size = int(np.prod(x.shape[-fft_rank:])) if fft_rank else 1
    if inverse:
        y = np.fft.ifftn(x, axes=axes) * (size if adjoint else 1)
    else:
        y = np.fft.fftn(x, axes=axes) / (size if adjoint else 1)
    return y.astype(x.dtype, copy=False)


@kernel("RealFFT", domain=D)
def real_fft(x, *, xp, fft_rank, fft_length):
    sizes = _sizes(x.shape, fft_rank, fft_length)
    return np.fft.rfftn(x, s=sizes, axes=_axes(fft_rank)).astype(_COMPLEX[x.dtype], copy=False)


@kernel("InverseRealFFT", domain=D)
def inverse_real_fft(x, *, xp, fft_rank, fft_length):
    sizes = _sizes(x.shape, fft_rank, fft_length, inverse_real=True)
    return np.fft.irfftn(x, s=sizes, axes=_axes(fft_rank)).astype(_REAL[x.dtype], copy=False)


@kernel("RealFFTGrad", domain=D)
def real_fft_grad(g, x, *, xp, fft_rank, fft_length):
    # y = rfftn(fit(x)): the adjoint puts g on the full spectrum (zeros above the innermost half),
    # runs the unnormalized inverse transform and keeps the real part, fitted back to x's shape.
    sizes = _sizes(x.shape, fft_rank, fft_length)
    full = _fit(g, g.shape[:-1] + (sizes[-1],))
    back = np.fft.ifftn(full, axes=_axes(fft_rank)).real * int(np.prod(sizes))
    return _fit(back, x.shape).astype(x.dtype, copy=False)


@kernel("InverseRealFFTGrad", domain=D)
def inverse_real_fft_grad(g, x, *, xp, fft_rank, fft_length):
    # y = irfftn(fit(x), sizes): each innermost frequency but 0 (and n/2 for even n) also stands for
    # its mirror image, so it counts twice; the inverse's 1/N scaling carries over.
    sizes = _sizes(x.shape, fft_rank, fft_length, inverse_real=True)
    spectrum = np.fft.rfftn(g, axes=_axes(fft_rank))
    n = sizes[-1]
    weight = np.full(n // 2 + 1, 2.0)
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    grad = spectrum * weight / int(np.prod(sizes))
    return _fit(grad, x.shape).astype(x.dtype, copy=False)
