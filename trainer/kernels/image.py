"""Kernels of the image codecs (family ``image``: ``schemas/ops/image.py``), in the trainer only:
they decode with Pillow (trainer/image_codecs.py), which the edge runtime does not carry."""

from __future__ import annotations

import numpy as np

from edge_runtime.kernels import kernel
from trainer.image_codecs import convert_pixels, decode, encode_jpeg, encode_png, image_format, jpeg_shape
from trainer.kernels.debugging import InvalidArgumentError
from trainer.kernels.random import op_generator
from trainer.kernels.registry import stateful_kernel

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


def _random_crop(gen, height: int, width: int, min_area: float, max_area: float, aspect: float):
    """TensorFlow's GenerateRandomCrop: a crop (y, x, h, w) of about ``aspect`` and an area in
    [min_area, max_area] pixels, or None; rounding as its lrintf does."""
    crop_h = int(np.rint(np.sqrt(min_area / aspect)))
    max_h = int(np.rint(np.sqrt(max_area / aspect)))
    if np.rint(max_h * aspect) > width:
        max_h = int((width + 0.5 - 1e-7) / aspect)
        if np.rint(max_h * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    crop_h = min(crop_h, max_h)
    if crop_h < max_h:
        crop_h += int(gen.integers(0, max_h - crop_h + 1))
    crop_w = int(np.rint(crop_h * aspect))
    if crop_w * crop_h < min_area:
        crop_h += 1
        crop_w = int(np.rint(crop_h * aspect))
    if crop_w * crop_h > max_area:
        crop_h -= 1
        crop_w = int(np.rint(crop_h * aspect))
    area = crop_w * crop_h
    if not (min_area <= area <= max_area) or not (0 < crop_w <= width) or not (0 < crop_h <= height):
        return None
    y = int(gen.integers(0, height - crop_h)) if height > crop_h else 0
    x = int(gen.integers(0, width - crop_w)) if width > crop_w else 0
    return y, x, crop_h, crop_w


def _covers(crop, boxes: np.ndarray, min_covered: float) -> bool:
    """Whether the crop holds at least ``min_covered`` of some box's area (boxes as pixel y0, x0, y1, x1)."""
    y, x, h, w = crop
    for y0, x0, y1, x1 in boxes:
        area = (y1 - y0) * (x1 - x0)
        if area <= 0:
            continue
        inter = max(0, min(y + h, y1) - max(y, y0)) * max(0, min(x + w, x1) - max(x, x0))
        if inter / area >= min_covered:
            return True
    return False


@stateful_kernel("SampleDistortedBoundingBox")
def sample_distorted_bounding_box(rctx, image_size, bounding_boxes, min_object_covered, *, xp, aspect_ratio_range,
                                  area_range, max_attempts, use_image_if_no_bounding_boxes, seed, seed2, stream):
    size = np.asarray(image_size).reshape(-1)
    if size.size != 3 or size[0] <= 0 or size[1] <= 0:
        raise InvalidArgumentError(f"SampleDistortedBoundingBox: image_size must be [height, width, channels] with "
                                   f"a positive height and width, got {size.tolist()}")
    height, width = int(size[0]), int(size[1])
    boxes = np.asarray(bounding_boxes, np.float64).reshape(-1, 4)
    if boxes.size == 0:
        if not use_image_if_no_bounding_boxes:
            raise InvalidArgumentError("SampleDistortedBoundingBox: no bounding boxes given; set "
                                       "use_image_if_no_bounding_boxes=True to sample from the whole image")
        boxes = np.array([[0.0, 0.0, 1.0, 1.0]])
    pixel_boxes = (boxes * [height, width, height, width]).astype(np.int64)
    gen = op_generator(rctx, seed, seed2, stream)
    crop = None
    for _ in range(max_attempts):
        aspect = float(gen.uniform(aspect_ratio_range[0], aspect_ratio_range[1]))
        found = _random_crop(gen, height, width, area_range[0] * height * width, area_range[1] * height * width, aspect)
        if found is not None and _covers(found, pixel_boxes, float(min_object_covered)):
            crop = found
            break
    y, x, crop_h, crop_w = crop if crop is not None else (0, 0, height, width)
    dtype = size.dtype
    box = np.array([[[y / height, x / width, (y + crop_h) / height, (x + crop_w) / width]]], np.float32)
    return np.array([y, x, 0], dtype), np.array([crop_h, crop_w, -1], dtype), box
