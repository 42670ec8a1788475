"""Image codecs (domain ``flowstack``), with TensorFlow 1.x's names: encoded bytes (a scalar string)
to an image [height, width, channels] and back. Kernels: trainer/kernels/image.py (Pillow, in the
trainer only, so a frozen model whose output depends on a decoder is refused at export).

ONNX's ImageDecoder (opset 20) runs in the edge runtime (edge_runtime/kernels/image.py): PNG, BMP
and the anymaps in NumPy alone, JPEG, TIFF, WebP and JPEG 2000 through Pillow where it is installed.

Height and width depend on the data, so they are unknown; the channels are known when the
``channels`` attribute names them (0: as the file stores them).
"""

from __future__ import annotations

import numpy as np

from schemas.registry import Attr, TensorType, op

D = "flowstack"
_UINT8 = np.dtype(np.uint8)
_STRING = np.dtype(object)

_JPEG_ATTRS = {"channels": Attr("int", 0), "ratio": Attr("int", 1), "fancy_upscaling": Attr("int", 1),
               "try_recover_truncated": Attr("int", 0), "acceptable_fraction": Attr("float", 1.0),
               "dct_method": Attr("string", "")}


def _scalar_contents(ctx) -> None:
    shape = ctx.input(0).shape
    if shape is not None and len(shape) != 0:
        raise ctx.fail(f"contents must be a scalar string, got shape {shape}")


def _image(dtype, rank: int = 3):
    def rule(ctx):
        _scalar_contents(ctx)
        channels = ctx.attrs.get("channels", 3) or None
        return [TensorType(np.dtype(dtype(ctx)) if callable(dtype) else dtype, (None,) * (rank - 1) + (channels,))]
    return rule


op("DecodeJpeg", domain=D, inputs=["contents"], outputs=["image"], attrs=_JPEG_ATTRS,
   doc="A JPEG (or PNG, or a GIF's first frame) to uint8 [h, w, channels]; ratio 1/2/4/8 shrinks it while "
       "decoding; try_recover_truncated and acceptable_fraction < 1 accept truncated data.")(_image(_UINT8))
op("DecodeAndCropJpeg", domain=D, inputs=["contents", "crop_window"], outputs=["image"], attrs=_JPEG_ATTRS,
   doc="DecodeJpeg, then the window crop_window = [y, x, height, width] (int32) of the decoded image.")(
    _image(_UINT8))
op("DecodePng", domain=D, inputs=["contents"], outputs=["image"],
   attrs={"channels": Attr("int", 0), "dtype": Attr("string", "uint8")},
   doc="A PNG (or JPEG, or a GIF's first frame) to [h, w, channels] of dtype uint8 or uint16.")(
    _image(lambda ctx: ctx.attrs["dtype"]))
op("DecodeGif", domain=D, inputs=["contents"], outputs=["image"],
   doc="Every frame of a GIF (or a PNG or JPEG as one frame) to uint8 RGB [frames, h, w, 3].")(
    _image(_UINT8, rank=4))
op("DecodeBmp", domain=D, inputs=["contents"], outputs=["image"], attrs={"channels": Attr("int", 0)},
   doc="A BMP to uint8 [h, w, channels] (channels 0, 3 or 4).")(_image(_UINT8))


@op("DecodeImage", domain=D, inputs=["contents"], outputs=["image"],
    attrs={"channels": Attr("int", 0), "dtype": Attr("string", "uint8"), "expand_animations": Attr("int", 1)},
    doc="A BMP, GIF, JPEG or PNG, told apart by their first bytes, to [h, w, channels] (a GIF to "
        "[frames, h, w, 3] while expand_animations, else its first frame), converted to dtype as "
        "convert_image_dtype does (uint16 PNGs keep their 16 bits).")
def _decode_image(ctx):
    _scalar_contents(ctx)
    channels = ctx.attrs["channels"] or None
    shape = None if ctx.attrs["expand_animations"] else (None, None, channels)
    return [TensorType(np.dtype(ctx.attrs["dtype"]), shape)]


@op("ExtractJpegShape", domain=D, inputs=["contents"], outputs=["image_shape"],
    attrs={"output_type": Attr("string", "int32")},
    doc="A JPEG's [height, width, channels], read from its header without decoding it.")
def _extract_jpeg_shape(ctx):
    _scalar_contents(ctx)
    return [TensorType(np.dtype(ctx.attrs["output_type"]), (3,))]


