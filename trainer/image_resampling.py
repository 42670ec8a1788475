"""``tf.image.crop_and_resize`` and ``tf.image.resize_area``, composed from gathers and matrix
products so their gradients come from those ops' rules.

``crop_and_resize`` samples each box [y1, x1, y2, x2] (normalized: 0 is the first pixel's center,
1 the last's) of image ``box_ind[i]`` on a ``crop_size`` grid, bilinearly or at the nearest pixel,
writing ``extrapolation_value`` where a sample falls outside the image: TF 1.15's CropAndResize.
Its gradients are TF's: the image gets the bilinear (or nearest) weights' transpose; the boxes get
the derivative of the bilinear interpolation with respect to the sample position, also for
``method="nearest"``, where TF approximates it that way too.

``resize_area`` averages the input pixels each output pixel covers, weighted by the covered
fraction (TF's ResizeArea), as two constant matrices applied along height and width.
"""

from __future__ import annotations

import math

import numpy as np

from trainer import ops
from trainer.array_ops import expand_dims, logical_and, stack, tensordot, where
from trainer.graph import constant_value

__all__ = ["crop_and_resize", "resize_area"]


def _static_ints(value, what: str, where_: str) -> list[int]:
    if isinstance(value, (list, tuple, np.ndarray)):
        return [int(v) for v in np.asarray(value).reshape(-1)]
    known = constant_value(ops.convert_to_tensor(value))
    if known is None:
        raise ValueError(f"{where_}: {what} must be a constant, got a tensor computed at run time")
    return [int(v) for v in np.asarray(known).reshape(-1)]


def _sample_positions(start, end, size: int, extent: int, dtype):
    """Source coordinates [num_boxes, size] of a box edge pair on ``size`` samples (TF's rule)."""
    scale = float(extent - 1)
    if size > 1:
        steps = ops.constant(np.arange(size, dtype=dtype) * (scale / (size - 1)))
        return expand_dims(start * scale, 1) + expand_dims(end - start, 1) * steps
    return expand_dims((start + end) * (0.5 * scale), 1)


def _gather_pixels(image, batch, rows, cols):
    """image[batch[n], rows[n, i], cols[n, j]] -> [num_boxes, crop_h, crop_w, depth]."""
    n_h, n_w = rows.shape[1], cols.shape[1]
    b = ops.make_op("Expand", [ops.reshape(batch, [-1, 1, 1]),
                               ops.constant(np.asarray([1, n_h, n_w], np.int64))]).outputs[0]
    r = ops.make_op("Expand", [expand_dims(rows, 2), ops.constant(np.asarray([1, n_h, n_w], np.int64))]).outputs[0]
    c = ops.make_op("Expand", [expand_dims(cols, 1), ops.constant(np.asarray([1, n_h, n_w], np.int64))]).outputs[0]
    return ops.make_op("GatherND", [image, stack([b, r, c], axis=-1)]).outputs[0]


def _index(coords, extent: int):
    clipped = ops.make_op("Clip", [coords, ops.constant(np.asarray(0, coords.dtype)),
                                   ops.constant(np.asarray(extent - 1, coords.dtype))]).outputs[0]
    return ops.cast(clipped, np.int64)


def _bilinear(image, batch, ys, xs, height: int, width: int):
    top, left = ops.make_op("Floor", [ys]).outputs[0], ops.make_op("Floor", [xs]).outputs[0]
    y_lerp, x_lerp = expand_dims(expand_dims(ys - top, 2), 3), expand_dims(expand_dims(xs - left, 1), 3)
    bottom, right = ops.make_op("Ceil", [ys]).outputs[0], ops.make_op("Ceil", [xs]).outputs[0]
    t, b = _index(top, height), _index(bottom, height)
    l_, r = _index(left, width), _index(right, width)
    top_row = _gather_pixels(image, batch, t, l_) * (1.0 - x_lerp) + _gather_pixels(image, batch, t, r) * x_lerp
    bottom_row = _gather_pixels(image, batch, b, l_) * (1.0 - x_lerp) + _gather_pixels(image, batch, b, r) * x_lerp
    return top_row + (bottom_row - top_row) * y_lerp


def _nearest(image, batch, ys, xs, height: int, width: int):
    # std::round (half away from zero) on in-range coordinates, which are >= 0: floor(v + 0.5)
    rows = ops.make_op("Floor", [ys + 0.5]).outputs[0]
    cols = ops.make_op("Floor", [xs + 0.5]).outputs[0]
    return _gather_pixels(image, batch, _index(rows, height), _index(cols, width))


def _inside(coords, extent: int):
    low = ops.make_op("GreaterOrEqual", [coords, ops.constant(np.asarray(0, coords.dtype))]).outputs[0]
    high = ops.make_op("LessOrEqual", [coords, ops.constant(np.asarray(extent - 1, coords.dtype))]).outputs[0]
    return logical_and(low, high)


