"""Encoded image bytes to NumPy arrays and back, as TensorFlow 1.15's image ops do, through Pillow.

Pillow is optional (the ``train`` extra) and imported on first use. Every decoder reads the format
from the first bytes (never from a name) and fails with ``InvalidArgumentError`` naming the op and
what is wrong with the data; Pillow's own exceptions never reach the user.
"""

from __future__ import annotations

import io
import warnings
from typing import Callable

import numpy as np

from edge_runtime.codecs.pixels import luma
from trainer.kernels.debugging import InvalidArgumentError
from trainer.png16 import bit_depth, read_png16, write_png16

__all__ = ["FORMATS", "convert_pixels", "decode", "encode_jpeg", "encode_png", "image_format", "jpeg_shape", "pillow"]

# The first bytes of each format, as TensorFlow's decode_image tells them apart.
FORMATS: dict[str, tuple[bytes, ...]] = {
    "jpeg": (b"\xff\xd8\xff",),
    "png": (b"\x89PNG\r\n\x1a\n",),
    "gif": (b"GIF87a", b"GIF89a"),
    "bmp": (b"BM",),
}
_EOI = b"\xff\xd9"  # a JPEG's end-of-image marker: appended to truncated data to decode what is there


def pillow(op: str):
    """``PIL.Image``, or an ImportError naming ``op`` and how to install Pillow."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError(f"{op} decodes and encodes images with Pillow, which is not installed: "
                          "pip install pillow (or flowstack[train])") from None
    return Image


def image_format(data: bytes) -> str | None:
    """'jpeg', 'png', 'gif' or 'bmp' by the first bytes; None for anything else."""
    return next((name for name, magics in FORMATS.items() if data.startswith(magics)), None)


def _open(op: str, data: bytes, accepted: tuple[str, ...]):
    kind = image_format(data)
    if kind not in accepted:
        found = f"{kind.upper()} data" if kind else f"data starting {data[:8]!r}"
        raise InvalidArgumentError(f"{op}: expected {' or '.join(a.upper() for a in accepted)} data, got {found} "
                                   f"({len(data)} bytes)")
    Image = pillow(op)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            return kind, Image.open(io.BytesIO(data), formats=[kind.upper()])
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as e:
        # Pillow's "cannot identify image file <BytesIO ...>" names no file here: say what it means.
        reason = "not a readable header" if isinstance(e, Image.UnidentifiedImageError) else str(e)
        raise InvalidArgumentError(f"{op}: corrupt or truncated {kind.upper()} header ({len(data)} bytes): "
                                   f"{reason}") from None


def _load(op: str, kind: str, image, data: bytes, recover: Callable[[], object] | None):
    """Decode the pixels; a truncated file is an error unless ``recover`` gives the image again to
    decode from the data that is there."""
    try:
        image.load()
        return image
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        if recover is None or "truncated" not in str(e):
            raise InvalidArgumentError(f"{op}: corrupt or truncated {kind.upper()} data ({len(data)} bytes): "
                                       f"{e}") from None
    again = recover()
    try:
        again.load()
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise InvalidArgumentError(f"{op}: truncated {kind.upper()} data ({len(data)} bytes) could not be "
                                   f"recovered: {e}") from None
    return again


# Pillow modes whose pixels come out as they are; any other mode is converted to RGB(A) first.
_NATIVE_MODES = ("L", "LA", "RGB", "RGBA")


def _native_pixels(image) -> np.ndarray:
    """[h, w, c] in the file's own channels: 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA)."""
    if image.mode not in _NATIVE_MODES:
        transparent = "A" in image.getbands() or "transparency" in image.info
        image = image.convert("RGBA" if transparent else "RGB")
    a = np.asarray(image)
    return a[..., None] if a.ndim == 2 else a


def _to_channels(op: str, pixels: np.ndarray, channels: int) -> np.ndarray:
    """``pixels`` [h, w, 1-4] with ``channels`` channels (0: as they are); an added alpha is opaque."""
    have = pixels.shape[2]
    if channels == 0 or channels == have:
        return pixels
    if channels not in (1, 3, 4):
        raise InvalidArgumentError(f"{op}: channels must be 0, 1, 3 or 4, got {channels}")
    color = pixels[..., :3] if have >= 3 else np.repeat(pixels[..., :1], 3, axis=2)
    if channels == 1:
        return luma(color) if have >= 3 else pixels[..., :1]
    if channels == 3:
        return color
    alpha = pixels[..., -1:] if have in (2, 4) else np.full(pixels.shape[:2] + (1,), np.iinfo(pixels.dtype).max,
                                                            pixels.dtype)
    return np.concatenate([color, alpha], axis=2)


