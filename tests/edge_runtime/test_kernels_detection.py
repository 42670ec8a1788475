"""detection kernels against direct (slow, obviously right) definitions, on the cases the ONNX node
suite leaves out: deformable conv with groups, dilation, stride and zero offsets, RoiAlign's legacy
mode and samples off the image, NMS thresholds and empty results."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from schemas import TensorType, get_schema, infer_types
from schemas.registry import UnsupportedOpError
from tests.edge_runtime.kernel_calls import run_kernel as run

R = np.random.default_rng(0)


def bilinear(image, h, w):
    """image (H, W) at (h, w), zero outside, by the definition."""
    total = 0.0
    for hh in (int(np.floor(h)), int(np.floor(h)) + 1):
        for ww in (int(np.floor(w)), int(np.floor(w)) + 1):
            if 0 <= hh < image.shape[0] and 0 <= ww < image.shape[1]:
                total += (1 - abs(h - hh)) * (1 - abs(w - ww)) * image[hh, ww]
    return total


def deform_conv_by_definition(x, w, offset, b, mask, strides, pads, dilations, group, offset_group):
    n, c = x.shape[:2]
    oc, cg, kh, kw = w.shape
    out_h, out_w = offset.shape[2:]
    off = offset.reshape(n, offset_group, kh, kw, 2, out_h, out_w)
    msk = mask.reshape(n, offset_group, kh, kw, out_h, out_w)
    y = np.zeros((n, oc, out_h, out_w))
    for bi, o, i, j in itertools.product(range(n), range(oc), range(out_h), range(out_w)):
        g = o // (oc // group)
        for ci, p, q in itertools.product(range(cg), range(kh), range(kw)):
            channel = g * cg + ci
            og = channel // (c // offset_group)
            h = i * strides[0] - pads[0] + p * dilations[0] + off[bi, og, p, q, 0, i, j]
            ww = j * strides[1] - pads[1] + q * dilations[1] + off[bi, og, p, q, 1, i, j]
            y[bi, o, i, j] += w[o, ci, p, q] * msk[bi, og, p, q, i, j] * bilinear(x[bi, channel], h, ww)
        y[bi, o, i, j] += b[o]
    return y


@pytest.mark.parametrize("group,offset_group,strides,pads,dilations", [
    (1, 1, (1, 1), (0, 0, 0, 0), (1, 1)),
    (2, 2, (2, 1), (1, 0, 1, 2), (1, 2)),
    (1, 4, (1, 2), (2, 1, 0, 1), (2, 1)),
])
def test_deform_conv_matches_definition(group, offset_group, strides, pads, dilations):
    x = R.standard_normal((2, 4, 6, 7))
    w = R.standard_normal((6, 4 // group, 2, 3))
    b = R.standard_normal(6)
    out_h = (6 + pads[0] + pads[2] - ((2 - 1) * dilations[0] + 1)) // strides[0] + 1
    out_w = (7 + pads[1] + pads[3] - ((3 - 1) * dilations[1] + 1)) // strides[1] + 1
    offset = R.uniform(-2, 2, (2, offset_group * 6 * 2, out_h, out_w))
    mask = R.uniform(0, 1, (2, offset_group * 6, out_h, out_w))
    y = run("DeformConv", x, w, offset, b, mask, group=group, offset_group=offset_group, strides=list(strides),
            pads=list(pads), dilations=list(dilations))
    want = deform_conv_by_definition(x, w, offset, b, mask, strides, pads, dilations, group, offset_group)
    np.testing.assert_allclose(y, want, atol=1e-10)


def test_deform_conv_with_zero_offsets_is_conv():
    x, w = R.standard_normal((1, 3, 5, 5)).astype(np.float32), R.standard_normal((2, 3, 3, 3)).astype(np.float32)
    y = run("DeformConv", x, w, np.zeros((1, 18, 3, 3), np.float32))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, run("Conv", x, w, None), rtol=1e-5, atol=1e-5)


def test_deform_conv_rejects_mismatched_offset():
    with pytest.raises(UnsupportedOpError, match="offset"):
        run("DeformConv", np.zeros((1, 2, 4, 4)), np.zeros((1, 2, 2, 2)), np.zeros((1, 4, 3, 3)))


def roi_align_by_definition(x, rois, batch_indices, out_h, out_w, ratio, scale, mode, half_pixel):
    height, width = x.shape[2:]

    def sample(image, y, xx):
        if y < -1 or y > height or xx < -1 or xx > width:
            return np.zeros(4)
        y, xx = max(y, 0.0), max(xx, 0.0)
        y0, x0 = int(y), int(xx)
        y1, x1 = min(y0 + 1, height - 1), min(x0 + 1, width - 1)
        if y0 >= height - 1:
            y0 = y1 = height - 1
            y = float(y0)
        if x0 >= width - 1:
            x0 = x1 = width - 1
            xx = float(x0)
        ly, lx = y - y0, xx - x0
        return np.array([(1 - ly) * (1 - lx) * image[y0, x0], (1 - ly) * lx * image[y0, x1],
                         ly * (1 - lx) * image[y1, x0], ly * lx * image[y1, x1]])

    shift = 0.5 if half_pixel else 0.0
    out = np.zeros((len(rois), x.shape[1], out_h, out_w))
    for r, c in itertools.product(range(len(rois)), range(x.shape[1])):
        x0, y0, x1, y1 = rois[r] * scale - shift
        rh, rw = (y1 - y0, x1 - x0) if half_pixel else (max(y1 - y0, 1.0), max(x1 - x0, 1.0))
        gh = ratio or int(np.ceil(rh / out_h))
        gw = ratio or int(np.ceil(rw / out_w))
        for p, q in itertools.product(range(out_h), range(out_w)):
            vals = [sample(x[batch_indices[r], c], y0 + p * rh / out_h + (i + 0.5) * rh / out_h / gh,
                           x0 + q * rw / out_w + (j + 0.5) * rw / out_w / gw)
                    for i in range(gh) for j in range(gw)]
            out[r, c, p, q] = sum(v.sum() for v in vals) / max(gh * gw, 1) if mode == "avg" \
                else max(v.max() for v in vals)
    return out


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("half_pixel", [True, False])
def test_roi_align_matches_definition(mode, half_pixel):
    x = R.standard_normal((2, 3, 8, 9))
    rois = np.array([[0.5, 1.0, 6.0, 7.5], [-3.0, -2.0, 3.0, 2.0], [7.0, 6.0, 12.0, 11.0], [1, 1, 1.2, 1.3]])
    batch_indices = np.array([0, 1, 1, 0], np.int64)
    for ratio in (0, 2):
        y = run("RoiAlign", x, rois, batch_indices, output_height=3, output_width=2, sampling_ratio=ratio,
                spatial_scale=0.8, mode=mode,
                coordinate_transformation_mode="half_pixel" if half_pixel else "output_half_pixel")
        want = roi_align_by_definition(x, rois, batch_indices, 3, 2, ratio, 0.8, mode, half_pixel)
        np.testing.assert_allclose(y, want, atol=1e-12)


def test_nms_thresholds_and_limits():
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [1, 1, 0, 0]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.3, 0.7], [0.1, 0.2, 0.6, 0.5]]], np.float32)
    got = run("NonMaxSuppression", boxes, scores, np.array([3]), np.array([0.5], np.float32),
              np.array([0.25], np.float32))
    # box 3 is box 0 with its corners flipped: suppressed; class 1 keeps only scores above 0.25
    assert got.dtype == np.int64 and got.tolist() == [[0, 0, 0], [0, 0, 2], [0, 1, 2], [0, 1, 3]]
    assert run("NonMaxSuppression", boxes, scores).shape == (0, 3)  # no limit given: nothing selected
    one = run("NonMaxSuppression", boxes, scores, np.array([1]), np.array([1.0], np.float32))
    assert one.tolist() == [[0, 0, 0], [0, 1, 2]]


def test_shape_rules():
    schema = get_schema("DeformConv")
    attrs = schema.resolve_attrs({"strides": [2, 2], "pads": [1, 1, 1, 1]})
    (y,) = infer_types(schema, [TensorType(np.dtype(np.float32), (2, 4, 9, 9)),
                                TensorType(np.dtype(np.float32), (8, 4, 3, 3)), TensorType(None, None)], attrs)
    assert y.shape == (2, 8, 5, 5)
    schema = get_schema("RoiAlign")
    (y,) = infer_types(schema, [TensorType(np.dtype(np.float32), (1, 3, 8, 8)), TensorType(None, (5, 4)),
                                TensorType(None, (5,))], schema.resolve_attrs({"output_height": 2}))
    assert y.shape == (5, 3, 2, 1)
