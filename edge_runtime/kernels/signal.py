"""Signal kernels: DFT, STFT and MelWeightMatrix, on the array namespace's FFT (numpy.fft / cupy.fft).

Signals carry a trailing complex dim (1: real, 2: real and imaginary); the kernels turn that into a
complex array, transform it, and split the result back into (real, imaginary) pairs in the input's
dtype.
"""

from __future__ import annotations

import math

from edge_runtime.kernels.math import swish
from edge_runtime.kernels.registry import kernel
from schemas.ops.shape import dtype_from_code
from schemas.registry import UnsupportedOpError


def _complex(x, xp):
    if x.shape[-1] == 1:
        return x[..., 0]
    if x.shape[-1] == 2:
        return x[..., 0] + 1j * x[..., 1]
    raise UnsupportedOpError(f"signal must end in a complex dim of 1 or 2, got shape {x.shape}")


def _pairs(z, xp, dtype):
    return xp.stack([z.real, z.imag], axis=-1).astype(dtype)


@kernel("DFT")
def dft(x, dft_length, axis, *, xp, inverse, onesided):
    axis = -2 if axis is None else int(axis)
    if not -x.ndim <= axis < x.ndim - 1 or axis % x.ndim == x.ndim - 1:
        raise UnsupportedOpError(f"DFT: axis {axis} must name a signal dim of input shape {x.shape}")
    axis %= x.ndim
    signal = _complex(x, xp)
    if inverse and onesided:
        # the input is the non-negative half of a Hermitian spectrum; the output is real
        n = 2 * (x.shape[axis] - 1) if dft_length is None else int(dft_length)
        return xp.fft.irfft(signal, n=n, axis=axis)[..., None].astype(x.dtype)
    n = x.shape[axis] if dft_length is None else int(dft_length)
    if inverse:
        return _pairs(xp.fft.ifft(signal, n=n, axis=axis), xp, x.dtype)
    spectrum = xp.fft.fft(signal, n=n, axis=axis)
    if onesided:
        spectrum = xp.take(spectrum, xp.arange(n // 2 + 1), axis=axis)
    return _pairs(spectrum, xp, x.dtype)


@kernel("STFT")
def stft(signal, frame_step, window, frame_length, *, xp, onesided):
    if signal.ndim != 3:
        raise UnsupportedOpError(f"STFT: signal must be [batch, length, 1 or 2], got shape {signal.shape}")
    step = int(frame_step)
    if frame_length is not None:
        length = int(frame_length)
    elif window is not None:
        length = window.shape[0]
    else:
        raise UnsupportedOpError("STFT: needs a window or a frame_length")
    if window is not None and window.shape[0] != length:
        raise UnsupportedOpError(f"STFT: window has {window.shape[0]} values but frame_length is {length}")
    if onesided and signal.shape[-1] == 2:
        raise UnsupportedOpError("STFT: onesided output needs a real signal (trailing dim 1)")
    frames = (signal.shape[1] - length) // step + 1
    if frames < 1 or step < 1:
        raise UnsupportedOpError(
            f"STFT: frame_length {length} and frame_step {step} do not fit a signal of length {signal.shape[1]}"
        )
    starts = xp.arange(frames) * step
    framed = _complex(signal, xp)[:, starts[:, None] + xp.arange(length)]  # (batch, frames, length)
    if window is not None:
        framed = framed * window
    spectrum = xp.fft.fft(framed, axis=-1)
    if onesided:
        spectrum = spectrum[..., : length // 2 + 1]
    return _pairs(spectrum, xp, signal.dtype)


@kernel("MelWeightMatrix")
def mel_weight_matrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, *, xp,
                      output_datatype):
    mels, n, rate = int(num_mel_bins), int(dft_length), int(sample_rate)
    dtype = dtype_from_code(output_datatype, "MelWeightMatrix: output_datatype")

    def to_mel(hertz):
        return 2595 * math.log1p(float(hertz) / 700) / math.log(10)

    low, high = to_mel(lower_edge_hertz), to_mel(upper_edge_hertz)
    # mels + 2 points evenly spaced on the mel scale (ONNX divides the range by mels + 2), as DFT bins
    points = xp.arange(mels + 2) * ((high - low) / (mels + 2)) + low
    hertz = 700 * xp.expm1(points / 2595 * math.log(10))
    edges = ((n + 1) * hertz // rate).astype(xp.int64)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    j = xp.arange(n // 2 + 1)[:, None]
    rising = (j - left) / xp.maximum(center - left, 1)
    falling = (right - j) / xp.maximum(right - center, 1)
    out = xp.where((left <= j) & (j <= center), rising, 0.0)
    out = xp.where((center <= j) & (j < right), falling, out)
    out = xp.where(j == center, 1.0, out)  # also the peak of a triangle whose left edge is its center
    return out.astype(dtype)


@kernel("SwiGLU")
def swiglu(a, b, *, xp, alpha):
    return swish(a, xp=xp, alpha=alpha) * b
