"""ONNX's ImageDecoder: encoded bytes to uint8 (height, width, channels).

The format is told by the first bytes, never by a name. PNG, BMP and PBM/PGM/PPM decode in NumPy
alone (``edge_runtime.codecs``); JPEG, TIFF, WebP and JPEG 2000 go through Pillow, imported when
such an image arrives, and without it fail naming the format and how to install it. Where the
spec lets a decoder return an empty image for data it cannot decode, this one raises, saying what
is wrong with the data.
"""

from __future__ import annotations

import io
from typing import Callable

import numpy as np

from edge_runtime.codecs import ImageDataError, bmp, png, pnm
from edge_runtime.codecs.pixels import luma, to_rgb8
from edge_runtime.kernels.registry import kernel


def _pillow_format(name: str) -> Callable[[bytes], np.ndarray]:
    """A decoder of Pillow's format ``name``, returning uint8 RGB."""

    def decode(data: bytes) -> np.ndarray:
        try:
            from PIL import Image
        except ImportError:
            raise ImportError(f"ImageDecoder: decoding {name} data needs Pillow, which is not installed "
                              f"(pip install pillow); PNG, BMP and PBM/PGM/PPM decode without it") from None
        try:  # (no warnings filter here: changing one is not thread-safe, and kernels run on several threads)
            with Image.open(io.BytesIO(data), formats=[name]) as image:
                return np.asarray(image.convert("RGB"))
        except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as e:
            raise ImageDataError(f"corrupt or unreadable {name} data ({len(data)} bytes): {e}") from None

    return decode


def _is_webp(data: bytes) -> bool:
    return data[:4] == b"RIFF" and data[8:12] == b"WEBP"


# (format, does the data start like it, decoder to pixels as stored or to RGB), in the order tried
_FORMATS: tuple[tuple[str, Callable[[bytes], bool], Callable[[bytes], np.ndarray]], ...] = (
    ("PNG", lambda d: d.startswith(png.SIGNATURE), png.decode),
    ("BMP", lambda d: d.startswith(bmp.SIGNATURE), bmp.decode),
    ("PNM", lambda d: d[:2] in pnm.MAGICS, pnm.decode),
    ("JPEG", lambda d: d.startswith(b"\xff\xd8\xff"), _pillow_format("JPEG")),
    ("TIFF", lambda d: d[:4] in (b"II*\x00", b"MM\x00*"), _pillow_format("TIFF")),
    ("WEBP", _is_webp, _pillow_format("WEBP")),
    ("JPEG2000", lambda d: d.startswith((b"\x00\x00\x00\x0cjP  \r\n\x87\n", b"\xff\x4f\xff\x51")),
     _pillow_format("JPEG2000")),
)


# pixel_format -> uint8 RGB to the output's channels
_PIXEL_FORMATS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "RGB": lambda rgb: rgb,
    "BGR": lambda rgb: rgb[..., ::-1],
    "Grayscale": luma,
}


@kernel("ImageDecoder", host_inputs=(0,))
def image_decoder(encoded_stream, *, xp, pixel_format):
    if pixel_format not in _PIXEL_FORMATS:
        raise ValueError(f"ImageDecoder: pixel_format must be one of {tuple(_PIXEL_FORMATS)}, got {pixel_format!r}")
    if encoded_stream.ndim != 1 or encoded_stream.dtype != np.uint8:
        raise ValueError(f"ImageDecoder: encoded_stream must be a 1-D uint8 tensor of the file's bytes, got "
                         f"{encoded_stream.dtype} of shape {tuple(encoded_stream.shape)}")
    data = encoded_stream.tobytes()
    name, decode = next(((n, d) for n, matches, d in _FORMATS if matches(data)), (None, None))
    if decode is None:
        raise ValueError(f"ImageDecoder: not an image format it reads (PNG, BMP, PBM/PGM/PPM, JPEG, TIFF, WebP, "
                         f"JPEG 2000): the data starts {data[:8]!r} ({len(data)} bytes)")
    try:
        rgb = to_rgb8(decode(data))
    except ImageDataError as e:
        raise ValueError(f"ImageDecoder: {name} data: {e}") from None
    return xp.asarray(np.ascontiguousarray(_PIXEL_FORMATS[pixel_format](rgb)))
