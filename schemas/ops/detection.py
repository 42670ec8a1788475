"""Detection ops: non-max suppression, RoI pooling and deformable convolution."""

from __future__ import annotations

from schemas.ops.nn import conv_output_types
from schemas.ops.rules import INT64
from schemas.registry import Attr, TensorType, op


@op(
    "NonMaxSuppression",
    inputs=["boxes", "scores", "max_output_boxes_per_class?", "iou_threshold?", "score_threshold?"],
    outputs=["selected_indices"],
    attrs={"center_point_box": Attr("int", 0)},
)
def _non_max_suppression(ctx):
    # how many boxes survive depends on the data: rows of (batch, class, box)
    return [TensorType(INT64, (None, 3))]


@op(
    "RoiAlign",
    inputs=["X", "rois", "batch_indices"],
    outputs=["Y"],
    attrs={
        "coordinate_transformation_mode": Attr("string", "half_pixel"),
        "mode": Attr("string", "avg"),
        "output_height": Attr("int", 1),
        "output_width": Attr("int", 1),
        "sampling_ratio": Attr("int", 0),
        "spatial_scale": Attr("float", 1.0),
    },
)
def _roi_align(ctx):
    x, rois = ctx.input(0), ctx.input(1)
    if x.shape is not None and len(x.shape) != 4:
        raise ctx.fail(f"X must be (N, C, H, W), got shape {x.shape}")
    num_rois = None if rois.shape is None else rois.shape[0]
    channels = None if x.shape is None else x.shape[1]
    a = ctx.attrs
    return [TensorType(x.dtype, (num_rois, channels, a["output_height"], a["output_width"]))]


@op(
    "DeformConv",
    inputs=["X", "W", "offset", "B?", "mask?"],
    outputs=["Y"],
    attrs={
        "dilations": Attr("ints"),
        "group": Attr("int", 1),
        "kernel_shape": Attr("ints"),
        "offset_group": Attr("int", 1),
        "pads": Attr("ints"),
        "strides": Attr("ints"),
    },
)
def _deform_conv(ctx):
    return conv_output_types(ctx)
