"""16-bit PNGs, read and written exactly: Pillow keeps 16 bits for gray images only (it reads a
16-bit RGB PNG as 8-bit RGB), and TensorFlow's ``decode_png(dtype=uint16)`` keeps them for every
color type. Non-interlaced images of color types gray, gray+alpha, RGB and RGBA."""

from __future__ import annotations

import struct
import zlib

import numpy as np

from trainer.kernels.debugging import InvalidArgumentError

__all__ = ["SIGNATURE", "bit_depth", "read_png16", "write_png16"]

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG color type -> channels, and back.
_CHANNELS = {0: 1, 4: 2, 2: 3, 6: 4}
_COLOR_TYPES = {channels: color for color, channels in _CHANNELS.items()}


def bit_depth(data: bytes) -> int | None:
    """The bit depth in a PNG's IHDR (the first chunk, at a fixed offset); None if there is none."""
    return data[24] if len(data) > 24 and data.startswith(SIGNATURE) and data[12:16] == b"IHDR" else None


def _chunks(op: str, data: bytes):
    at = len(SIGNATURE)
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if len(body) != length or len(data) < at + 12 + length:
            raise InvalidArgumentError(f"{op}: corrupt or truncated PNG data: chunk {kind!r} at byte {at} is cut off")
        if zlib.crc32(kind + body) != struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0]:
            raise InvalidArgumentError(f"{op}: corrupt PNG data: chunk {kind!r} at byte {at} fails its CRC")
        yield kind, body
        if kind == b"IEND":
            return
        at += 12 + length
    raise InvalidArgumentError(f"{op}: corrupt or truncated PNG data: no IEND chunk ({len(data)} bytes)")


def _unfilter(op: str, raw: bytes, height: int, stride: int, bpp: int) -> np.ndarray:
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), np.uint8)
    prior = np.zeros(stride, np.int32)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int32)
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prior) & 0xFF
        elif kind in (1, 3, 4):  # depend on the bytes to the left: one pixel at a time
            cur = line.copy()
            for x in range(stride):
                left = cur[x - bpp] if x >= bpp else 0
                up, corner = prior[x], (prior[x - bpp] if x >= bpp else 0)
                if kind == 1:
                    guess = left
                elif kind == 3:
                    guess = (left + up) >> 1
                else:
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    guess = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                cur[x] = (cur[x] + guess) & 0xFF
        else:
            raise InvalidArgumentError(f"{op}: corrupt PNG data: row {y} has filter type {kind}")
        out[y] = cur
        prior = cur
    return out


def read_png16(op: str, data: bytes) -> np.ndarray:
    """A 16-bit PNG's pixels as uint16 [height, width, channels]."""
    chunks = list(_chunks(op, data))
    if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13:
        raise InvalidArgumentError(f"{op}: corrupt PNG data: it does not start with an IHDR chunk")
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if depth != 16 or color not in _CHANNELS or interlace:
        raise InvalidArgumentError(f"{op}: 16-bit PNG with color type {color}, interlace {interlace} is not "
                                   "supported (gray, gray+alpha, RGB or RGBA, not interlaced)")
    channels = _CHANNELS[color]
    stride = width * channels * 2
    try:
        raw = zlib.decompress(b"".join(body for kind, body in chunks if kind == b"IDAT"))
    except zlib.error as e:
        raise InvalidArgumentError(f"{op}: corrupt PNG data: its image data does not inflate ({e})") from None
    if len(raw) != height * (stride + 1):
        raise InvalidArgumentError(f"{op}: corrupt or truncated PNG data: {len(raw)} bytes of pixels for a "
                                   f"{height}x{width} image with {channels} channels")
    pixels = _unfilter(op, raw, height, stride, channels * 2)
    return pixels.view(">u2").astype(np.uint16).reshape(height, width, channels)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def write_png16(pixels: np.ndarray, level: int) -> bytes:
    """uint16 [height, width, 1 to 4] as a PNG (rows unfiltered, deflated at ``level``, -1 the default)."""
    height, width, channels = pixels.shape
    rows = pixels.astype(">u2").reshape(height, width * channels).view(np.uint8)
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows], axis=1).tobytes()
    header = struct.pack(">IIBBBBB", width, height, 16, _COLOR_TYPES[channels], 0, 0, 0)
    return SIGNATURE + _chunk(b"IHDR", header) + _chunk(b"IDAT", zlib.compress(raw, level)) + _chunk(b"IEND", b"")
