"""PNG: every color type (gray, RGB, palette, gray + alpha, RGBA) at every bit depth it allows,
interlaced (Adam7) or not, palette transparency (tRNS) as an alpha channel.

Rows are unfiltered along anti-diagonals: each byte depends on its left, upper and upper-left
neighbours only, so all bytes of one diagonal can be computed at once whatever each row's filter
type: height + width NumPy steps per image rather than one per byte.
"""

from __future__ import annotations

import struct
import zlib
from typing import Iterator

import numpy as np

from edge_runtime.codecs.errors import ImageDataError

SIGNATURE = b"\x89PNG\r\n\x1a\n"
# color type -> samples per pixel as stored
STORED_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}
# Adam7 passes: (first row, first column, row step, column step)
_ADAM7 = ((0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1))


def chunks(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(kind, body) of each chunk up to IEND, each checked against its CRC."""
    at = len(SIGNATURE)
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if len(body) != length or len(data) < at + 12 + length:
            raise ImageDataError(f"corrupt or truncated PNG data: chunk {kind!r} at byte {at} is cut off")
        if zlib.crc32(kind + body) != struct.unpack(">I", data[at + 8 + length:at + 12 + length])[0]:
            raise ImageDataError(f"corrupt PNG data: chunk {kind!r} at byte {at} fails its CRC")
        yield kind, body
        if kind == b"IEND":
            return
        at += 12 + length
    raise ImageDataError(f"corrupt or truncated PNG data: no IEND chunk ({len(data)} bytes)")


def unfilter(raw: np.ndarray, bpp: int) -> np.ndarray:
    """Rows of filtered bytes, each led by its filter type ((height, 1 + stride) uint8), unfiltered
    to (height, stride) uint8; ``bpp`` is the bytes of one pixel (at least 1)."""
    height, stride = raw.shape[0], raw.shape[1] - 1
    kinds = raw[:, 0]
    bad = np.flatnonzero(kinds > 4)
    if bad.size:
        raise ImageDataError(f"corrupt PNG data: row {bad[0]} has filter type {kinds[bad[0]]}")
    columns = stride // bpp
    # int16 holds every sum below (at most 2 * 255 + 255)
    filtered = raw[:, 1:].reshape(height, columns, bpp).astype(np.int16)
    # one zero row above and one zero pixel to the left: the neighbours the first row and column see
    out = np.zeros((height + 1, columns + 1, bpp), np.int16)
    for diagonal in range(height + columns - 1):
        rows = np.arange(max(0, diagonal - columns + 1), min(height, diagonal + 1))
        cols = diagonal - rows
        left, up, corner = out[rows + 1, cols], out[rows, cols + 1], out[rows, cols]
        kind = kinds[rows][:, None]
        guess = np.where(kind == 1, left, np.where(kind == 2, up, 0))
        average, paeth = kind == 3, kind == 4
        if average.any():
            guess = np.where(average, (left + up) >> 1, guess)
        if paeth.any():
            pa, pb, pc = np.abs(up - corner), np.abs(left - corner), np.abs(left + up - 2 * corner)
            nearest = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, corner))
            guess = np.where(paeth, nearest, guess)
        out[rows + 1, cols + 1] = (filtered[rows, cols] + guess) & 0xFF
    return out[1:, 1:].reshape(height, stride).astype(np.uint8)


def _samples(rows: np.ndarray, width: int, channels: int, depth: int) -> np.ndarray:
    """Unfiltered rows to (height, width, channels) samples: uint8, or uint16 at depth 16."""
    height = rows.shape[0]
    if depth == 16:
        return rows.view(">u2").astype(np.uint16).reshape(height, width, channels)
    if depth == 8:
        return rows.reshape(height, width, channels)
    # below a byte, a row's last byte may hold padding bits past its last sample
    bits = np.unpackbits(rows, axis=1).reshape(height, -1, depth)[:, :width * channels]
    weights = (1 << np.arange(depth - 1, -1, -1)).astype(np.uint8)
    return (bits @ weights).astype(np.uint8).reshape(height, width, channels)


def _passes(width: int, height: int, interlaced: bool) -> list[tuple[int, int, int, int]]:
    """(first row, first column, row step, column step) of each pass that holds pixels."""
    passes = _ADAM7 if interlaced else ((0, 0, 1, 1),)
    return [p for p in passes if p[0] < height and p[1] < width]


def _pixels(raw: np.ndarray, width: int, height: int, channels: int, depth: int, interlaced: bool) -> np.ndarray:
    """The samples of every pass, placed; ``raw`` holds exactly the filtered rows (see ``_inflate``)."""
    bits = channels * depth
    bpp = max(1, bits // 8)
    image = np.empty((height, width, channels), np.uint16 if depth == 16 else np.uint8)
    at = 0
    for y0, x0, dy, dx in _passes(width, height, interlaced):
        h, w = len(range(y0, height, dy)), len(range(x0, width, dx))
        stride = (w * bits + 7) // 8
        rows = raw[at:at + h * (stride + 1)].reshape(h, stride + 1)
        image[y0::dy, x0::dx] = _samples(unfilter(rows, bpp), w, channels, depth)
        at += h * (stride + 1)
    return image


def _inflate(idat: bytes, width: int, height: int, bits: int, interlaced: bool) -> np.ndarray:
    """The filtered rows the header promises, inflated no further than that (a small file cannot
    claim gigabytes); an error where the data holds fewer."""
    need = 0
    for y0, x0, dy, dx in _passes(width, height, interlaced):
        need += len(range(y0, height, dy)) * ((len(range(x0, width, dx)) * bits + 7) // 8 + 1)
    try:
        raw = zlib.decompressobj().decompress(idat, need)
    except zlib.error as e:
        raise ImageDataError(f"corrupt PNG data: its image data does not inflate ({e})") from None
    if len(raw) < need:
        raise ImageDataError(f"corrupt or truncated PNG data: {len(raw)} bytes of pixels where the image needs "
                             f"{need}")
    return np.frombuffer(raw, np.uint8)


def decode(data: bytes) -> np.ndarray:
    """A PNG's pixels, (height, width, channels): a palette expanded to RGB (RGBA where tRNS gives
    its entries alpha), other color types as stored; uint16 at bit depth 16, else uint8 with
    sub-byte gray scaled to 0..255."""
    if not data.startswith(SIGNATURE):
        raise ImageDataError(f"not PNG data: it starts {data[:8]!r}")
    found = list(chunks(data))
    if found[0][0] != b"IHDR" or len(found[0][1]) != 13:
        raise ImageDataError("corrupt PNG data: it does not start with an IHDR chunk")
    width, height, depth, color, compression, filtering, interlace = struct.unpack(">IIBBBBB", found[0][1])
    if color not in STORED_CHANNELS or depth not in _DEPTHS[color] or compression or filtering or interlace > 1:
        raise ImageDataError(f"corrupt PNG data: IHDR gives color type {color} at bit depth {depth}, compression "
                             f"{compression}, filter method {filtering}, interlace {interlace}")
    if width == 0 or height == 0:
        raise ImageDataError(f"corrupt PNG data: IHDR gives a {width}x{height} image")
    channels = STORED_CHANNELS[color]
    idat = b"".join(body for kind, body in found if kind == b"IDAT")
    raw = _inflate(idat, width, height, channels * depth, bool(interlace))
    pixels = _pixels(raw, width, height, channels, depth, bool(interlace))
    extra = {kind: body for kind, body in found if kind in (b"PLTE", b"tRNS")}
    if color == 3:
        return _from_palette(pixels[..., 0], extra)
    if color == 0 and depth < 8:
        pixels = pixels * np.uint8(255 // ((1 << depth) - 1))
    return pixels


def _from_palette(indices: np.ndarray, extra: dict[bytes, bytes]) -> np.ndarray:
    body = extra.get(b"PLTE")
    if body is None or len(body) % 3 or not body:
        raise ImageDataError("corrupt PNG data: a palette image without a valid PLTE chunk")
    palette = np.frombuffer(body, np.uint8).reshape(-1, 3)
    alpha = extra.get(b"tRNS")
    if alpha is not None:
        opacity = np.full(len(palette), 255, np.uint8)
        opacity[:min(len(alpha), len(palette))] = np.frombuffer(alpha, np.uint8)[:len(palette)]
        palette = np.concatenate([palette, opacity[:, None]], axis=1)
    if indices.max(initial=0) >= len(palette):
        raise ImageDataError(f"corrupt PNG data: a pixel indexes entry {indices.max()} of a {len(palette)}-color "
                             f"palette")
    return palette[indices]
