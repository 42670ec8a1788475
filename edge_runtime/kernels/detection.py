"""Detection kernels: non-max suppression, RoiAlign and deformable convolution.

RoiAlign and DeformConv sample the input bilinearly at fractional positions; both build the four
corner indices and weights as arrays and gather once, so the work is array operations per RoI (the
sampling grid's size differs between RoIs) or per call (DeformConv).
"""

from __future__ import annotations

import math

from edge_runtime.kernels import sliding_windows
from edge_runtime.kernels.registry import kernel
from schemas.registry import UnsupportedOpError

# ---------------------------------------------------------------------------- NonMaxSuppression


def _corners(boxes, xp, center_point_box):
    """(y_min, x_min, y_max, x_max) from either box layout; corner boxes may list corners flipped."""
    if center_point_box:
        xc, yc, w, h = (boxes[..., i] for i in range(4))
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = (boxes[..., i] for i in range(4))
    return xp.minimum(y1, y2), xp.minimum(x1, x2), xp.maximum(y1, y2), xp.maximum(x1, x2)


def _suppresses(boxes, xp, center_point_box, iou_threshold):
    """(N, N) bool: box i suppresses box j (IoU above the threshold; empty boxes suppress nothing)."""
    y0, x0, y1, x1 = _corners(boxes, xp, center_point_box)
    area = (y1 - y0) * (x1 - x0)
    inter_h = xp.minimum(y1[:, None], y1[None, :]) - xp.maximum(y0[:, None], y0[None, :])
    inter_w = xp.minimum(x1[:, None], x1[None, :]) - xp.maximum(x0[:, None], x0[None, :])
    inter = xp.where((inter_h > 0) & (inter_w > 0), inter_h * inter_w, 0)
    union = area[:, None] + area[None, :] - inter
    valid = (inter > 0) & (area[:, None] > 0) & (area[None, :] > 0) & (union > 0)
    iou = inter / xp.where(valid, union, 1)
    return valid & (iou > iou_threshold)


@kernel("NonMaxSuppression")
def non_max_suppression(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold, *, xp,
                        center_point_box):
    limit = 0 if max_output_boxes_per_class is None or max_output_boxes_per_class.size == 0 \
        else max(int(max_output_boxes_per_class.reshape(-1)[0]), 0)
    iou = 0.0 if iou_threshold is None or iou_threshold.size == 0 else float(iou_threshold.reshape(-1)[0])
    selected = []
    for b in range(boxes.shape[0] if limit else 0):
        suppresses = _suppresses(boxes[b], xp, center_point_box, iou)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            # highest score first; equal scores keep box order (a stable sort of the negated scores)
            order = xp.argsort(-s, kind="stable")
            if score_threshold is not None and score_threshold.size:
                order = order[s[order] > score_threshold.reshape(-1)[0]]
            # greedy: keep the best remaining box, drop every box it suppresses, repeat
            kept = 0
            while order.size and kept < limit:
                best = int(order[0])
                selected.append((b, c, best))
                kept += 1
                order = order[1:][~suppresses[best, order[1:]]]
    return xp.asarray(selected, dtype=xp.int64).reshape(-1, 3)


def _greedy(order, limit: int, suppressed_by) -> list[int]:
    """Keep the best remaining candidate, drop those ``suppressed_by(candidates, kept)`` flags, repeat."""
    kept: list[int] = []
    while order.size and len(kept) < limit:
        best = int(order[0])
        kept.append(best)
        rest = order[1:]
        order = rest[~suppressed_by(rest, best)]
    return kept


def _scalar(value, default):
    return default if value is None or value.size == 0 else value.reshape(-1)[0]


@kernel("NonMaxSuppressionWithOverlaps", "flowstack")
def non_max_suppression_with_overlaps(overlaps, scores, max_output_size, overlap_threshold, score_threshold, *, xp):
    if overlaps.ndim != 2 or overlaps.shape[0] != overlaps.shape[1] or scores.shape != overlaps.shape[:1]:
        raise ValueError(f"NonMaxSuppressionWithOverlaps: overlaps must be [n, n] and scores [n], got "
                         f"{overlaps.shape} and {scores.shape}")
    limit = int(_scalar(max_output_size, 0))
    if limit < 0:
        raise ValueError(f"NonMaxSuppressionWithOverlaps: max_output_size must be >= 0, got {limit}")
    threshold = float(_scalar(overlap_threshold, 0.5))
    order = xp.argsort(-scores, kind="stable")
    order = order[scores[order] > float(_scalar(score_threshold, -math.inf))]
    # TF compares a candidate with each kept box as overlaps[candidate, kept]
    kept = _greedy(order, limit, lambda rest, best: overlaps[rest, best] > threshold)
    return xp.asarray(kept, dtype=xp.int32)


