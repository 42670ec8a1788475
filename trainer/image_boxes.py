"""``tf.image``'s box selection: greedy non-max suppression over one image's boxes, as the ONNX
``NonMaxSuppression`` op (one batch, one class) so a frozen detector keeps it on the edge."""

from __future__ import annotations

import numpy as np

from trainer import ops

__all__ = ["non_max_suppression", "non_max_suppression_with_scores"]


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
