"""Signal ops: discrete Fourier transforms, short-time Fourier transforms and mel filter banks.

A signal tensor carries its complex structure in a trailing dim: 1 for real values, 2 for
(real, imaginary) pairs. Transforms always produce the trailing 2, except an inverse one-sided
transform, which produces a real signal.
"""

from __future__ import annotations

from schemas import dtypes
from schemas.ops.rules import const_ints, normalize_axis, same_as_input
from schemas.ops.shape import dtype_from_code
from schemas.registry import Attr, TensorType, op


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
