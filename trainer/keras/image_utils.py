"""``tf.keras.utils``' image helpers (``load_img``, ``img_to_array``, ``array_to_img``, ``save_img``) over
Pillow, the library trainer's image codecs use; imported when first called."""

from __future__ import annotations

import numpy as np

__all__ = ["array_to_img", "img_to_array", "load_img", "save_img"]

_INTERPOLATIONS = ("nearest", "bilinear", "bicubic", "hamming", "box", "lanczos")


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("tf.keras.utils' image functions need Pillow (pip install pillow)") from None
    return Image


def load_img(path, grayscale: bool = False, color_mode: str = "rgb", target_size=None,
             interpolation: str = "nearest"):
    """A PIL image from ``path`` in ``color_mode`` ("grayscale", "rgb", "rgba"), resized to ``target_size``
    (height, width) with ``interpolation``."""
    image_module = _pil()
    if grayscale:
        color_mode = "grayscale"
    modes = {"grayscale": "L", "rgb": "RGB", "rgba": "RGBA"}
    if color_mode not in modes:
        raise ValueError(f'color_mode must be "grayscale", "rgb", or "rgba", got {color_mode!r}')
    image = image_module.open(path)
    if image.mode != modes[color_mode]:
        image = image.convert(modes[color_mode])
    if target_size is not None:
        if interpolation not in _INTERPOLATIONS:
            raise ValueError(f"Invalid interpolation method {interpolation!r}; supported: {_INTERPOLATIONS}")
        height, width = target_size
        if image.size != (width, height):
            image = image.resize((width, height), getattr(image_module, interpolation.upper()))
    return image


def img_to_array(img, data_format=None, dtype="float32") -> np.ndarray:
    """[height, width, channels] (or channels first) values of a PIL image."""
    x = np.asarray(img, dtype=dtype)
    if x.ndim == 2:
        x = x[..., None]
    if x.ndim != 3:
        raise ValueError(f"Unsupported image shape: {x.shape}")
    return x.transpose(2, 0, 1) if data_format == "channels_first" else x


def array_to_img(x, data_format=None, scale: bool = True, dtype=None):
    """A PIL image of a [height, width, channels] array (1, 3 or 4 channels); ``scale`` maps its range to 0-255."""
    image_module = _pil()
    x = np.asarray(x, dtype="float32")
    if x.ndim != 3:
        raise ValueError(f"Expected image array to have rank 3 (single image). Got array with shape: {x.shape}")
    if data_format == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - x.min()
        top = x.max()
        if top != 0:
            x = x / top
        x = x * 255
    channels = x.shape[2]
    if channels not in (1, 3, 4):
        raise ValueError(f"Unsupported channel number: {channels}")
    pixels = x.astype("uint8")
    return image_module.fromarray(pixels[..., 0] if channels == 1 else pixels,
                                  {1: "L", 3: "RGB", 4: "RGBA"}[channels])


def save_img(path, x, data_format=None, file_format=None, scale: bool = True, **kwargs) -> None:
    array_to_img(x, data_format=data_format, scale=scale).save(path, format=file_format, **kwargs)
