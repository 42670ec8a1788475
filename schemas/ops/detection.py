"""Detection ops: non-max suppression, RoI pooling and deformable convolution."""

from __future__ import annotations

import numpy as np

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


D = "flowstack"


@op("CombinedNonMaxSuppression", domain=D,
    inputs=["boxes", "scores", "max_output_size_per_class", "max_total_size", "iou_threshold", "score_threshold"],
    outputs=["nmsed_boxes", "nmsed_scores", "nmsed_classes", "valid_detections"],
    attrs={"pad_per_class": Attr("int", 0), "clip_boxes": Attr("int", 1)},
    doc="TF's batched per-class NMS: boxes [batch, n, q, 4], scores [batch, n, classes]; the best "
        "max_total_size detections of each image across classes, zero-padded, and how many are valid.")
def _combined_non_max_suppression(ctx):
    boxes, scores = ctx.input(0), ctx.input(1)
    if boxes.shape is not None and (len(boxes.shape) != 4 or boxes.shape[3] not in (4, None)):
        raise ctx.fail(f"boxes must be [batch, num_boxes, q, 4], got shape {boxes.shape}")
    if scores.shape is not None and len(scores.shape) != 3:
        raise ctx.fail(f"scores must be [batch, num_boxes, num_classes], got shape {scores.shape}")
    batch = None if boxes.shape is None else boxes.shape[0]
    total, per_class = ctx.value(3), ctx.value(2)
    classes = None if scores.shape is None else scores.shape[2]
    size = None if total is None else int(total)
    if size is not None and ctx.attrs["pad_per_class"]:
        size = None if per_class is None or classes is None else min(size, int(per_class) * classes)
    return [TensorType(np.dtype(np.float32), (batch, size, 4)), TensorType(np.dtype(np.float32), (batch, size)),
            TensorType(np.dtype(np.float32), (batch, size)), TensorType(np.dtype(np.int32), (batch,))]


op("NonMaxSuppressionWithOverlaps", domain=D,
   inputs=["overlaps", "scores", "max_output_size", "overlap_threshold", "score_threshold"],
   outputs=["selected_indices"],
   doc="Greedy NMS over a given [n, n] overlap matrix (TF's): int32 indices, best score first.")(
    lambda ctx: [TensorType(np.dtype(np.int32), (None,))])
