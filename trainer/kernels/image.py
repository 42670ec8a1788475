"""Kernels of the image codecs (family ``image``: ``schemas/ops/image.py``), in the trainer only:
they decode with Pillow (trainer/image_codecs.py), which the edge runtime does not carry."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from trainer.image_codecs import convert_pixels, decode, encode_jpeg, encode_png, image_format, jpeg_shape
from trainer.kernels.debugging import InvalidArgumentError

__all__: list[str] = []

D = "flowstack"
_ANY_BUT_BMP = ("jpeg", "png", "gif")  # TensorFlow's JPEG, PNG and GIF decoders take each other's formats


def _bytes(op: str, contents) -> bytes:
    value = np.asarray(contents, dtype=object)
    if value.shape != ():
        raise InvalidArgumentError(f"{op}: contents must be a scalar string, got shape {value.shape}")
    value = value[()]
    return value.encode("latin-1") if isinstance(value, str) else bytes(value)


def _string(value: bytes) -> np.ndarray:
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def _decode_jpeg(op: str, contents, channels, ratio, try_recover_truncated, acceptable_fraction) -> np.ndarray:
    if channels not in (0, 1, 3):
        raise InvalidArgumentError(f"{op}: channels must be 0, 1 or 3, got {channels}")
    # Pillow cannot count the scanlines of a truncated file, so a fraction under one recovers as
    # try_recover_truncated does.
    recover = bool(try_recover_truncated) or acceptable_fraction < 1.0
    return decode(op, _bytes(op, contents), _ANY_BUT_BMP, channels=channels, ratio=ratio, recover_truncated=recover)


@kernel("DecodeJpeg", domain=D)
def decode_jpeg(contents, *, xp, channels, ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction,
                dct_method):
    return _decode_jpeg("DecodeJpeg", contents, channels, ratio, try_recover_truncated, acceptable_fraction)


@kernel("DecodeAndCropJpeg", domain=D)
def decode_and_crop_jpeg(contents, crop_window, *, xp, channels, ratio, fancy_upscaling, try_recover_truncated,
                         acceptable_fraction, dct_method):
    image = _decode_jpeg("DecodeAndCropJpeg", contents, channels, ratio, try_recover_truncated, acceptable_fraction)
    window = np.asarray(crop_window).reshape(-1)
    if window.size != 4:
        raise InvalidArgumentError(f"DecodeAndCropJpeg: crop_window must be [y, x, height, width], got {window}")
    y, x, height, width = (int(v) for v in window)
    if min(y, x) < 0 or height <= 0 or width <= 0 or y + height > image.shape[0] or x + width > image.shape[1]:
        raise InvalidArgumentError(f"DecodeAndCropJpeg: crop window {[y, x, height, width]} does not fit in the "
                                   f"{image.shape[0]}x{image.shape[1]} image")
    return np.ascontiguousarray(image[y:y + height, x:x + width])


@kernel("DecodePng", domain=D)
def decode_png(contents, *, xp, channels, dtype):
    if dtype not in ("uint8", "uint16"):
        raise InvalidArgumentError(f"DecodePng: dtype must be uint8 or uint16, got {dtype}")
    return decode("DecodePng", _bytes("DecodePng", contents), _ANY_BUT_BMP, channels=channels,
                  sixteen_bit=dtype == "uint16")


@kernel("DecodeGif", domain=D)
def decode_gif(contents, *, xp):
    frames = decode("DecodeGif", _bytes("DecodeGif", contents), _ANY_BUT_BMP, channels=3, all_frames=True)
    return frames if frames.ndim == 4 else frames[None]


@kernel("DecodeBmp", domain=D)
def decode_bmp(contents, *, xp, channels):
    if channels not in (0, 3, 4):
        raise InvalidArgumentError(f"DecodeBmp: channels must be 0, 3 or 4, got {channels}")
    return decode("DecodeBmp", _bytes("DecodeBmp", contents), ("bmp",), channels=channels)


@kernel("DecodeImage", domain=D)
def decode_image(contents, *, xp, channels, dtype, expand_animations):
    data = _bytes("DecodeImage", contents)
    kind = image_format(data)
    if kind == "gif" and channels not in (0, 3):
        raise InvalidArgumentError(f"DecodeImage: a GIF decodes to 3 channels, channels={channels} was asked")
    # As TensorFlow 1.15: a PNG decodes at 16 bits for any dtype but uint8, so floats keep a 16-bit PNG's precision.
    sixteen_bit = kind == "png" and np.dtype(dtype) != np.uint8
    image = decode("DecodeImage", data, ("jpeg", "png", "gif", "bmp"), channels=channels,
                   sixteen_bit=sixteen_bit, all_frames=kind == "gif" and bool(expand_animations))
    return convert_pixels(image, np.dtype(dtype))


@kernel("ExtractJpegShape", domain=D)
def extract_jpeg_shape(contents, *, xp, output_type):
    return np.asarray(jpeg_shape("ExtractJpegShape", _bytes("ExtractJpegShape", contents)), np.dtype(output_type))


@kernel("IsJpeg", domain=D)
def is_jpeg(contents, *, xp):
    return np.asarray(image_format(_bytes("IsJpeg", contents)) == "jpeg")


@kernel("EncodeJpeg", domain=D)
def encode_jpeg_kernel(image, *, xp, format, quality, progressive, optimize_size, chroma_downsampling,  # noqa: A002
                       density_unit, x_density, y_density, xmp_metadata):
    return _string(encode_jpeg("EncodeJpeg", np.asarray(image), format=format, quality=quality,
                               progressive=bool(progressive), optimize_size=bool(optimize_size),
                               chroma_downsampling=bool(chroma_downsampling), density_unit=density_unit,
                               x_density=x_density, y_density=y_density, xmp_metadata=xmp_metadata))


@kernel("EncodePng", domain=D)
def encode_png_kernel(image, *, xp, compression):
    return _string(encode_png("EncodePng", np.asarray(image), compression))


# TensorFlow's draw_bounding_boxes colors (RGBA), box i taking row i mod 10 when none are given.
_BOX_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1],
                        [0.5, 0, 0, 1], [0, 0, 0.5, 1], [0, 1, 1, 1], [1, 0, 1, 1]])


@kernel("DrawBoundingBoxes", domain=D)
def draw_bounding_boxes(images, boxes, colors=None, *, xp):
    batch, height, width, depth = images.shape
    if boxes.ndim != 3 or boxes.shape[0] != batch or boxes.shape[2] != 4:
        raise InvalidArgumentError(f"DrawBoundingBoxes: boxes must be [{batch}, boxes, 4], got shape {boxes.shape}")
    table = _BOX_COLORS if colors is None or colors.size == 0 else np.asarray(colors, np.float64).reshape(-1, 4)
    canvas = images.copy()
    scale = np.array([height - 1, width - 1, height - 1, width - 1], np.float64)
    for b in range(batch):
        for i, (top, left, bottom, right) in enumerate(np.trunc(boxes[b].astype(np.float32) * scale).astype(np.int64)):
            if top > bottom or left > right or top >= height or bottom < 0 or left >= width or right < 0:
                continue
            color = table[i % len(table), :depth].astype(images.dtype)
            rows, cols = slice(max(top, 0), min(bottom, height - 1) + 1), slice(max(left, 0), min(right, width - 1) + 1)
            for edge, inside in ((top, top >= 0), (bottom, bottom < height)):
                if inside:
                    canvas[b, edge, cols] = color
            for edge, inside in ((left, left >= 0), (right, right < width)):
                if inside:
                    canvas[b, rows, edge] = color
    return canvas
