"""The portable anymaps: PBM (P1, P4), PGM (P2, P5) and PPM (P3, P6), plain (ASCII) or raw."""

from __future__ import annotations

import re

import numpy as np

from edge_runtime.codecs.errors import ImageDataError

# magic -> (channels, raw samples, a bitmap)
MAGICS = {b"P1": (1, False, True), b"P2": (1, False, False), b"P3": (3, False, False),
          b"P4": (1, True, True), b"P5": (1, True, False), b"P6": (3, True, False)}
# the magic, then width, height and (but for bitmaps) maxval: whitespace-separated, '#' comments
_TOKEN = re.compile(rb"(?:\s|#[^\n\r]*[\n\r])*(\d+)")


def decode(data: bytes) -> np.ndarray:
    """An anymap's pixels as (height, width, 1 or 3): uint8 where maxval is 255 or less (samples
    scaled to 0..255), uint16 above; a bitmap's 1 (black) as 0 and 0 as 255."""
    magic = data[:2]
    if magic not in MAGICS or len(data) < 3 or not data[2:3].isspace():
        raise ImageDataError(f"not PBM, PGM or PPM data: it starts {data[:8]!r}")
    channels, raw, bitmap = MAGICS[magic]
    fields, at = [], 2
    for _ in range(2 if bitmap else 3):
        match = _TOKEN.match(data, at)
        if match is None:
            raise ImageDataError(f"corrupt {magic.decode()} data: its header ends at byte {at} before width, "
                                 f"height{'' if bitmap else ' and maxval'}")
        fields.append(int(match.group(1)))
        at = match.end()
    width, height, maxval = (*fields, 1) if bitmap else fields
    if width == 0 or height == 0 or not 0 < maxval < 65536:
        raise ImageDataError(f"corrupt {magic.decode()} data: a {width}x{height} image with maxval {maxval}")
    count = width * height * channels
    if raw:
        samples = _raw_samples(data, at + 1, count, width, height, bitmap, maxval, magic)
    else:
        samples = _plain_samples(data[at:], count, bitmap, magic)
    if samples.max(initial=0) > maxval:
        raise ImageDataError(f"corrupt {magic.decode()} data: a sample {samples.max()} above maxval {maxval}")
    if bitmap:
        return np.where(samples == 1, 0, 255).astype(np.uint8).reshape(height, width, 1)
    if maxval > 255:
        return samples.astype(np.uint16).reshape(height, width, channels)
    scaled = samples if maxval == 255 else (samples.astype(np.uint32) * 255 + maxval // 2) // maxval
    return scaled.astype(np.uint8).reshape(height, width, channels)


def _raw_samples(data, at, count, width, height, bitmap, maxval, magic) -> np.ndarray:
    if bitmap:
        stride = (width + 7) // 8
        need = stride * height
    else:
        need = count * (2 if maxval > 255 else 1)
    if len(data) < at + need:
        raise ImageDataError(f"corrupt or truncated {magic.decode()} data: {len(data) - at} bytes of pixels where "
                             f"the image needs {need}")
    if bitmap:
        rows = np.frombuffer(data, np.uint8, need, at).reshape(height, stride)
        return np.unpackbits(rows, axis=1)[:, :width].reshape(-1)
    return np.frombuffer(data, ">u2" if maxval > 255 else np.uint8, count, at)


def _plain_samples(body: bytes, count: int, bitmap: bool, magic: bytes) -> np.ndarray:
    text = re.sub(rb"#[^\n\r]*", b" ", body)
    if bitmap:  # a plain bitmap's digits need no separating whitespace
        samples = np.frombuffer(re.sub(rb"\s", b"", text), np.uint8) - ord("0")
    else:
        try:
            samples = np.array(text.split(), dtype=np.int64)
        except ValueError:
            raise ImageDataError(f"corrupt {magic.decode()} data: its samples are not all decimal numbers") from None
    if samples.size < count:
        raise ImageDataError(f"corrupt or truncated {magic.decode()} data: {samples.size} samples where the image "
                             f"needs {count}")
    return samples[:count]