@kernel("CombinedNonMaxSuppression", "flowstack")
def combined_non_max_suppression(boxes, scores, max_output_size_per_class, max_total_size, iou_threshold,
                                 score_threshold, *, xp, pad_per_class, clip_boxes):
    batch, num_boxes, q, _ = boxes.shape
    classes = scores.shape[2]
    if scores.shape[:2] != (batch, num_boxes) or q not in (1, classes):
        raise ValueError(f"CombinedNonMaxSuppression: boxes {boxes.shape} and scores {scores.shape} disagree: "
                         "boxes must be [batch, num_boxes, 1 or num_classes, 4], scores [batch, num_boxes, num_classes]")
    per_class, total = int(_scalar(max_output_size_per_class, 0)), int(_scalar(max_total_size, 0))
    if per_class <= 0 or total <= 0:
        raise ValueError(f"CombinedNonMaxSuppression: max_output_size_per_class ({per_class}) and max_total_size "
                         f"({total}) must be positive")
    iou, floor = float(_scalar(iou_threshold, 0.5)), float(_scalar(score_threshold, -math.inf))
    size = min(total, per_class * classes) if pad_per_class else total
    out_boxes = xp.zeros((batch, size, 4), xp.float32)
    out_scores = xp.zeros((batch, size), xp.float32)
    out_classes = xp.zeros((batch, size), xp.float32)
    valid = xp.zeros((batch,), xp.int32)
    for b in range(batch):
        found = []  # (score, box index, class)
        for c in range(classes):
            class_boxes = boxes[b, :, c if q > 1 else 0].astype(xp.float32)
            s = scores[b, :, c]
            suppresses = _suppresses(class_boxes, xp, 0, iou)
            order = xp.argsort(-s, kind="stable")
            order = order[s[order] > floor]
            for i in _greedy(order, per_class, lambda rest, best: suppresses[best, rest]):
                found.append((float(s[i]), i, c))
        found.sort(key=lambda item: -item[0])
        found = found[:size]
        valid[b] = len(found)
        for k, (score, i, c) in enumerate(found):
            box = boxes[b, i, c if q > 1 else 0]
            out_boxes[b, k] = xp.clip(box, 0.0, 1.0) if clip_boxes else box
            out_scores[b, k], out_classes[b, k] = score, c
    return out_boxes, out_scores, out_classes, valid


# ------------------------------------------------------------------------------------- RoiAlign


def _axis_samples(start, bin_size, pooled, grid, size, xp):
    """Bilinear taps along one axis: [(low index, weight), (high index, weight)], each (pooled, grid).

    Samples outside [-1, size] contribute nothing; inside, positions clamp to the edge pixels.
    """
    pos = start + xp.arange(pooled)[:, None] * bin_size + (xp.arange(grid)[None, :] + 0.5) * bin_size / grid
    inside = (pos >= -1.0) & (pos <= size)
    pos = xp.maximum(pos, 0.0)
    low = xp.floor(pos).astype(xp.int64)
    at_edge = low >= size - 1
    low = xp.where(at_edge, size - 1, low)
    high = xp.where(at_edge, size - 1, low + 1)
    frac = xp.where(at_edge, 0.0, pos - low)
    return [(low, (1 - frac) * inside), (high, frac * inside)]


def _interpolation_matrix(taps, size, xp):
    """(pooled, size): row p sums the tap weights of bin p's samples onto the pixels they read."""
    return sum((weight[..., None] * (index[..., None] == xp.arange(size))).sum(axis=1) for index, weight in taps)


@kernel("RoiAlign")
def roi_align(x, rois, batch_indices, *, xp, coordinate_transformation_mode, mode, output_height,
              output_width, sampling_ratio, spatial_scale):
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise UnsupportedOpError(f"RoiAlign: unknown coordinate_transformation_mode {coordinate_transformation_mode!r}")
    if mode not in ("avg", "max"):
        raise UnsupportedOpError(f"RoiAlign: mode must be 'avg' or 'max', got {mode!r}")
    half_pixel = coordinate_transformation_mode == "half_pixel"
    height, width = x.shape[2:]
    out = xp.zeros((rois.shape[0], x.shape[1], output_height, output_width), dtype=x.dtype)
    boxes = rois.astype(xp.float64) * spatial_scale - (0.5 if half_pixel else 0.0)
    for r in range(rois.shape[0]):
        x0, y0, x1, y1 = (float(v) for v in boxes[r])
        roi_h, roi_w = y1 - y0, x1 - x0
        if not half_pixel:  # the legacy mode makes every RoI at least one pixel
            roi_h, roi_w = max(roi_h, 1.0), max(roi_w, 1.0)
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_h / output_height)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_w / output_width)
        ys = _axis_samples(y0, roi_h / output_height, output_height, grid_h, height, xp)
        xs = _axis_samples(x0, roi_w / output_width, output_width, grid_w, width, xp)
        image = x[int(batch_indices[r])]
        if mode == "avg":
            # averaging bilinear taps is linear: one interpolation matrix per axis, two contractions
            rows, cols = _interpolation_matrix(ys, height, xp), _interpolation_matrix(xs, width, xp)
            pooled = xp.einsum("ph,chw,qw->cpq", rows, image, cols) / max(grid_h * grid_w, 1)
        else:
            # ONNX's max mode takes the largest weighted tap of each sample, then the largest sample
            # (tap, C, oH, grid_h, oW, grid_w)
            taps = [image[:, yi[:, :, None, None], xi[None, None]] * (yw[:, :, None, None] * xw[None, None])
                    for yi, yw in ys for xi, xw in xs]
            pooled = xp.stack(taps).max(axis=(0, 3, 5))
        out[r] = pooled
    return out


