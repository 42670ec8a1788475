"""``tf.image``'s boxes: greedy non-max suppression over one image's boxes, as the ONNX
``NonMaxSuppression`` op (one batch, one class) so a frozen detector keeps it on the edge, and
``draw_bounding_boxes`` (a trainer kernel: pictures for summaries)."""

from __future__ import annotations

import numpy as np

from trainer import ops
from trainer.graph import TRAINER_DOMAIN, get_default_graph
from trainer.random_ops import get_seed

__all__ = ["combined_non_max_suppression", "draw_bounding_boxes", "non_max_suppression",
           "non_max_suppression_overlaps", "non_max_suppression_padded", "non_max_suppression_with_scores",
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


def _int32(value):
    """A Python number as an int32 constant (its value stays known to shape inference)."""
    if isinstance(value, (int, np.integer)):
        return ops.constant(np.int32(value))
    return ops.cast(ops.convert_to_tensor(value), np.int32)


def non_max_suppression_padded(boxes, scores, max_output_size, iou_threshold: float = 0.5,
                               score_threshold: float = float("-inf"), pad_to_max_output_size: bool = False,
                               name=None):
    """``(selected_indices, valid_outputs)``: ``non_max_suppression``'s indices, zero-padded to
    ``max_output_size`` when ``pad_to_max_output_size``, and how many of them are real (int32)."""
    selected = non_max_suppression(boxes, scores, max_output_size, iou_threshold, score_threshold, name=name)
    valid = ops.cast(ops.make_op("Size", [selected]).outputs[0], np.int32)
    if not pad_to_max_output_size:
        return selected, valid
    limit = ops.cast(ops.convert_to_tensor(max_output_size), np.int64)
    missing = ops.reshape(limit - ops.cast(valid, np.int64), [1])
    pads = ops.make_op("Concat", [ops.constant(np.zeros(1, np.int64)), missing], {"axis": 0}).outputs[0]
    padded = ops.make_op("Pad", [selected, pads, ops.constant(np.int32(0))]).outputs[0]
    if isinstance(max_output_size, int):
        padded.set_shape((max_output_size,))
    return padded, valid


def non_max_suppression_overlaps(overlaps, scores, max_output_size, overlap_threshold: float = 0.5,
                                 score_threshold: float = float("-inf"), name=None):
    """Greedy NMS with a given ``overlaps`` [n, n] matrix instead of IoU: int32 indices of at most
    ``max_output_size`` boxes, best score first; box j is dropped once a kept box i has
    ``overlaps[j, i] > overlap_threshold``."""
    o = ops.cast(ops.convert_to_tensor(overlaps), np.float32)
    s = ops.cast(ops.convert_to_tensor(scores), np.float32)
    if o.shape is not None and (len(o.shape) != 2 or None not in o.shape and o.shape[0] != o.shape[1]):
        raise ValueError(f"non_max_suppression_overlaps: overlaps must be a square [num_boxes, num_boxes] "
                         f"matrix, got shape {o.shape}")
    if s.shape is not None and len(s.shape) != 1:
        raise ValueError(f"non_max_suppression_overlaps: scores must be [num_boxes], got shape {s.shape}")
    inputs = [o, s, _int32(max_output_size),
              ops.cast(ops.convert_to_tensor(overlap_threshold), np.float32),
              ops.cast(ops.convert_to_tensor(score_threshold), np.float32)]
    return ops.make_op("NonMaxSuppressionWithOverlaps", inputs, domain=TRAINER_DOMAIN,
                       name=name or "non_max_suppression_overlaps").outputs[0]


def combined_non_max_suppression(boxes, scores, max_output_size_per_class, max_total_size,
                                 iou_threshold: float = 0.5, score_threshold: float = float("-inf"),
                                 pad_per_class: bool = False, clip_boxes: bool = True, name=None):
    """Per-class greedy NMS over a batch, then the best ``max_total_size`` detections of each image:
    ``(nmsed_boxes [batch, size, 4], nmsed_scores [batch, size], nmsed_classes [batch, size],
    valid_detections [batch])``, zero-padded past the valid ones. ``boxes`` is [batch, num_boxes,
    q, 4] (q = 1: shared by all classes, or one box per class), ``scores`` [batch, num_boxes,
    num_classes]."""
    b = ops.cast(ops.convert_to_tensor(boxes), np.float32)
    s = ops.cast(ops.convert_to_tensor(scores), np.float32)
    inputs = [b, s, _int32(max_output_size_per_class), _int32(max_total_size),
              ops.cast(ops.convert_to_tensor(iou_threshold), np.float32),
              ops.cast(ops.convert_to_tensor(score_threshold), np.float32)]
    node = ops.make_op("CombinedNonMaxSuppression", inputs,
                       {"pad_per_class": int(bool(pad_per_class)), "clip_boxes": int(bool(clip_boxes))},
                       domain=TRAINER_DOMAIN, name=name or "combined_non_max_suppression")
    return tuple(node.outputs)


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
