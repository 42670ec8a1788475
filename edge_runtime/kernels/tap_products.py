"""Stride-1 convolutions (group 1) as one matmul per kernel tap, with no im2col columns.

With the padded input flattened (planar: each channel's plane; channels-last: the pixels, C values
each), kernel tap ``t`` of every output, computed over whole padded rows as the flat im2col does,
reads one contiguous run of the input at a fixed offset: a strided 2-D view BLAS takes as it is.
The convolution is then the sum over taps of weights(t) @ view(t), accumulated into the output:
no (taps x C) x pixels column matrix is written and read back. On large planes that matrix is
many MiB a convolution (a U-Net decoder's 32 channels at 128x128 under 3x3: 19 MiB) and goes
through memory twice, where the taps' views stay in cache; below that, one product over all
taps beats one a tap.
"""

from __future__ import annotations

from itertools import product
from typing import Sequence

# Convolutions whose im2col columns would take at least this many bytes an image run as tap
# products. Inside whole-model runs (us, im2col -> taps): a U-Net decoder's 32->16 3x3 at 128x128
# (19 MiB of columns) 1496-1554 -> 1033-1075, 64->32 at 64x64 (9.6 MiB) 1045-1056 -> 767-796,
# 16->16 at 128x128 (9.6 MiB, channels-last) 1037-1078 -> 852-906; but ResNet-18's 64->64 at 56x56
# (7.2 MiB) 776-835 -> 865-921 and 128->128 at 28x28 677-698 -> 766-810, where the columns stay in
# cache and one product of nine times the depth beats nine.
MIN_COLUMN_BYTES = 8 << 20


def fits(channels: int, group: int, strides: Sequence[int], taps: int, length: int, itemsize: int) -> bool:
    """Whether a convolution takes tap products: group 1, stride 1, more than one tap, and im2col
    columns of ``length`` outputs an image (whole padded rows) of at least MIN_COLUMN_BYTES."""
    return (group == 1 and all(s == 1 for s in strides) and taps > 1
            and channels * taps * length * itemsize >= MIN_COLUMN_BYTES)


def offsets(kernel: Sequence[int], tap_steps: Sequence[int]) -> list[int]:
    """Each tap's offset into the flattened padded input, taps in the weights' (row-major) order."""
    return [sum(i * step for i, step in zip(index, tap_steps)) for index in product(*(range(k) for k in kernel))]


def planar(flat, w, xp, starts: Sequence[int], length: int):
    """(N, M, length) = sum over taps t of w[:, :, t] @ flat[:, :, starts[t]:starts[t] + length],
    ``flat`` (N, C, padded plane) and ``w`` (M, C, kernel...)."""
    n, c = flat.shape[:2]
    m = w.shape[0]
    taps = xp.ascontiguousarray(w.reshape(m, c, len(starts)).transpose(2, 0, 1))  # (taps, M, C)
    y = xp.empty((n, m, length), dtype=xp.result_type(flat, w))
    partial = xp.empty((m, length), dtype=y.dtype)
    for i in range(n):
        _accumulate(xp, y[i], partial, [(taps[t], flat[i, :, s:s + length]) for t, s in enumerate(starts)])
    return y


def channels_last(flat, w, xp, starts: Sequence[int], length: int):
    """(N, length, M) = sum over taps t of flat[:, starts[t]:starts[t] + length] @ w[:, t, :]^T,
    ``flat`` (N, padded pixels, C) and ``w`` (M, kernel..., C)."""
    n, c = flat.shape[0], flat.shape[-1]
    m = w.shape[0]
    taps = w.reshape(m, len(starts), c)
    y = xp.empty((n, length, m), dtype=xp.result_type(flat, w))
    partial = xp.empty((length, m), dtype=y.dtype)
    for i in range(n):
        _accumulate(xp, y[i], partial, [(flat[i, s:s + length], taps[:, t].T) for t, s in enumerate(starts)])
    return y


def _accumulate(xp, out, partial, pairs) -> None:
    """``out`` = the sum of the products of ``pairs``, the first written in place, the others
    through ``partial``."""
    (a, b), rest = pairs[0], pairs[1:]
    xp.matmul(a, b, out=out)
    for a, b in rest:
        xp.matmul(a, b, out=partial)
        out += partial