# ----------------------------------------------------------------------------------- DeformConv


def _bilinear_gather(x, pos_h, pos_w, xp):
    """Sample x (N, G, Cg, H, W) at (N, G, P) positions, zero outside: (N, G, Cg, P)."""
    height, width = x.shape[-2:]
    flat = x.reshape(*x.shape[:3], height * width)
    h0, w0 = xp.floor(pos_h), xp.floor(pos_w)
    fh, fw = pos_h - h0, pos_w - w0
    h0, w0 = h0.astype(xp.int64), w0.astype(xp.int64)
    out = 0
    for dh, wh in ((0, 1 - fh), (1, fh)):
        for dw, ww in ((0, 1 - fw), (1, fw)):
            h, w = h0 + dh, w0 + dw
            inside = (h >= 0) & (h < height) & (w >= 0) & (w < width)
            index = xp.where(inside, h * width + w, 0)[:, :, None, :]
            taps = xp.take_along_axis(flat, xp.broadcast_to(index, (*flat.shape[:3], index.shape[-1])), axis=3)
            out = out + taps * (wh * ww * inside)[:, :, None, :]
    return out


@kernel("DeformConv")
def deform_conv(x, w, offset, b, mask, *, xp, dilations, group, kernel_shape, offset_group, pads, strides):
    if x.ndim != 4:
        raise UnsupportedOpError(f"DeformConv: only 2-D inputs (N, C, H, W) are supported, got shape {x.shape}")
    n, c = x.shape[:2]
    kernel_hw = tuple(kernel_shape or w.shape[2:])
    win = sliding_windows.resolve_window(x.shape[2:], kernel_hw, strides, dilations, pads, "NOTSET")
    (out_h, out_w), taps = win.out, kernel_hw[0] * kernel_hw[1]
    if offset.shape != (n, offset_group * taps * 2, out_h, out_w) or c % offset_group or c != w.shape[1] * group:
        raise UnsupportedOpError(
            f"DeformConv: X {x.shape}, W {w.shape}, offset {offset.shape} do not agree with group={group}, "
            f"offset_group={offset_group} and output size {(out_h, out_w)}"
        )
    # where each tap of each output position samples before its learned offset: (kH*kW, oH*oW) per axis
    tap_h = xp.repeat(xp.arange(kernel_hw[0]) * win.dilations[0], kernel_hw[1])
    tap_w = xp.tile(xp.arange(kernel_hw[1]) * win.dilations[1], kernel_hw[0])
    out_y = xp.arange(out_h) * win.strides[0] - win.pad_begin[0]
    out_x = xp.arange(out_w) * win.strides[1] - win.pad_begin[1]
    base_h = xp.broadcast_to(tap_h[:, None, None] + out_y[None, :, None], (taps, out_h, out_w)).reshape(taps, -1)
    base_w = xp.broadcast_to(tap_w[:, None, None] + out_x[None, None, :], (taps, out_h, out_w)).reshape(taps, -1)
    shifts = offset.reshape(n, offset_group, taps, 2, out_h * out_w)
    pos_h = (base_h + shifts[:, :, :, 0]).reshape(n, offset_group, -1)
    pos_w = (base_w + shifts[:, :, :, 1]).reshape(n, offset_group, -1)
    grouped = x.reshape(n, offset_group, c // offset_group, *x.shape[2:])
    cols = _bilinear_gather(grouped, pos_h, pos_w, xp).reshape(n, offset_group, c // offset_group, taps, -1)
    if mask is not None:
        cols = cols * mask.reshape(n, offset_group, 1, taps, out_h * out_w)
    # one matmul per conv group: (oC/g, C/g*kH*kW) @ (C/g*kH*kW, oH*oW)
    cols = cols.reshape(n, group, (c // group) * taps, out_h * out_w).astype(x.dtype)
    y = xp.matmul(w.reshape(group, w.shape[0] // group, -1), cols)
    y = y.reshape(n, w.shape[0], out_h, out_w)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y.astype(x.dtype)