def decode(op: str, data: bytes, accepted: tuple[str, ...], *, channels: int = 0, ratio: int = 1,
           recover_truncated: bool = False, sixteen_bit: bool = False, all_frames: bool = False) -> np.ndarray:
    """The image in ``data`` (one of the ``accepted`` formats) as [h, w, c], or [frames, h, w, 3]
    where ``all_frames`` and the data is a GIF. ``sixteen_bit``: PNGs keep 16 bits (uint16 out)."""
    kind, image = _open(op, data, accepted)
    if kind == "png" and bit_depth(data) == 16:  # Pillow would keep 16 bits for gray images only
        deep = _to_channels(op, read_png16(op, data), channels)
        return deep if sixteen_bit else (deep >> 8).astype(np.uint8)  # libpng's strip_16: the high byte
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(f"{op}: ratio must be 1, 2, 4 or 8, got {ratio}")
    if kind == "jpeg":
        # libjpeg converts to gray and scales by 1/ratio while decoding, as TensorFlow's decoder does.
        mode = {1: "L", 3: "RGB"}.get(channels, image.mode if image.mode in ("L", "RGB") else "RGB")
        size = (-(-image.width // ratio), -(-image.height // ratio))
        image.draft(mode, size)

    def reopen_with_end_marker():
        again = pillow(op).open(io.BytesIO(data + _EOI), formats=["JPEG"])
        again.draft(image.mode, image.size)
        return again

    if kind == "gif" and all_frames:
        return _gif_frames(op, image, data)
    image = _load(op, kind, image, data, reopen_with_end_marker if kind == "jpeg" and recover_truncated else None)
    if kind == "gif":  # TensorFlow decodes GIFs to RGB whatever their palette
        image = image.convert("RGB")
    pixels = _to_channels(op, _native_pixels(image), channels)
    if sixteen_bit:  # an 8-bit PNG widened as libpng does: v * 257 maps 255 to 65535
        pixels = pixels.astype(np.uint16) * 257
    return np.ascontiguousarray(pixels)


def _gif_frames(op: str, image, data: bytes) -> np.ndarray:
    frames = []
    try:
        for index in range(getattr(image, "n_frames", 1)):
            image.seek(index)
            frames.append(np.asarray(image.convert("RGB")))
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise InvalidArgumentError(f"{op}: corrupt or truncated GIF data ({len(data)} bytes) at frame "
                                   f"{len(frames)}: {e}") from None
    return np.stack(frames)


def jpeg_shape(op: str, data: bytes) -> tuple[int, int, int]:
    """[height, width, channels] from a JPEG's header alone."""
    _, image = _open(op, data, ("jpeg",))
    return image.height, image.width, len(image.getbands())


def convert_pixels(pixels: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``tf.image.convert_image_dtype`` on an unsigned integer image: floats in [0, 1], integers
    rescaled by a power of two."""
    dtype = np.dtype(dtype)
    if pixels.dtype == dtype:
        return pixels
    top = float(np.iinfo(pixels.dtype).max)
    if dtype.kind == "f":
        return (pixels.astype(dtype) * dtype.type(1.0 / top)).astype(dtype)
    shift = int(np.iinfo(dtype).max).bit_length() - int(np.iinfo(pixels.dtype).max).bit_length()  # int32: 31 bits
    wide = pixels.astype(np.uint64)
    return (wide << shift if shift >= 0 else wide >> -shift).astype(dtype)


def encode_png(op: str, pixels: np.ndarray, compression: int) -> bytes:
    Image = pillow(op)
    if pixels.ndim != 3 or pixels.shape[2] not in (1, 2, 3, 4):
        raise InvalidArgumentError(f"{op}: image must be [height, width, 1 to 4 channels], got shape {pixels.shape}")
    if pixels.dtype not in (np.uint8, np.uint16):
        raise InvalidArgumentError(f"{op}: image must be uint8 or uint16, got {pixels.dtype}")
    if not -1 <= compression <= 9:
        raise InvalidArgumentError(f"{op}: compression must be -1 (the default) or 0 to 9, got {compression}")
    channels = pixels.shape[2]
    if pixels.dtype == np.uint16:
        return write_png16(pixels, compression)
    image = Image.fromarray(pixels[..., 0] if channels == 1 else pixels)  # L, LA, RGB or RGBA
    out = io.BytesIO()
    image.save(out, format="PNG", compress_level=6 if compression < 0 else compression)
    return out.getvalue()


# TensorFlow's density units, as Pillow's JFIF density units.
_DENSITY_UNITS = {"in": 1, "cm": 2}


def encode_jpeg(op: str, pixels: np.ndarray, *, format: str = "",  # noqa: A002  (TensorFlow's argument name)
                quality: int = 95, progressive: bool = False, optimize_size: bool = False,
                chroma_downsampling: bool = True, density_unit: str = "in", x_density: int = 300, y_density: int = 300, xmp_metadata: str = "") -> bytes:
    Image = pillow(op)
    if pixels.ndim != 3 or pixels.dtype != np.uint8:
        raise InvalidArgumentError(f"{op}: image must be uint8 [height, width, channels], got {pixels.dtype} "
                                   f"{pixels.shape}")
    wanted = {"": pixels.shape[2], "grayscale": 1, "rgb": 3}.get(format)
    if wanted is None or wanted not in (1, 3) or pixels.shape[2] not in (1, 3):
        raise InvalidArgumentError(f"{op}: format {format!r} with {pixels.shape[2]} channels; JPEG holds 1 "
                                   "(format 'grayscale') or 3 ('rgb') channels")
    if wanted != pixels.shape[2]:
        raise InvalidArgumentError(f"{op}: format {format!r} needs {wanted} channels, the image has {pixels.shape[2]}")
    if not 0 <= quality <= 100:
        raise InvalidArgumentError(f"{op}: quality must be 0 to 100, got {quality}")
    if density_unit not in _DENSITY_UNITS:
        raise InvalidArgumentError(f"{op}: density_unit must be 'in' or 'cm', got {density_unit!r}")
    image = Image.fromarray(pixels[..., 0] if wanted == 1 else pixels)
    out = io.BytesIO()
    options = {"quality": quality, "progressive": bool(progressive), "optimize": bool(optimize_size),
               "subsampling": 2 if chroma_downsampling else 0, "dpi": (x_density, y_density)}
    if xmp_metadata:
        options["xmp"] = xmp_metadata.encode()
    image.save(out, format="JPEG", **options)
    data = out.getvalue()
    # Pillow writes dots per inch; the JFIF APP0 segment's unit byte (offset 13) says which unit.
    return data[:13] + bytes([_DENSITY_UNITS[density_unit]]) + data[14:]
