"""16-bit PNGs, read and written exactly: Pillow keeps 16 bits for gray images only (it reads a
16-bit RGB PNG as 8-bit RGB), and TensorFlow's ``decode_png(dtype=uint16)`` keeps them for every
color type. Non-interlaced images of color types gray, gray+alpha, RGB and RGBA."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from edge_runtime.codecs import ImageDataError, png
from trainer.kernels.debugging import InvalidArgumentError

__all__ = ["SIGNATURE", "bit_depth", "read_png16", "write_png16"]

SIGNATURE = png.SIGNATURE
# channels -> the PNG color type written
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}


def bit_depth(data: bytes) -> int | None:
    """The bit depth in a PNG's IHDR (the first chunk, at a fixed offset); None if there is none."""
    return data[24] if len(data) > 24 and data.startswith(SIGNATURE) and data[12:16] == b"IHDR" else None


def read_png16(op: str, data: bytes) -> np.ndarray:
    """A 16-bit PNG's pixels as uint16 [height, width, channels] (the edge runtime's PNG decoder)."""
    try:
        return png.decode(data)
    except ImageDataError as e:
        raise InvalidArgumentError(f"{op}: {e}") from None


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def write_png16(pixels: np.ndarray, level: int) -> bytes:
    """uint16 [height, width, 1 to 4] as a PNG (rows unfiltered, deflated at ``level``, -1 the default)."""
    height, width, channels = pixels.shape
    rows = pixels.astype(">u2").reshape(height, width * channels).view(np.uint8)
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 16, _COLOR_TYPES[channels], 0, 0, 0)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, level)) + _chunk(b"IEND", b"")
