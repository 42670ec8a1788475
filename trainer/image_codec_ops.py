"""TensorFlow 1.x's image codec functions (``tf.image.decode_jpeg`` ... ``tf.io.encode_png``): graph
ops over a scalar string of encoded bytes (ops: schemas/ops/image.py; kernels: trainer/kernels/image.py).

They decode as the session runs, so they belong to input pipelines (a reader's values, or
``tf.read_file`` in ``Dataset.map``); the exporter refuses to freeze an output that depends on one.
"""

from __future__ import annotations

import numpy as np

from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import convert_to_tensor, make_op

__all__ = ["decode_and_crop_jpeg", "decode_bmp", "decode_gif", "decode_image", "decode_jpeg", "decode_png",
           "encode_jpeg", "encode_png", "extract_jpeg_shape", "is_jpeg"]


def _contents(value) -> Tensor:
    return value if isinstance(value, Tensor) else convert_to_tensor(np.asarray(value, dtype=object))


def _dtype(dtype) -> np.dtype:
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))


def _op(op_type: str, inputs: list, attrs: dict, name: str | None) -> Tensor:
    return make_op(op_type, inputs, attrs, domain=TRAINER_DOMAIN, name=name or op_type).outputs[0]


def _jpeg_attrs(channels, ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction, dct_method) -> dict:
    if channels not in (0, 1, 3):
        raise ValueError(f"decode_jpeg: channels must be 0, 1 or 3, got {channels}")
    if ratio not in (1, 2, 4, 8):
        raise ValueError(f"decode_jpeg: ratio must be 1, 2, 4 or 8, got {ratio}")
    # dct_method ('INTEGER_FAST', 'INTEGER_ACCURATE') is a speed hint TensorFlow may ignore; so does Pillow.
    return {"channels": int(channels), "ratio": int(ratio), "fancy_upscaling": int(bool(fancy_upscaling)),
            "try_recover_truncated": int(bool(try_recover_truncated)),
            "acceptable_fraction": float(acceptable_fraction), "dct_method": dct_method or ""}


def decode_jpeg(contents, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                try_recover_truncated: bool = False, acceptable_fraction: float = 1, dct_method: str = "",
                name: str | None = None) -> Tensor:
    """A JPEG's pixels, uint8 [height, width, channels] (0: as stored, 1: gray, 3: RGB), shrunk by
    1/``ratio`` while decoding. PNGs and a GIF's first frame decode too, as in TensorFlow."""
    attrs = _jpeg_attrs(channels, ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction, dct_method)
    return _op("DecodeJpeg", [_contents(contents)], attrs, name)


def decode_and_crop_jpeg(contents, crop_window, channels: int = 0, ratio: int = 1, fancy_upscaling: bool = True,
                         try_recover_truncated: bool = False, acceptable_fraction: float = 1, dct_method: str = "",
                         name: str | None = None) -> Tensor:
    """``decode_jpeg``, then the window ``crop_window`` = [y, x, height, width] of the image."""
    attrs = _jpeg_attrs(channels, ratio, fancy_upscaling, try_recover_truncated, acceptable_fraction, dct_method)
    window = crop_window if isinstance(crop_window, Tensor) else convert_to_tensor(np.asarray(crop_window, np.int32))
    return _op("DecodeAndCropJpeg", [_contents(contents), window], attrs, name)


def decode_png(contents, channels: int = 0, dtype=np.uint8, name: str | None = None) -> Tensor:
    """A PNG's pixels [height, width, channels] (0: as stored, 1, 3 or 4), uint8 or uint16."""
    if channels not in (0, 1, 3, 4):
        raise ValueError(f"decode_png: channels must be 0, 1, 3 or 4, got {channels}")
    if _dtype(dtype) not in (np.uint8, np.uint16):
        raise TypeError(f"decode_png: dtype must be uint8 or uint16, got {_dtype(dtype)}")
    return _op("DecodePng", [_contents(contents)], {"channels": int(channels), "dtype": _dtype(dtype).name}, name)


def decode_gif(contents, name: str | None = None) -> Tensor:
    """Every frame of a GIF, uint8 RGB [frames, height, width, 3]."""
    return _op("DecodeGif", [_contents(contents)], {}, name)


def decode_bmp(contents, channels: int = 0, name: str | None = None) -> Tensor:
    """A BMP's pixels, uint8 [height, width, channels] (0: as stored, 3 or 4)."""
    if channels not in (0, 3, 4):
        raise ValueError(f"decode_bmp: channels must be 0, 3 or 4, got {channels}")
    return _op("DecodeBmp", [_contents(contents)], {"channels": int(channels)}, name)


def decode_image(contents, channels: int | None = None, dtype=np.uint8, name: str | None = None,
                 expand_animations: bool = True) -> Tensor:
    """A BMP, GIF, JPEG or PNG, told apart by its first bytes, as ``dtype`` (scaled as
    ``convert_image_dtype`` does): [height, width, channels], or a GIF's [frames, height, width, 3]
    while ``expand_animations`` (else its first frame)."""
    channels = channels or 0
    if channels not in (0, 1, 3, 4):
        raise ValueError(f"decode_image: channels must be 0, 1, 3 or 4, got {channels}")
    return _op("DecodeImage", [_contents(contents)],
               {"channels": int(channels), "dtype": _dtype(dtype).name,
                "expand_animations": int(bool(expand_animations))}, name)


def extract_jpeg_shape(contents, output_type=np.int32, name: str | None = None) -> Tensor:
    """A JPEG's [height, width, channels], read from its header without decoding the pixels."""
    return _op("ExtractJpegShape", [_contents(contents)], {"output_type": _dtype(output_type).name}, name)


def is_jpeg(contents, name: str | None = None) -> Tensor:
    """Whether ``contents`` starts as a JPEG does (a bool scalar)."""
    return _op("IsJpeg", [_contents(contents)], {}, name)


def encode_jpeg(image, format: str = "", quality: int = 95, progressive: bool = False,  # noqa: A002
                optimize_size: bool = False, chroma_downsampling: bool = True, density_unit: str = "in",
                x_density: int = 300, y_density: int = 300, xmp_metadata: str = "", name: str | None = None) -> Tensor:
    """A uint8 image [height, width, 1 or 3] as JPEG bytes (a scalar string)."""
    if format not in ("", "grayscale", "rgb"):
        raise ValueError(f"encode_jpeg: format must be '', 'grayscale' or 'rgb', got {format!r}")
    attrs = {"format": format, "quality": int(quality), "progressive": int(bool(progressive)),
             "optimize_size": int(bool(optimize_size)), "chroma_downsampling": int(bool(chroma_downsampling)),
             "density_unit": density_unit, "x_density": int(x_density), "y_density": int(y_density),
             "xmp_metadata": xmp_metadata}
    return _op("EncodeJpeg", [convert_to_tensor(image)], attrs, name)


def encode_png(image, compression: int = -1, name: str | None = None) -> Tensor:
    """A uint8 or uint16 image [height, width, 1 to 4] as PNG bytes (``compression`` -1 or 0-9)."""
    return _op("EncodePng", [convert_to_tensor(image)], {"compression": int(compression)}, name)
