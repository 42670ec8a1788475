"""Signal ops: discrete Fourier transforms, short-time Fourier transforms and mel filter banks.

A signal tensor carries its complex structure in a trailing dim: 1 for real values, 2 for
(real, imaginary) pairs. Transforms always produce the trailing 2, except an inverse one-sided
transform, which produces a real signal.
"""

from __future__ import annotations

import numpy as np

from schemas import dtypes
from schemas.ops.rules import const_ints, normalize_axis, same_as_input
from schemas.ops.shape import dtype_from_code
from schemas.registry import REQUIRED, Attr, TensorType, op


def _scalar(ctx, index: int) -> int | None:
    values = const_ints(ctx, index) if ctx.has_input(index) else None
    return values[0] if values else None


@op(
    "DFT",
    inputs=["input", "dft_length?", "axis?"],
    outputs=["output"],
    attrs={"inverse": Attr("int", 0), "onesided": Attr("int", 0)},
    differentiable=False,
)
def _dft(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    rank = len(x.shape)
    if rank < 2 or x.shape[-1] not in (1, 2, None):
        raise ctx.fail(f"input must end in a complex dim of 1 or 2, got shape {x.shape}")
    inverse, onesided = ctx.attrs["inverse"], ctx.attrs["onesided"]
    last = 1 if inverse and onesided else 2
    axis = _scalar(ctx, 2) if ctx.has_input(2) else -2
    if axis is None:
        return [TensorType(x.dtype, (None,) * (rank - 1) + (last,))]
    axis = normalize_axis(ctx, axis, rank)
    if axis == rank - 1:
        raise ctx.fail("axis may not be the trailing complex dim")
    size = x.shape[axis]
    if ctx.has_input(1):
        n = _scalar(ctx, 1)
    elif size is None:
        n = None
    else:
        n = 2 * (size - 1) if inverse and onesided else size  # an inverse one-sided input holds n // 2 + 1
    if n is not None and onesided and not inverse:
        n = n // 2 + 1
    return [TensorType(x.dtype, (*x.shape[:axis], n, *x.shape[axis + 1 : -1], last))]


@op(
    "STFT",
    inputs=["signal", "frame_step", "window?", "frame_length?"],
    outputs=["output"],
    attrs={"onesided": Attr("int", 1)},
    differentiable=False,
)
def _stft(ctx):
    x = ctx.input(0)
    if x.shape is not None and (len(x.shape) != 3 or x.shape[-1] not in (1, 2, None)):
        raise ctx.fail(f"signal must be [batch, length, 1 or 2], got shape {x.shape}")
    batch, length = (None, None) if x.shape is None else x.shape[:2]
    step = _scalar(ctx, 1)
    frame = _scalar(ctx, 3)
    if frame is None and ctx.has_input(2) and ctx.input(2).shape is not None:
        frame = ctx.input(2).shape[0]
    frames = None if None in (length, step, frame) else (length - frame) // step + 1
    bins = None if frame is None else frame // 2 + 1 if ctx.attrs["onesided"] else frame
    return [TensorType(x.dtype, (batch, frames, bins, 2))]


@op(
    "MelWeightMatrix",
    inputs=["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"],
    outputs=["output"],
    attrs={"output_datatype": Attr("int", dtypes.FLOAT)},
)
def _mel_weight_matrix(ctx):
    dtype = dtype_from_code(ctx.attrs["output_datatype"], "MelWeightMatrix: attribute output_datatype")
    mels, length = _scalar(ctx, 0), _scalar(ctx, 1)
    return [TensorType(dtype, (None if length is None else length // 2 + 1, mels))]


# SwiGLU is an activation, not a signal op: it arrived late (opset 28) and lives here, beside no
# relatives, rather than reopen the math family for one line of math.
op("SwiGLU", inputs=["A", "B"], outputs=["Y"], attrs={"alpha": Attr("float", 1.0)}, differentiable=False)(
    same_as_input(0)
)


# -- TensorFlow's FFTs on complex tensors (domain flowstack) ---------------------------------------
# Unlike DFT above, these take TensorFlow's layout: complex64/complex128 tensors (float32/float64
# for a real transform's signal), transformed over the innermost ``fft_rank`` dims. ``fft_length``
# (-1: the input's own size) crops or zero-pads a real transform's inner dims first.
_TF_COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}
_TF_REAL = {c: f for f, c in _TF_COMPLEX.items()}


def _inner(ctx, x: TensorType, what: str) -> int:
    k = ctx.attrs["fft_rank"]
    if k not in (1, 2, 3):
        raise ctx.fail(f"fft_rank must be 1, 2 or 3, got {k}")
    if x.shape is not None and len(x.shape) < k:
        raise ctx.fail(f"{what} must have rank >= {k}, got shape {x.shape}")
    return k


def _lengths(ctx, k: int) -> list[int]:
    lengths = list(ctx.attrs["fft_length"])
    if len(lengths) != k:
        raise ctx.fail(f"fft_length must have {k} entries, got {lengths}")
    return lengths


@op("ComplexFFT", domain="flowstack", inputs=["input"], outputs=["output"],
    attrs={"fft_rank": Attr("int", 1), "inverse": Attr("int", 0), "adjoint": Attr("int", 0)},
    doc="TensorFlow's FFT/IFFT (2D, 3D): the discrete Fourier transform of a complex tensor over its inner "
        "``fft_rank`` dims, the inverse one dividing by their size. ``adjoint`` swaps the scaling (the "
        "transform's adjoint, which its gradient uses).")
def _complex_fft(ctx):
    x = ctx.input(0)
    _inner(ctx, x, "input")
    if x.dtype is not None and x.dtype not in _TF_REAL:
        raise ctx.fail(f"input must be complex64 or complex128, got {x.dtype}")
    return [x]


@op("RealFFT", domain="flowstack", inputs=["input"], outputs=["output"],
    attrs={"fft_rank": Attr("int", 1), "fft_length": Attr("ints", REQUIRED)},
    doc="TensorFlow's RFFT (2D, 3D): the transform of a real tensor over its inner dims (cropped or "
        "zero-padded to ``fft_length``), keeping the innermost dim's ``fft_length // 2 + 1`` non-negative "
        "frequencies.")
def _real_fft(ctx):
    x = ctx.input(0)
    k = _inner(ctx, x, "input")
    if x.dtype is not None and x.dtype not in _TF_COMPLEX:
        raise ctx.fail(f"input must be float32 or float64, got {x.dtype}")
    lengths = _lengths(ctx, k)
    out = None if x.dtype is None else _TF_COMPLEX[x.dtype]
    if x.shape is None:
        return [TensorType(out, None)]
    dims = [d if n < 0 else n for d, n in zip(x.shape[-k:], lengths)]
    dims[-1] = None if dims[-1] is None else dims[-1] // 2 + 1
    return [TensorType(out, tuple(x.shape[:-k]) + tuple(dims))]


@op("InverseRealFFT", domain="flowstack", inputs=["input"], outputs=["output"],
    attrs={"fft_rank": Attr("int", 1), "fft_length": Attr("ints", REQUIRED)},
    doc="TensorFlow's IRFFT (2D, 3D): the real signal of ``fft_length`` samples per inner dim whose "
        "non-negative frequencies ``input`` holds (-1 in fft_length: 2 * (size - 1) innermost, the size "
        "elsewhere); the imaginary parts the signal cannot carry are ignored.")
def _inverse_real_fft(ctx):
    x = ctx.input(0)
    k = _inner(ctx, x, "input")
    if x.dtype is not None and x.dtype not in _TF_REAL:
        raise ctx.fail(f"input must be complex64 or complex128, got {x.dtype}")
    lengths = _lengths(ctx, k)
    out = None if x.dtype is None else _TF_REAL[x.dtype]
    if x.shape is None:
        return [TensorType(out, None)]
    dims = [d if n < 0 else n for d, n in zip(x.shape[-k:], lengths)]
    if lengths[-1] < 0 and dims[-1] is not None:
        dims[-1] = 2 * (dims[-1] - 1)
    return [TensorType(out, tuple(x.shape[:-k]) + tuple(dims))]


op("RealFFTGrad", domain="flowstack", inputs=["grad", "input"], outputs=["output"],
   attrs={"fft_rank": Attr("int", 1), "fft_length": Attr("ints", REQUIRED)},
   doc="The gradient of RealFFT for its real ``input``: the real part of the transform's adjoint applied "
       "to ``grad``, cropped or zero-padded back to ``input``'s shape.")(same_as_input(1))
op("InverseRealFFTGrad", domain="flowstack", inputs=["grad", "input"], outputs=["output"],
   attrs={"fft_rank": Attr("int", 1), "fft_length": Attr("ints", REQUIRED)},
   doc="The gradient of InverseRealFFT for its one-sided complex ``input``: the real transform of ``grad`` "
       "over the signal size, doubled where a frequency stands for its mirror image too.")(same_as_input(1))
