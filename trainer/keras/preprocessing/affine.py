"""Affine image transforms in NumPy, as Keras' ``ImageDataGenerator`` applies them (it calls SciPy's
``ndimage.affine_transform`` with spline order 1; this is the same bilinear sampling, so trainer needs
no SciPy): rotation, shifts, shear and zoom about the image centre, with Keras' fill modes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["FILL_MODES", "apply_affine_transform", "transform_matrix"]


def _reflect(index: np.ndarray, size: int) -> np.ndarray:
    """SciPy's "reflect" on pixel indices (half-sample symmetric: d c b a | a b c d | d c b a)."""
    period = 2 * size
    i = np.mod(index, period)
    return np.where(i >= size, period - 1 - i, i)


# How a pixel index outside the image is read, per fill mode ("constant" reads cval instead).
FILL_MODES = {
    "nearest": lambda index, size: np.clip(index, 0, size - 1),
    "reflect": _reflect,
    "wrap": lambda index, size: np.mod(index, size),
}


def transform_matrix(theta: float = 0.0, tx: float = 0.0, ty: float = 0.0, shear: float = 0.0, zx: float = 1.0,
                     zy: float = 1.0) -> np.ndarray:
    """The 3x3 matrix mapping output (row, col, 1) to input coordinates: rotation ``theta`` and ``shear``
    in degrees, shifts ``tx`` (rows) and ``ty`` (columns) in pixels, zooms ``zx`` (rows), ``zy`` (columns)."""
    matrix = np.eye(3)
    if theta:
        t = np.deg2rad(theta)
        matrix = matrix @ np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
    if tx or ty:
        matrix = matrix @ np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]])
    if shear:
        s = np.deg2rad(shear)
        matrix = matrix @ np.array([[1, -np.sin(s), 0], [0, np.cos(s), 0], [0, 0, 1]])
    if zx != 1 or zy != 1:
        matrix = matrix @ np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]])
    return matrix


def apply_affine_transform(x: np.ndarray, theta: float = 0.0, tx: float = 0.0, ty: float = 0.0, shear: float = 0.0,
                           zx: float = 1.0, zy: float = 1.0, row_axis: int = 0, col_axis: int = 1,
                           channel_axis: int = 2, fill_mode: str = "nearest", cval: float = 0.0,
                           order: int = 1) -> np.ndarray:
    """``x`` (one image) transformed about its centre, sampled bilinearly (``order`` 1) or at the nearest
    pixel (0); points outside the image follow ``fill_mode`` ("constant" takes ``cval``)."""
    if fill_mode not in FILL_MODES and fill_mode != "constant":
        raise ValueError(f"fill_mode must be one of {sorted([*FILL_MODES, 'constant'])}, got {fill_mode!r}")
    if order not in (0, 1):
        raise ValueError(f"interpolation order {order} is not supported (0: nearest, 1: bilinear)")
    matrix = transform_matrix(theta, tx, ty, shear, zx, zy)
    if np.array_equal(matrix, np.eye(3)):
        return x
    image = np.moveaxis(np.asarray(x), [row_axis, col_axis, channel_axis], [0, 1, 2])
    rows, cols = image.shape[:2]
    # about (rows / 2 + 0.5, cols / 2 + 0.5), the centre Keras uses (transform_matrix_offset_center)
    centre = np.array([[1, 0, rows / 2 + 0.5], [0, 1, cols / 2 + 0.5], [0, 0, 1]])
    uncentre = np.array([[1, 0, -(rows / 2 + 0.5)], [0, 1, -(cols / 2 + 0.5)], [0, 0, 1]])
    matrix = centre @ matrix @ uncentre
    r, c = np.meshgrid(np.arange(rows, dtype=np.float64), np.arange(cols, dtype=np.float64), indexing="ij")
    source_r = matrix[0, 0] * r + matrix[0, 1] * c + matrix[0, 2]
    source_c = matrix[1, 0] * r + matrix[1, 1] * c + matrix[1, 2]
    outside = None
    if fill_mode == "constant":
        outside = (source_r < -0.5) | (source_r > rows - 0.5) | (source_c < -0.5) | (source_c > cols - 0.5)
    index = FILL_MODES["nearest" if fill_mode == "constant" else fill_mode]
    if order == 0:
        out = image[index(np.rint(source_r).astype(np.intp), rows),
                    index(np.rint(source_c).astype(np.intp), cols)].astype(np.float64)
    else:  # the two neighbours on each axis, each read through the fill mode, as SciPy's order-1 spline
        r0, c0 = np.floor(source_r).astype(np.intp), np.floor(source_c).astype(np.intp)
        fr, fc = (source_r - r0)[..., None], (source_c - c0)[..., None]
        ra, rb, ca, cb = index(r0, rows), index(r0 + 1, rows), index(c0, cols), index(c0 + 1, cols)
        out = (image[ra, ca] * (1 - fr) * (1 - fc) + image[ra, cb] * (1 - fr) * fc
               + image[rb, ca] * fr * (1 - fc) + image[rb, cb] * fr * fc)
    if outside is not None:
        out[outside] = cval
    out = out.astype(image.dtype if image.dtype.kind == "f" else np.float32)
    return np.moveaxis(out, [0, 1, 2], [row_axis, col_axis, channel_axis])
