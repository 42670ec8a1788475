"""``tf.image``'s color spaces and color adjustments (TF 1.15's formulas), built from flowstack's
element-wise ops so they differentiate: ``convert_image_dtype``, HSV/YIQ/YUV conversions, hue,
saturation and gamma, the random variants, and the image-quality measures (``psnr``,
``total_variation``, ``image_gradients``) and ``adjust_jpeg_quality`` (an encode/decode round trip)."""

from __future__ import annotations

import math

import numpy as np

from trainer import ops
from trainer.array_ops import clip_by_value, floormod, pad, reduce_max, reduce_mean, reduce_min, reduce_sum, stack, \
    tensordot, unstack, where
from trainer.image_codec_ops import decode_jpeg, encode_jpeg
from trainer.random_ops import random_uniform

__all__ = ["adjust_gamma", "adjust_hue", "adjust_jpeg_quality", "adjust_saturation", "convert_image_dtype",
           "hsv_to_rgb", "image_gradients", "psnr", "random_hue", "random_saturation", "rgb_to_hsv", "rgb_to_yiq",
           "rgb_to_yuv", "total_variation", "yiq_to_rgb", "yuv_to_rgb"]


def convert_image_dtype(image, dtype, saturate: bool = False, name=None):
    """Between integer images (0..max of the type) and float images (0..1), scaling as TF does."""
    x = ops.convert_to_tensor(image)
    src, dst = np.dtype(x.dtype), np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    if src == dst:
        return ops.identity(x, name=name)
    if src.kind == "f" and dst.kind == "f":
        return ops.cast(x, dst, name=name)
    if src.kind in "iu" and dst.kind == "f":
        return ops.cast(x, dst) * float(1.0 / np.iinfo(src).max)
    if src.kind == "f" and dst.kind in "iu":
        scaled = x * float(np.iinfo(dst).max + 0.5)
        if saturate:
            scaled = clip_by_value(scaled, 0.0, float(np.iinfo(dst).max))
        return ops.cast(scaled, dst, name=name)
    # integer to integer: shift to keep the scale
    shift = int(np.iinfo(dst).max).bit_length() - int(np.iinfo(src).max).bit_length()  # int32 has 31 value bits
    scale = float(2.0 ** shift)
    return ops.cast(ops.cast(x, np.float64) * scale, dst, name=name)


# TF 1.15's color-space matrices: a pixel row [r, g, b] times the matrix.
_RGB_TO_YIQ = [[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617], [0.114, -0.32134392, 0.31119955]]
_YIQ_TO_RGB = [[1, 1, 1], [0.95598634, -0.27201283, -1.10674021], [0.6208248, -0.64720424, 1.70423049]]
_RGB_TO_YUV = [[0.299, -0.14714119, 0.61497538], [0.587, -0.28886916, -0.51496512], [0.114, 0.43601035, -0.10001026]]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _float_image(images):
    x = ops.convert_to_tensor(images)
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"tf.image: expected a float image (convert_image_dtype first), got {x.dtype}")
    if x.shape is not None and x.shape[-1] not in (3, None):
        raise ValueError(f"tf.image: expected 3 channels (RGB), got shape {x.shape}")
    return x


def _mix(images, matrix):
    x = _float_image(images)
    rank = len(x.shape) if x.shape is not None else 4
    return tensordot(x, ops.constant(np.asarray(matrix, np.dtype(x.dtype))), axes=[[rank - 1], [0]])


def rgb_to_yiq(images):
    return _mix(images, _RGB_TO_YIQ)


def yiq_to_rgb(images):
    return _mix(images, _YIQ_TO_RGB)


def rgb_to_yuv(images):
    return _mix(images, _RGB_TO_YUV)


def yuv_to_rgb(images):
    return _mix(images, _YUV_TO_RGB)


def rgb_to_hsv(images, name=None):
    """RGB in [0, 1] to hue, saturation and value in [0, 1] (hue 0 where the pixel is gray)."""
    x = _float_image(images)
    r, g, b = unstack(x, axis=-1)
    value = reduce_max(x, axis=-1)
    spread = value - reduce_min(x, axis=-1)
    safe_spread = where(spread > 0, spread, ops.ones_like(spread))
    saturation = where(value > 0, spread / where(value > 0, value, ops.ones_like(value)), ops.zeros_like(value))
    hue = where(ops.equal(value, r), (g - b) / safe_spread,
                where(ops.equal(value, g), 2.0 + (b - r) / safe_spread, 4.0 + (r - g) / safe_spread))
    hue = where(spread > 0, floormod(hue / 6.0, 1.0), ops.zeros_like(hue))
    return stack([hue, saturation, value], axis=-1, name=name)


def hsv_to_rgb(images, name=None):
    """Hue, saturation and value in [0, 1] to RGB: channel n is v - v s clip(min(k, 4 - k), 0, 1),
    k = (n + 6 h) mod 6 for n = 5, 3, 1 (the piecewise formula in closed form)."""
    hue, saturation, value = unstack(_float_image(images), axis=-1)
    channels = []
    for n in (5.0, 3.0, 1.0):
        k = floormod(n + hue * 6.0, 6.0)
        channels.append(value - value * saturation * clip_by_value(ops.minimum(k, 4.0 - k), 0.0, 1.0))
    return stack(channels, axis=-1, name=name)


