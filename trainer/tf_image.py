"""``tf.image``: TF 1.15's image functions on NHWC images, a batch ``[N, H, W, C]`` or one image
``[H, W, C]``, built from flowstack's ops (resizing is ONNX Resize over the H and W axes, with
TensorFlow 1.x's sampling conventions)."""

from __future__ import annotations

import numpy as np

from trainer import ops
from trainer.array_ops import pad, reduce_mean, reduce_sum, reverse, rsqrt, slice, tile, where  # noqa: A004
from trainer.image_adjust import (adjust_gamma, adjust_hue, adjust_jpeg_quality, adjust_saturation,
                                  convert_image_dtype, hsv_to_rgb, image_gradients, psnr, random_hue,
                                  random_saturation, rgb_to_hsv, rgb_to_yiq, rgb_to_yuv, total_variation, yiq_to_rgb,
                                  yuv_to_rgb)
from trainer.image_boxes import (combined_non_max_suppression, draw_bounding_boxes, non_max_suppression,
                                 non_max_suppression_overlaps, non_max_suppression_padded,
                                 non_max_suppression_with_scores, sample_distorted_bounding_box)
from trainer.image_quality import ssim, ssim_multiscale
from trainer.image_resampling import crop_and_resize, resize_area
from trainer.image_codec_ops import (decode_and_crop_jpeg, decode_bmp, decode_gif, decode_image, decode_jpeg,
                                     decode_png, encode_jpeg, encode_png, extract_jpeg_shape, is_jpeg)
from trainer.random_ops import random_crop, random_uniform

__all__ = [
    "combined_non_max_suppression", "crop_and_resize", "non_max_suppression_overlaps", "non_max_suppression_padded",
    "resize_area", "ssim", "ssim_multiscale",
    "ResizeMethod", "adjust_brightness", "adjust_contrast", "adjust_gamma", "adjust_hue", "adjust_jpeg_quality",
    "adjust_saturation", "central_crop", "convert_image_dtype", "crop_to_bounding_box", "decode_and_crop_jpeg",
    "decode_bmp", "decode_gif", "decode_image", "decode_jpeg", "decode_png", "draw_bounding_boxes", "encode_jpeg",
    "encode_png", "extract_image_patches", "extract_jpeg_shape", "extract_patches", "flip_left_right",
    "flip_up_down", "grayscale_to_rgb", "hsv_to_rgb", "image_gradients", "is_jpeg", "non_max_suppression",
    "non_max_suppression_with_scores", "pad_to_bounding_box", "per_image_standardization", "psnr",
    "random_brightness", "random_contrast", "random_crop", "random_flip_left_right", "random_flip_up_down",
    "random_hue", "random_saturation", "resize", "resize_bicubic", "resize_bilinear",
    "resize_image_with_crop_or_pad", "resize_image_with_pad", "resize_images", "resize_nearest_neighbor",
    "resize_with_crop_or_pad", "rgb_to_grayscale", "rgb_to_hsv", "rgb_to_yiq", "rgb_to_yuv", "rot90",
    "sample_distorted_bounding_box", "sobel_edges", "total_variation", "transpose", "transpose_image",
    "yiq_to_rgb", "yuv_to_rgb",
]


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.image", name, globals())


class ResizeMethod:
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


# method -> ONNX Resize mode; TF 1.x's nearest rounds source coordinates down.
_MODES = {ResizeMethod.BILINEAR: "linear", ResizeMethod.NEAREST_NEIGHBOR: "nearest", ResizeMethod.BICUBIC: "cubic"}


def _image(images):
    x = ops.convert_to_tensor(images)
    if x.shape is not None and len(x.shape) not in (3, 4):
        raise ValueError(f"tf.image: expected an image [H, W, C] or a batch [N, H, W, C], got shape {x.shape}")
    return x


def _static_hw(x, what: str) -> tuple[int, int]:
    if x.shape is None or x.shape[-3] is None or x.shape[-2] is None:
        raise ValueError(f"tf.image.{what}: needs a static height and width, got shape {x.shape}")
    return int(x.shape[-3]), int(x.shape[-2])


