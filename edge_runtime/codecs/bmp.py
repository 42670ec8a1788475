"""BMP (Windows bitmap): 1, 4 and 8-bit palettes, 16 and 32-bit pixels with or without bit-field
masks, 24-bit BGR; bottom-up or top-down rows. Run-length encoded bitmaps are refused by name."""

from __future__ import annotations

import struct

import numpy as np

from edge_runtime.codecs.errors import ImageDataError

SIGNATURE = b"BM"
_RGB, _BITFIELDS, _ALPHA_BITFIELDS = 0, 3, 6
_COMPRESSION_NAMES = {1: "RLE8", 2: "RLE4", 4: "JPEG", 5: "PNG"}
# the default masks (red, green, blue, alpha) of an uncompressed 16 or 32-bit bitmap
_DEFAULT_MASKS = {16: (0x7C00, 0x03E0, 0x001F, 0), 32: (0xFF0000, 0xFF00, 0xFF, 0)}


def decode(data: bytes) -> np.ndarray:
    """A BMP's pixels as uint8 (height, width, 3), or 4 channels where bit-field masks give alpha."""
    if len(data) < 26 or not data.startswith(SIGNATURE):
        raise ImageDataError(f"not BMP data: it starts {data[:8]!r} ({len(data)} bytes)")
    offset, header_size = struct.unpack("<I I", data[10:18])
    if header_size == 12:  # OS/2 BITMAPCOREHEADER
        width, height, _, bits = struct.unpack("<hhHH", data[18:26])
        compression, colors, entry = _RGB, 0, 3
    elif header_size >= 40 and len(data) >= 14 + header_size:
        width, height, _, bits, compression = struct.unpack("<iiHHI", data[18:34])
        colors, entry = struct.unpack("<I", data[46:50])[0], 4
    else:
        raise ImageDataError(f"corrupt BMP data: a {header_size}-byte info header in {len(data)} bytes")
    if compression not in (_RGB, _BITFIELDS, _ALPHA_BITFIELDS):
        name = _COMPRESSION_NAMES.get(compression, str(compression))
        raise ImageDataError(f"BMP compression {name} is not supported (uncompressed and bit-field bitmaps are)")
    top_down, height = height < 0, abs(height)
    if width <= 0 or height == 0 or bits not in (1, 4, 8, 16, 24, 32):
        raise ImageDataError(f"corrupt BMP data: a {width}x{height} image at {bits} bits per pixel")
    stride = (width * bits + 31) // 32 * 4
    if offset + stride * height > len(data):
        raise ImageDataError(f"corrupt or truncated BMP data: {height} rows of {stride} bytes from byte {offset} "
                             f"need {offset + stride * height} bytes, got {len(data)}")
    rows = np.frombuffer(data, np.uint8, stride * height, offset).reshape(height, stride)
    if not top_down:
        rows = rows[::-1]
    if bits <= 8:
        return _from_palette(data, rows, width, bits, 14 + header_size, colors or 1 << bits, entry)
    if bits == 24:
        return rows[:, :width * 3].reshape(height, width, 3)[..., ::-1].copy()
    masks = _DEFAULT_MASKS[bits] if compression == _RGB else _masks(data, header_size, compression)
    words = rows[:, :width * bits // 8].copy().view("<u2" if bits == 16 else "<u4").astype(np.uint64)
    kept = masks if masks[3] else masks[:3]  # alpha only where a mask gives it
    return np.stack([_channel(words, mask) for mask in kept], axis=-1)


def _masks(data: bytes, header_size: int, compression: int) -> tuple[int, ...]:
    """The red, green, blue (and alpha) masks: in the info header from version 2, else after it."""
    count = 4 if compression == _ALPHA_BITFIELDS or header_size >= 56 else 3
    at = 14 + 40
    if len(data) < at + 4 * count:
        raise ImageDataError("corrupt or truncated BMP data: its bit-field masks are cut off")
    masks = struct.unpack(f"<{count}I", data[at:at + 4 * count])
    return masks + (0,) * (4 - count)


def _channel(words: np.ndarray, mask: int) -> np.ndarray:
    """The bits of ``mask`` in each word, scaled to 0..255 (truncating, as Pillow does)."""
    if not mask:
        return np.zeros(words.shape, np.uint8)
    shift = (mask & -mask).bit_length() - 1
    top = mask >> shift
    return (((words & mask) >> shift) * 255 // top).astype(np.uint8)


def _from_palette(data: bytes, rows: np.ndarray, width: int, bits: int, at: int, colors: int, entry: int):
    if colors > 1 << bits or len(data) < at + colors * entry:
        raise ImageDataError(f"corrupt BMP data: a {colors}-color palette at {bits} bits per pixel "
                             f"({len(data)} bytes)")
    palette = np.frombuffer(data, np.uint8, colors * entry, at).reshape(colors, entry)[:, 2::-1]
    if bits == 8:
        indices = rows[:, :width]
    else:
        indices = np.unpackbits(rows, axis=1).reshape(rows.shape[0], -1, bits)[:, :width]
        indices = indices @ (1 << np.arange(bits - 1, -1, -1)).astype(np.uint8)
    if indices.max(initial=0) >= colors:
        raise ImageDataError(f"corrupt BMP data: a pixel indexes entry {indices.max()} of a {colors}-color palette")
    return palette[indices]