def crop_and_resize(image, boxes, box_ind, crop_size, method: str = "bilinear", extrapolation_value: float = 0.0,
                    name=None):
    """``[num_boxes, crop_height, crop_width, depth]`` float32 crops of ``image`` [batch, H, W, depth]."""
    where_ = "crop_and_resize"
    if method not in ("bilinear", "nearest"):
        raise ValueError(f"{where_}: method must be 'bilinear' or 'nearest', got {method!r}")
    x = ops.convert_to_tensor(image)
    if x.shape is None or len(x.shape) != 4 or x.shape[1] is None or x.shape[2] is None:
        raise ValueError(f"{where_}: image must be 4-D [batch, height, width, depth] with a static height and "
                         f"width, got shape {None if x.shape is None else x.shape}")
    b = ops.convert_to_tensor(boxes)
    if b.shape is not None and (len(b.shape) != 2 or b.shape[1] not in (4, None)):
        raise ValueError(f"{where_}: boxes must be 2-D [num_boxes, 4], got shape {b.shape}")
    ind = ops.convert_to_tensor(box_ind)
    if ind.shape is not None and len(ind.shape) != 1:
        raise ValueError(f"{where_}: box_ind must be 1-D [num_boxes], got shape {ind.shape}")
    if np.dtype(ind.dtype).kind not in "iu":
        raise TypeError(f"{where_}: box_ind must be int32, got {ind.dtype}")
    size = _static_ints(crop_size, "crop_size", where_)
    if len(size) != 2 or min(size) <= 0:
        raise ValueError(f"{where_}: crop_size must be [crop_height, crop_width], both positive, got {size}")
    height, width = int(x.shape[1]), int(x.shape[2])
    graph = x.graph
    with graph.as_default(), graph.name_scope(name or "CropAndResize"):
        img = x if np.dtype(x.dtype) == np.float32 else ops.cast(x, np.float32)
        b = b if np.dtype(b.dtype) == np.float32 else ops.cast(b, np.float32)
        ys = _sample_positions(b[:, 0], b[:, 2], size[0], height, np.float32)
        xs = _sample_positions(b[:, 1], b[:, 3], size[1], width, np.float32)
        batch = ops.cast(ind, np.int64)
        bilinear_image = img if method == "bilinear" else ops.stop_gradient(img)
        crops = _bilinear(bilinear_image, batch, ys, xs, height, width)
        if method == "nearest":  # the nearest pixels' values; the boxes' gradient stays the bilinear one (TF's)
            crops = _nearest(img, batch, ys, xs, height, width) + (crops - ops.stop_gradient(crops))
        inside = logical_and(expand_dims(expand_dims(_inside(ys, height), 2), 3),
                             expand_dims(expand_dims(_inside(xs, width), 1), 3))
        fill = ops.make_op("Expand", [ops.constant(np.float32(extrapolation_value)),
                                      ops.make_op("Shape", [crops]).outputs[0]]).outputs[0]
        return where(inside, crops, fill)


def _area_weights(in_size: int, out_size: int, align_corners: bool) -> np.ndarray:
    """[out_size, in_size]: row o holds the covered fraction of each input pixel, divided by the
    scale, as TF's ResizeArea sums them (indices past the edge read the last pixel)."""
    if align_corners and out_size > 1:
        scale = (in_size - 1) / (out_size - 1)
    else:
        scale = in_size / out_size
    weights = np.zeros((out_size, in_size), np.float64)
    for o in range(out_size):
        start, end = o * scale, (o + 1) * scale
        for i in range(int(math.floor(start)), int(math.ceil(end))):
            if i < start:
                w = scale if i + 1 > end else i + 1 - start
            else:
                w = end - i if i + 1 > end else 1.0
            weights[o, min(i, in_size - 1)] += w
    return weights / scale


def resize_area(images, size, align_corners: bool = False, name=None):
    """Area-averaged resize of ``images`` [batch, H, W, C] (or one [H, W, C]) to ``size`` =
    [new_height, new_width], as float32."""
    where_ = "resize_area"
    x = ops.convert_to_tensor(images)
    if x.shape is None or len(x.shape) not in (3, 4) or x.shape[-3] is None or x.shape[-2] is None:
        raise ValueError(f"{where_}: expected [batch, height, width, channels] or [height, width, channels] with a "
                         f"static height and width, got shape {None if x.shape is None else x.shape}")
    new = _static_ints(size, "size", where_)
    if len(new) != 2 or min(new) <= 0:
        raise ValueError(f"{where_}: size must be [new_height, new_width], both positive, got {new}")
    in_h, in_w = int(x.shape[-3]), int(x.shape[-2])
    rows = ops.constant(_area_weights(in_h, new[0], align_corners).astype(np.float32))
    cols = ops.constant(_area_weights(in_w, new[1], align_corners).astype(np.float32))
    graph = x.graph
    with graph.as_default(), graph.name_scope(name or "ResizeArea"):
        flt = x if np.dtype(x.dtype) == np.float32 else ops.cast(x, np.float32)
        batch = flt if len(x.shape) == 4 else expand_dims(flt, 0)
        by_rows = ops.transpose(tensordot(rows, batch, [[1], [1]]), [1, 0, 2, 3])  # [N, new_h, W, C]
        out = ops.transpose(tensordot(cols, by_rows, [[1], [2]]), [1, 2, 0, 3])  # [N, new_h, new_w, C]
        return out if len(x.shape) == 4 else out[0]