def _resize(images, size, method: int, align_corners: bool, half_pixel_centers: bool, name):
    x = _image(images)
    if method == ResizeMethod.AREA:
        return resize_area(x, size, align_corners=align_corners, name=name)
    if method not in _MODES:
        raise ValueError(f"tf.image resize method {method!r}: expected one of tf.image.ResizeMethod's BILINEAR, "
                         f"NEAREST_NEIGHBOR, BICUBIC, AREA")
    if align_corners and half_pixel_centers:
        raise ValueError("resize: align_corners and half_pixel_centers cannot both be True")
    rank = len(x.shape) if x.shape is not None else 4
    transform = "align_corners" if align_corners else ("half_pixel" if half_pixel_centers else "asymmetric")
    if method == ResizeMethod.NEAREST_NEIGHBOR and half_pixel_centers:
        transform = "tf_half_pixel_for_nn"
    sizes = ops.cast(ops.convert_to_tensor(size), np.int64)
    attrs = {"mode": _MODES[method], "coordinate_transformation_mode": transform,
             "nearest_mode": "round_prefer_ceil" if align_corners else "floor",
             "cubic_coeff_a": -0.5, "axes": [rank - 3, rank - 2]}
    float_in = ops.cast(x, np.float32) if np.dtype(x.dtype).kind != "f" else x
    out = ops.make_op("Resize", [float_in, None, None, sizes], attrs, name=name or "resize").outputs[0]
    if x.shape is not None and isinstance(size, (list, tuple)) and all(isinstance(n, int) for n in size):
        # A decoded image's height and width are unknown; a literal size still fixes the result's.
        out.set_shape(tuple(x.shape[:-3]) + tuple(size) + (x.shape[-1],))
    return out


def resize_images(images, size, method: int = ResizeMethod.BILINEAR, align_corners: bool = False,
                  preserve_aspect_ratio: bool = False, name=None):
    """Resize to ``size`` = [new_height, new_width]; integer images come back as float32, as in TF."""
    if preserve_aspect_ratio:
        raise NotImplementedError("resize_images: preserve_aspect_ratio=True is not supported; compute the size "
                                  "that keeps the ratio and pass it")
    return _resize(images, size, method, align_corners, False, name)


resize = resize_images


def resize_bilinear(images, size, align_corners: bool = False, half_pixel_centers: bool = False, name=None):
    return _resize(images, size, ResizeMethod.BILINEAR, align_corners, half_pixel_centers, name)


def resize_nearest_neighbor(images, size, align_corners: bool = False, half_pixel_centers: bool = False, name=None):
    return _resize(images, size, ResizeMethod.NEAREST_NEIGHBOR, align_corners, half_pixel_centers, name)


def resize_bicubic(images, size, align_corners: bool = False, half_pixel_centers: bool = False, name=None):
    return _resize(images, size, ResizeMethod.BICUBIC, align_corners, half_pixel_centers, name)


def flip_left_right(image):
    return reverse(_image(image), [-2])


def flip_up_down(image):
    return reverse(_image(image), [-3])


def transpose_image(image):
    x = _image(image)
    perm = [0, 2, 1, 3] if x.shape is not None and len(x.shape) == 4 else [1, 0, 2]
    return ops.transpose(x, perm)


def rot90(image, k: int = 1, name=None):
    """Rotate counter-clockwise by ``k`` quarter turns (``k`` a Python int)."""
    x = _image(image)
    for _ in range(int(k) % 4):
        x = flip_up_down(transpose_image(x))
    return ops.identity(x, name=name) if name else x


def _random_flip(image, seed, flip):
    x = _image(image)
    batched = x.shape is not None and len(x.shape) == 4
    coin_shape = ops.concat([ops.gather(ops.shape(x), [0]), np.ones(3, np.int64)], 0) if batched else [1, 1, 1]
    coin = random_uniform(coin_shape, 0.0, 1.0, seed=seed)
    return where(ops.less(coin, 0.5), flip(x), x)


def random_flip_left_right(image, seed=None):
    """Each image flipped left-right with probability 1/2."""
    return _random_flip(image, seed, flip_left_right)