@op("IsJpeg", domain=D, inputs=["contents"], outputs=["is_jpeg"],
    doc="Whether the bytes start as a JPEG does (FF D8 FF); TensorFlow composes this from substr.")
def _is_jpeg(ctx):
    _scalar_contents(ctx)
    return [TensorType(np.dtype(bool), ())]


def _encoded(ctx):
    shape = ctx.input(0).shape
    if shape is not None and len(shape) != 3:
        raise ctx.fail(f"image must be 3-D [height, width, channels], got shape {shape}")
    return [TensorType(_STRING, ())]


op("EncodeJpeg", domain=D, inputs=["image"], outputs=["contents"],
   attrs={"format": Attr("string", ""), "quality": Attr("int", 95), "progressive": Attr("int", 0),
          "optimize_size": Attr("int", 0), "chroma_downsampling": Attr("int", 1),
          "density_unit": Attr("string", "in"), "x_density": Attr("int", 300), "y_density": Attr("int", 300),
          "xmp_metadata": Attr("string", "")},
   doc="A uint8 image [h, w, 1 or 3] to JPEG bytes (format '' by channels, 'grayscale' or 'rgb').")(_encoded)
op("EncodePng", domain=D, inputs=["image"], outputs=["contents"], attrs={"compression": Attr("int", -1)},
   doc="A uint8 or uint16 image [h, w, 1 to 4] to PNG bytes (compression -1: the default, 0-9).")(_encoded)


@op("DrawBoundingBoxes", domain=D, inputs=["images", "boxes", "colors?"], outputs=["output"],
    doc="Outlines of boxes [batch, n, 4] (y_min, x_min, y_max, x_max as fractions of the image) drawn one "
        "pixel wide into float images [batch, h, w, depth]; box i in colors[i mod len] (RGBA rows), or "
        "TensorFlow's table of ten.")
def _draw_bounding_boxes(ctx):
    images = ctx.input(0)
    if images.shape is not None and len(images.shape) != 4:
        raise ctx.fail(f"images must be [batch, height, width, depth], got shape {images.shape}")
    return [images]


@op("SampleDistortedBoundingBox", domain=D, inputs=["image_size", "bounding_boxes", "min_object_covered"],
    outputs=["begin", "size", "bboxes"], stateful=True,
    attrs={"aspect_ratio_range": Attr("floats", (0.75, 1.33)), "area_range": Attr("floats", (0.05, 1.0)),
           "max_attempts": Attr("int", 100), "use_image_if_no_bounding_boxes": Attr("int", 0),
           "seed": Attr("int", 0), "seed2": Attr("int", 0), "stream": Attr("string", "")},
    doc="A random crop of an image [h, w, c] covering at least min_object_covered of one of the boxes "
        "[batch, n, 4], as TensorFlow draws it (whole image after max_attempts failures): begin [y, x, 0] "
        "and size [h, w, -1] for slice, and the crop as a box [1, 1, 4]. Fresh crops every run from the "
        "op's own generator, seeded by (seed, seed2) when either is set.")
def _sample_distorted_bounding_box(ctx):
    dtype = ctx.input(0).dtype
    return [TensorType(dtype, (3,)), TensorType(dtype, (3,)), TensorType(np.dtype(np.float32), (1, 1, 4))]


# ImageDecoder's pixel formats -> channels of its output
_IMAGE_DECODER_CHANNELS = {"RGB": 3, "BGR": 3, "Grayscale": 1}


@op("ImageDecoder", inputs=["encoded_stream"], outputs=["image"], attrs={"pixel_format": Attr("string", "RGB")})
def _image_decoder(ctx):
    """Encoded image bytes (a uint8 vector) to uint8 (height, width, channels), channels last."""
    pixel_format = ctx.attrs["pixel_format"]
    if pixel_format not in _IMAGE_DECODER_CHANNELS:
        raise ctx.fail(f"pixel_format must be one of {tuple(_IMAGE_DECODER_CHANNELS)}, got {pixel_format!r}")
    shape = ctx.input(0).shape
    if shape is not None and len(shape) != 1:
        raise ctx.fail(f"encoded_stream must be a 1-D uint8 tensor of the file's bytes, got shape {shape}")
    return [TensorType(_UINT8, (None, None, _IMAGE_DECODER_CHANNELS[pixel_format]))]
