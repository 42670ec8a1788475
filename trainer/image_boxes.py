"""``tf.image``'s boxes: greedy non-max suppression over one image's boxes, as the ONNX
``NonMaxSuppression`` op (one batch, one class) so a frozen detector keeps it on the edge, and
``draw_bounding_boxes`` (a trainer kernel: pictures for summaries)."""

from __future__ import annotations

import numpy as np

from trainer import ops
from trainer.graph import TRAINER_DOMAIN, get_default_graph
from trainer.random_ops import get_seed

__all__ = ["draw_bounding_boxes", "non_max_suppression", "non_max_suppression_with_scores",
           "sample_distorted_bounding_box"]


def non_max_suppression(boxes, scores, max_output_size, iou_threshold: float = 0.5,
                        score_threshold: float = float("-inf"), name=None):
    """Indices (int32) of at most ``max_output_size`` boxes [y1, x1, y2, x2], best score first,
    each dropping the later boxes it overlaps by IoU above ``iou_threshold``; boxes scoring
    ``score_threshold`` or less are never selected."""
    b, s = ops.cast(ops.convert_to_tensor(boxes), np.float32), ops.cast(ops.convert_to_tensor(scores), np.float32)
    if b.shape is not None and (len(b.shape) != 2 or b.shape[1] not in (4, None)):
        raise ValueError(f"non_max_suppression: boxes must be [num_boxes, 4], got shape {b.shape}")
    if s.shape is not None and len(s.shape) != 1:
        raise ValueError(f"non_max_suppression: scores must be [num_boxes], got shape {s.shape}")
    limit = ops.reshape(ops.cast(ops.convert_to_tensor(max_output_size), np.int64), [1])
    iou = ops.reshape(ops.cast(ops.convert_to_tensor(iou_threshold), np.float32), [1])
    floor = None if score_threshold == float("-inf") else ops.constant(np.float32([score_threshold]))
    inputs = [ops.reshape(b, [1, -1, 4]), ops.reshape(s, [1, 1, -1]), limit, iou, floor]  # one batch, one class
    selected = ops.make_op("NonMaxSuppression", inputs, name=name or "non_max_suppression").outputs[0]
    return ops.cast(selected[:, 2], np.int32)


def non_max_suppression_with_scores(boxes, scores, max_output_size, iou_threshold: float = 0.5,
                                    score_threshold: float = float("-inf"), soft_nms_sigma: float = 0.0, name=None):
    """``non_max_suppression``'s indices and the selected boxes' scores (hard NMS only)."""
    if soft_nms_sigma != 0.0:
        raise NotImplementedError("non_max_suppression_with_scores: soft_nms_sigma > 0 (Soft-NMS) is not supported")
    selected = non_max_suppression(boxes, scores, max_output_size, iou_threshold, score_threshold, name=name)
    return selected, ops.gather(ops.convert_to_tensor(scores), selected)


def draw_bounding_boxes(images, boxes, name=None, colors=None):
    """Outline each box [y_min, x_min, y_max, x_max] (fractions of the image) one pixel wide in the
    float batch ``images`` [N, H, W, C], box i in ``colors[i % len(colors)]`` (RGBA rows) or in
    TensorFlow's default table."""
    x = ops.convert_to_tensor(images)
    if np.dtype(x.dtype).kind != "f":
        raise TypeError(f"draw_bounding_boxes: images must be float (convert_image_dtype first), got {x.dtype}")
    b = ops.cast(ops.convert_to_tensor(boxes), np.float32)
    c = None if colors is None else ops.cast(ops.convert_to_tensor(colors), np.float32)
    node = ops.make_op("DrawBoundingBoxes", [x, b, c], domain=TRAINER_DOMAIN, name=name or "draw_bounding_boxes")
    return node.outputs[0]


def sample_distorted_bounding_box(image_size, bounding_boxes, seed=None, seed2=None, min_object_covered=0.1,
                                  aspect_ratio_range=None, area_range=None, max_attempts=None,
                                  use_image_if_no_bounding_boxes=None, name=None):
    """A random crop for data augmentation (Inception's): ``(begin, size, bboxes)``, ``begin`` and
    ``size`` for ``tf.slice(image, begin, size)``, ``bboxes`` the crop as a box [1, 1, 4]. The crop
    has an aspect ratio in ``aspect_ratio_range``, an area fraction in ``area_range`` and covers at
    least ``min_object_covered`` of one of ``bounding_boxes`` [batch, n, 4]; the whole image when
    ``max_attempts`` draws all fail."""
    graph = get_default_graph()
    seed1, op_seed = get_seed(seed, graph)
    size = ops.convert_to_tensor(image_size)
    attrs = {"aspect_ratio_range": [float(v) for v in aspect_ratio_range or (0.75, 1.33)],
             "area_range": [float(v) for v in area_range or (0.05, 1.0)], "max_attempts": int(max_attempts or 100),
             "use_image_if_no_bounding_boxes": int(bool(use_image_if_no_bounding_boxes)),
             "seed": seed1, "seed2": int(seed2) if seed2 else op_seed}
    inputs = [size, ops.cast(ops.convert_to_tensor(bounding_boxes), np.float32),
              ops.cast(ops.convert_to_tensor(min_object_covered), np.float32)]
    node = ops.make_op("SampleDistortedBoundingBox", inputs, attrs, domain=TRAINER_DOMAIN,
                       name=name or "sample_distorted_bounding_box")
    node.attrs["stream"] = node.name
    return tuple(node.outputs)
