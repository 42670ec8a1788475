"""Row statistics and row-and-column affine maps for the normalization kernels (NumPy, 2-D rows).

LayerNormalization, RMSNormalization, InstanceNormalization and GroupNormalization all normalize
the rows of a 2-D view of their input and then scale and shift them. Written the direct way,
``(x - mean) * inv_std * scale + bias`` is seven passes over the data, each a NumPy call whose
row or column broadcast costs a trip through NumPy's iterator per row (about 40 ns a row here, as
much as the arithmetic on a 384-wide row). This module takes each row's moments in two reads
(``row_means`` and each row's dot product with itself) and applies ``(x * a_i + c_i) * g_j + b_j``
as one product and one sum of same-shape arrays, the per-element factors ``a_i g_j`` and addends
``c_i g_j + b_j`` each made by a small matrix product (BLAS writes them faster than NumPy
broadcasts).

The one-pass variance ``E[x^2] - E[x]^2`` loses float32 precision as a row's mean outgrows its
spread (its float32 sum of squares is off by about 1e-7 of itself over 768 values), and so does
``x * a_i g_j + c_i g_j``, whose two terms then nearly cancel. Rows whose squared mean exceeds
their one-pass variance (whose mean exceeds their standard deviation) are therefore centred first
(one more pass, only when there are such rows) and their moments taken again: over 256x768 rows of
spread 1, the largest difference from float64 is 1.4e-6 at any mean up to 1e5 (the former two-pass
form 1e-6 for means up to 2.5, then 2.9e-4 at 1e3, its float32 mean off by more than a rounding;
onnxruntime 1e-6, 4.7e-5 at 1e3, 5.9e-3 at 1e5).
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np


class RowMoments(NamedTuple):
    """A 2-D array's rows ready to normalize, and their statistics."""

    rows: np.ndarray  # the given rows, or a copy with the rows whose mean dwarfs their spread centred
    mean: np.ndarray  # the mean of each row of ``rows``
    var: np.ndarray  # the variance of each row
    offset: np.ndarray | None  # what was subtracted from each given row (None: nothing)

    def input_mean(self) -> np.ndarray:
        """The mean of each given row."""
        return self.mean if self.offset is None else self.mean + self.offset


@lru_cache(maxsize=64)
def _mean_weights(n: int, dtype: str) -> np.ndarray:
    weights = np.full(n, 1.0 / n, dtype=dtype)
    weights.flags.writeable = False
    return weights


def row_means(rows: np.ndarray, xp) -> np.ndarray:
    """The means of a 2-D NumPy array's rows, as one matrix-vector product with a (cached) vector of
    1/n: BLAS sums rows of a few dozen to a few hundred values several times faster than NumPy's
    reduction along an axis. ``xp`` is NumPy; callers check."""
    del xp
    return rows @ _mean_weights(rows.shape[1], rows.dtype.str)


def _row_sums_of_squares(rows: np.ndarray, xp) -> np.ndarray:
    """Each row's dot product with itself: NumPy 2's ``vecdot`` takes a BLAS dot a row (197x192
    2.2 us, 512x768 21 us, with float32 sums a third as far off), ``einsum`` its own loop (4.8, 38)."""
    if hasattr(xp, "vecdot"):
        return xp.vecdot(rows, rows)
    return xp.einsum("ij,ij->i", rows, rows)


def row_mean_square(rows: np.ndarray, xp) -> np.ndarray:
    """Each row's mean of squares (no squared copy)."""
    ms = _row_sums_of_squares(rows, xp)
    ms *= rows.dtype.type(1 / rows.shape[1])
    return ms


def _one_pass_moments(rows: np.ndarray, xp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, variance, whether the row's squared mean exceeds its variance) of each row."""
    mean = row_means(rows, xp)
    var = row_mean_square(rows, xp)
    squared_mean = mean * mean
    var -= squared_mean
    # negative one-pass variances are risky too: their squared mean exceeds them
    return mean, var, squared_mean > var


def row_moments(rows: np.ndarray, xp) -> RowMoments:
    """The moments of each row of a non-empty 2-D float32/float64 array, in two reads of it (and,
    when some rows' mean dwarfs their spread, one more pass centring them and two more reads)."""
    mean, var, risky = _one_pass_moments(rows, xp)
    if not risky.any():
        return RowMoments(rows, mean, var, None)
    offset = xp.where(risky, mean, mean.dtype.type(0))
    rows = rows - offset[:, None]
    mean, var, _ = _one_pass_moments(rows, xp)
    return RowMoments(rows, mean, var, offset)


def inverse_std(var: np.ndarray, eps: float, xp, out: np.ndarray | None = None) -> np.ndarray:
    """1 / sqrt(var + eps), into ``out`` (default: ``var``'s own memory); ``var`` is overwritten."""
    var += var.dtype.type(eps)
    xp.sqrt(var, out=var)
    return xp.divide(var.dtype.type(1), var, out=var if out is None else out)


def standardize_rows(rows: np.ndarray, mean: np.ndarray | None, var: np.ndarray, eps: float,
                     col_scale: np.ndarray, col_shift: np.ndarray | None, row_shape: tuple[int, ...],
                     xp) -> tuple[np.ndarray, np.ndarray]:
    """``(rows - mean[:, None]) / sqrt(var[:, None] + eps) * col_scale + col_shift`` as a fresh array,
    and each row's 1 / sqrt(var + eps); a None mean or shift meaning zero (``var`` then a mean square
    for RMSNormalization), the column terms broadcastable to ``row_shape`` (a row's shape before it
    was flattened), ``var`` overwritten.

    ``y = rows * F + A``: the factor matrix ``F = inv_std[:, None] * col_scale`` and the addend
    matrix ``A = -(mean * inv_std)[:, None] * col_scale + col_shift`` each come from an (r x 2) @
    (2 x n) product, then one in-place multiply and one in-place add of same-shape arrays, with no
    per-row trip through NumPy's broadcasting iterator."""
    r, n = rows.shape
    dtype = rows.dtype
    has_addend = mean is not None or col_shift is not None
    # row i of left[0] is (inv_std_i, 0), of left[1] (-mean_i * inv_std_i, 1); right is (scale; shift)
    left = xp.zeros((2 if has_addend else 1, r, 2), dtype=dtype)
    inv_std = inverse_std(var, eps, xp, out=left[0, :, 0])
    right = xp.zeros((2, n), dtype=dtype)
    right.reshape((2,) + row_shape)[0] = col_scale
    if has_addend:
        if mean is not None:
            xp.multiply(mean, inv_std, out=left[1, :, 0])
            xp.negative(left[1, :, 0], out=left[1, :, 0])
        left[1, :, 1] = 1
        if col_shift is not None:
            right.reshape((2,) + row_shape)[1] = col_shift
    # Two columns even without an addend: NumPy's matmul takes a slow non-BLAS loop for an inner
    # dimension of one (a 256x384 outer product 101 us, 5 us with a zero second column). Two
    # products rather than one of 2r rows: the addend matrix is made only once the factors are used
    # (4x128x768: 119 us against 128-316 us for one product, its 3 MB result out of the L2 cache).
    y = left[0] @ right
    y *= rows
    if has_addend:
        y += left[1] @ right
    return y, inv_std


def affine_rows(rows: np.ndarray, row_scale: np.ndarray, row_shift: np.ndarray, xp) -> np.ndarray:
    """``rows * row_scale[:, None] + row_shift[:, None]`` as a fresh array (rows long enough that a
    per-row broadcast costs little next to the arithmetic)."""
    y = xp.multiply(rows, row_scale[:, None])
    y += row_shift[:, None]
    return y