def random_flip_up_down(image, seed=None):
    return _random_flip(image, seed, flip_up_down)


def per_image_standardization(image):
    """(x - mean) / max(stddev, 1 / sqrt(number of elements)), per image."""
    x = ops.cast(_image(image), np.float32)
    axes = [-3, -2, -1]
    mean = reduce_mean(x, axis=axes, keepdims=True)
    centered = x - mean
    variance = reduce_mean(centered * centered, axis=axes, keepdims=True)
    count = reduce_sum(ops.ones_like(x), axis=axes, keepdims=True)
    return centered / ops.maximum(ops.sqrt(variance), rsqrt(count))


def crop_to_bounding_box(image, offset_height: int, offset_width: int, target_height: int, target_width: int):
    x = _image(image)
    batched = x.shape is not None and len(x.shape) == 4
    begin = ([0] if batched else []) + [int(offset_height), int(offset_width), 0]
    size = ([-1] if batched else []) + [int(target_height), int(target_width), -1]
    return slice(x, begin, size)


def pad_to_bounding_box(image, offset_height: int, offset_width: int, target_height: int, target_width: int):
    x = _image(image)
    height, width = _static_hw(x, "pad_to_bounding_box")
    below, right = target_height - offset_height - height, target_width - offset_width - width
    if min(offset_height, offset_width, below, right) < 0:
        raise ValueError(f"pad_to_bounding_box: a {height}x{width} image does not fit at ({offset_height}, "
                         f"{offset_width}) in {target_height}x{target_width}")
    paddings = [[int(offset_height), below], [int(offset_width), right], [0, 0]]
    return pad(x, ([[0, 0]] if len(x.shape) == 4 else []) + paddings)


