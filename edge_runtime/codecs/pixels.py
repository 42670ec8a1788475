"""Decoded pixels to the layouts image ops return."""

from __future__ import annotations

import numpy as np

# ITU-R 601-2 luma in Pillow's fixed point: what its RGB to L conversion gives, bit for bit.
_LUMA_WEIGHTS = np.array([19595, 38470, 7471], np.uint64)


def luma(rgb: np.ndarray) -> np.ndarray:
    """(..., 3) RGB to (..., 1) gray, in the input's type."""
    return ((rgb.astype(np.uint64) @ _LUMA_WEIGHTS + 0x8000) >> 16).astype(rgb.dtype)[..., None]


def to_rgb8(pixels: np.ndarray) -> np.ndarray:
    """(height, width, 1 to 4 channels) as a decoder returns them, to uint8 RGB: 16-bit samples
    keep their high byte, gray is repeated, alpha dropped."""
    if pixels.dtype == np.uint16:
        pixels = (pixels >> 8).astype(np.uint8)
    color = pixels[..., :3] if pixels.shape[-1] >= 3 else pixels[..., :1]
    return color if color.shape[-1] == 3 else np.repeat(color, 3, axis=-1)