def _in_hsv(image, change):
    """``change`` applied to the image's HSV channels; the result in the image's dtype."""
    x = ops.convert_to_tensor(image)
    dtype = np.dtype(x.dtype)
    hue, saturation, value = unstack(rgb_to_hsv(convert_image_dtype(x, np.float32)), axis=-1)
    rgb = hsv_to_rgb(stack(change(hue, saturation, value), axis=-1))
    return convert_image_dtype(rgb, dtype, saturate=True)


def adjust_hue(image, delta, name=None):
    """Rotate the hue by ``delta`` (a fraction of the circle, in [-1, 1])."""
    return _in_hsv(image, lambda h, s, v: [floormod(h + delta, 1.0), s, v])


def adjust_saturation(image, saturation_factor, name=None):
    """Scale the saturation by ``saturation_factor``, clipped to [0, 1]."""
    return _in_hsv(image, lambda h, s, v: [h, clip_by_value(s * saturation_factor, 0.0, 1.0), v])


def random_hue(image, max_delta: float, seed=None):
    if not 0 <= max_delta <= 0.5:
        raise ValueError(f"random_hue: max_delta must be in [0, 0.5], got {max_delta}")
    return adjust_hue(image, random_uniform([], -max_delta, max_delta, seed=seed))


def random_saturation(image, lower: float, upper: float, seed=None):
    if not 0 <= lower < upper:
        raise ValueError(f"random_saturation: need 0 <= lower < upper, got {lower}, {upper}")
    return adjust_saturation(image, random_uniform([], lower, upper, seed=seed))


def adjust_gamma(image, gamma=1, gain=1):
    """gain * image ** gamma on the image as floats in [0, 1], back in its dtype (saturated)."""
    if isinstance(gamma, (int, float)) and gamma < 0:
        raise ValueError(f"adjust_gamma: gamma must be non-negative, got {gamma}")
    x = ops.convert_to_tensor(image)
    dtype = np.dtype(x.dtype)
    flt = x if dtype in (np.float16, np.float32) else convert_image_dtype(x, np.float32)
    return convert_image_dtype(gain * ops.pow(flt, gamma), dtype, saturate=True)


def adjust_jpeg_quality(image, jpeg_quality: int, name=None):
    """The image after a JPEG round trip at ``jpeg_quality`` (0-100), in its own dtype: one
    [height, width, 1 or 3] image; decodes with Pillow when the session runs."""
    x = ops.convert_to_tensor(image)
    if x.shape is not None and len(x.shape) != 3:
        raise ValueError(f"adjust_jpeg_quality: expected one image [height, width, channels], got shape {x.shape}")
    dtype = np.dtype(x.dtype)
    jpeg = encode_jpeg(convert_image_dtype(x, np.uint8, saturate=True), quality=int(jpeg_quality))
    decoded = decode_jpeg(jpeg, channels=int(x.shape[-1]) if x.shape is not None and x.shape[-1] else 0)
    decoded.set_shape(x.shape)
    return convert_image_dtype(decoded, dtype, name=name)


def image_gradients(image):
    """(dy, dx) of a batch [N, H, W, C]: the next row's (column's) pixel minus this one, 0 on the
    last row (column)."""
    x = ops.convert_to_tensor(image)
    if x.shape is None or len(x.shape) != 4:
        raise ValueError(f"image_gradients: expected a batch [N, H, W, C], got shape {x.shape}")
    dy = pad(x[:, 1:] - x[:, :-1], [[0, 0], [0, 1], [0, 0], [0, 0]])
    dx = pad(x[:, :, 1:] - x[:, :, :-1], [[0, 0], [0, 0], [0, 1], [0, 0]])
    return dy, dx


def total_variation(images, name=None):
    """The sum of absolute differences between neighboring pixels: per image for a batch."""
    x = ops.convert_to_tensor(images)
    if x.shape is None or len(x.shape) not in (3, 4):
        raise ValueError(f"total_variation: expected [H, W, C] or [N, H, W, C], got shape {x.shape}")
    if len(x.shape) == 3:
        return reduce_sum(ops.abs(x[1:] - x[:-1])) + reduce_sum(ops.abs(x[:, 1:] - x[:, :-1]))
    axes = [1, 2, 3]
    return ops.add(reduce_sum(ops.abs(x[:, 1:] - x[:, :-1]), axis=axes),
                   reduce_sum(ops.abs(x[:, :, 1:] - x[:, :, :-1]), axis=axes), name=name)


def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio in dB over the last three axes: 20 log10(max_val) - 10 log10(mse),
    integer images and ``max_val`` scaled to [0, 1] first, as in TF."""
    dtype = np.dtype(ops.convert_to_tensor(a).dtype)
    scale = 1.0 / np.iinfo(dtype).max if dtype.kind in "iu" else 1.0
    a32, b32 = convert_image_dtype(a, np.float32), convert_image_dtype(b, np.float32)
    mse = reduce_mean(ops.square(a32 - b32), axis=[-3, -2, -1])
    peak = ops.cast(max_val, np.float32) * scale
    return ops.subtract(20.0 / math.log(10.0) * ops.log(peak), 10.0 / math.log(10.0) * ops.log(mse), name=name)