def resize_image_with_crop_or_pad(image, target_height: int, target_width: int):
    """Center-crop or zero-pad (each axis on its own) to the target size."""
    x = _image(image)
    height, width = _static_hw(x, "resize_image_with_crop_or_pad")
    crop_h, crop_w = max(height - target_height, 0), max(width - target_width, 0)
    x = crop_to_bounding_box(x, crop_h // 2, crop_w // 2, min(height, target_height), min(width, target_width))
    pad_h, pad_w = max(target_height - height, 0), max(target_width - width, 0)
    return pad_to_bounding_box(x, pad_h // 2, pad_w // 2, target_height, target_width)


resize_with_crop_or_pad = resize_image_with_crop_or_pad
transpose = transpose_image


def central_crop(image, central_fraction: float):
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError(f"central_crop: central_fraction must be in (0, 1], got {central_fraction}")
    x = _image(image)
    height, width = _static_hw(x, "central_crop")
    top, left = int((height - height * central_fraction) / 2), int((width - width * central_fraction) / 2)
    return crop_to_bounding_box(x, top, left, height - 2 * top, width - 2 * left)


def rgb_to_grayscale(images, name=None):
    x = _image(images)
    weights = ops.constant(np.array([0.2989, 0.5870, 0.1140], np.dtype(x.dtype) if np.dtype(x.dtype).kind == "f"
                                    else np.float32))
    gray = reduce_sum(ops.cast(x, weights.dtype) * weights, axis=-1, keepdims=True)
    return ops.cast(gray, x.dtype, name=name) if np.dtype(x.dtype).kind != "f" else gray


def grayscale_to_rgb(images, name=None):
    x = _image(images)
    multiples = [1] * ((len(x.shape) if x.shape is not None else 4) - 1) + [3]
    return tile(x, multiples, name=name)


def adjust_brightness(image, delta):
    return ops.cast(_image(image), np.float32) + delta


def adjust_contrast(images, contrast_factor):
    """(x - mean) * contrast_factor + mean, the mean per image and channel."""
    x = ops.cast(_image(images), np.float32)
    mean = reduce_mean(x, axis=[-3, -2], keepdims=True)
    return (x - mean) * contrast_factor + mean


def random_brightness(image, max_delta: float, seed=None):
    if max_delta < 0:
        raise ValueError("random_brightness: max_delta must be non-negative")
    return adjust_brightness(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_contrast(image, lower: float, upper: float, seed=None):
    if not 0 <= lower < upper:
        raise ValueError("random_contrast: need 0 <= lower < upper")
    return adjust_contrast(image, random_uniform([], lower, upper, seed=seed))


def extract_image_patches(images=None, ksizes=None, strides=None, rates=None, padding=None, name=None, sizes=None):
    """Each ``ksizes`` [1, kh, kw, 1] window of the NHWC ``images`` (every ``strides``, taps
    ``rates`` apart, VALID or SAME), flattened in (row, column, channel) order into the depth:
    [batch, out_rows, out_cols, kh * kw * depth]. Built as a convolution with a one-hot filter
    (one output channel per window entry), so it differentiates as conv2d does; float images only."""
    from trainer.nn import conv2d

    x = ops.convert_to_tensor(images)
    window = ksizes if ksizes is not None else sizes
    for arg, value in (("ksizes", window), ("strides", strides), ("rates", rates)):
        if value is None or len(value) != 4 or value[0] != 1 or value[3] != 1:
            raise ValueError(f"extract_image_patches: {arg} must be [1, rows, cols, 1], got {value}")
    if padding not in ("VALID", "SAME"):
        raise ValueError(f"extract_image_patches: padding must be VALID or SAME, got {padding!r}")
    if x.shape is None or len(x.shape) != 4 or x.shape[3] is None:
        raise ValueError(f"extract_image_patches: images must be 4-D with a known depth, got shape {x.shape}")
    if x.dtype is None or x.dtype.kind != "f":
        raise TypeError(f"extract_image_patches: images must be float, got {x.dtype}")
    kh, kw, depth = int(window[1]), int(window[2]), int(x.shape[3])
    one_hot = np.eye(kh * kw * depth, dtype=x.dtype).reshape(kh, kw, depth, kh * kw * depth)
    return conv2d(x, ops.constant(one_hot), strides=list(strides), padding=padding, dilations=list(rates),
                  name=name or "ExtractImagePatches")


def extract_patches(images, sizes, strides, rates, padding, name=None):
    """``tf.image.extract_patches``: ``extract_image_patches`` with ``sizes`` for ``ksizes``."""
    return extract_image_patches(images, sizes, strides, rates, padding, name=name)


def resize_image_with_pad(image, target_height: int, target_width: int, method: int = ResizeMethod.BILINEAR,
                          align_corners: bool = False):
    """Resize to fit ``target_height`` x ``target_width`` keeping the aspect ratio, then zero-pad
    (centered) to exactly that size, as TF 1.15 does."""
    x = _image(image)
    height, width = _static_hw(x, "resize_image_with_pad")
    if target_height <= 0 or target_width <= 0:
        raise ValueError(f"resize_image_with_pad: target size must be positive, got {target_height}x{target_width}")
    ratio = max(width / target_width, height / target_height)
    new_height, new_width = int(height / ratio), int(width / ratio)
    resized = resize_images(x, [new_height, new_width], method=method, align_corners=align_corners)
    return pad_to_bounding_box(resized, max(0, (target_height - new_height) // 2),
                               max(0, (target_width - new_width) // 2), target_height, target_width)


def sobel_edges(image):
    """Sobel gradients of a float batch [N, H, W, C] as [N, H, W, C, 2] (dy, dx), the border reflected."""
    from trainer.nn import depthwise_conv2d

    x = _image(image)
    if x.shape is None or len(x.shape) != 4 or x.shape[-1] is None:
        raise ValueError(f"sobel_edges: expected a batch [N, H, W, C] with known channels, got shape {x.shape}")
    channels = int(x.shape[-1])
    dy = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], np.float64)
    kernels = np.stack([dy, dy.T], axis=-1)  # [3, 3, 2]: dy then dx
    weights = np.tile(kernels[:, :, None, :], (1, 1, channels, 1)).astype(np.dtype(x.dtype))  # [3, 3, C, 2]
    padded = pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    edges = depthwise_conv2d(padded, ops.constant(weights), [1, 1, 1, 1], "VALID")  # [N, H, W, C * 2]
    return ops.reshape(edges, ops.concat([ops.shape(x), np.array([2], np.int64)], 0))
