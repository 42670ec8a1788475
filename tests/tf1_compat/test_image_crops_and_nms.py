"""tf.image.crop_and_resize (values against a loop transcription of TF 1.15's kernel, gradients
against finite differences, TF's box gradient for method="nearest"), resize_area (against an
exact piecewise-constant integration), ssim / ssim_multiscale (against a SciPy implementation of
the published formulas), and the NMS variants (hand-worked cases), as TF1 detection scripts use them."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.signal import correlate2d

import trainer as tf

RNG = np.random.default_rng(11)


def run(t, feeds=None):
    with tf.Session() as sess:
        return sess.run(t, feeds)


def crop_reference(image, boxes, box_ind, crop, method="bilinear", extrapolation=0.0):
    _, height, width, depth = image.shape
    ch, cw = crop
    out = np.zeros((len(boxes), ch, cw, depth))
    for n, (y1, x1, y2, x2) in enumerate(boxes):
        img = image[box_ind[n]]
        for y in range(ch):
            iy = y1 * (height - 1) + y * (y2 - y1) * (height - 1) / (ch - 1) if ch > 1 else 0.5 * (y1 + y2) * (height - 1)
            for x in range(cw):
                ix = x1 * (width - 1) + x * (x2 - x1) * (width - 1) / (cw - 1) if cw > 1 else \
                    0.5 * (x1 + x2) * (width - 1)
                if not (0 <= iy <= height - 1 and 0 <= ix <= width - 1):
                    out[n, y, x] = extrapolation
                elif method == "nearest":
                    out[n, y, x] = img[int(np.floor(iy + 0.5)), int(np.floor(ix + 0.5))]
                else:
                    t, b, l_, r = int(np.floor(iy)), int(np.ceil(iy)), int(np.floor(ix)), int(np.ceil(ix))
                    top = img[t, l_] + (img[t, r] - img[t, l_]) * (ix - l_)
                    bottom = img[b, l_] + (img[b, r] - img[b, l_]) * (ix - l_)
                    out[n, y, x] = top + (bottom - top) * (iy - t)
    return out


IMAGE = RNG.standard_normal((2, 5, 6, 3)).astype(np.float32)
BOXES = np.array([[0.1, 0.2, 0.8, 0.9], [-0.2, 0.0, 0.5, 1.3], [0.6, 0.7, 0.2, 0.1], [0.3, 0.35, 0.3, 0.35]],
                 np.float32)
BOX_IND = np.array([0, 1, 1, 0], np.int32)


@pytest.mark.parametrize("method", ["bilinear", "nearest"])
@pytest.mark.parametrize("crop", [(4, 3), (1, 1), (3, 1)])
def test_crop_and_resize_matches_the_kernel(method, crop):
    out = tf.image.crop_and_resize(IMAGE, BOXES, BOX_IND, crop, method=method, extrapolation_value=-7.0)
    assert out.shape == (4, *crop, 3) and out.dtype == np.float32
    np.testing.assert_allclose(run(out), crop_reference(IMAGE, BOXES, BOX_IND, crop, method, -7.0), atol=1e-5)


def test_tf_documented_crop_of_a_whole_image_is_a_resize():
    image = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
    whole = tf.image.crop_and_resize(image, [[0.0, 0.0, 1.0, 1.0]], [0], [7, 7])
    aligned = tf.image.resize_bilinear(image, [7, 7], align_corners=True)
    np.testing.assert_allclose(run(whole), run(aligned), atol=1e-5)


def _finite_difference(loss, var, value, feed, sess, eps=1e-3):
    flat = value.reshape(-1)
    grads = np.zeros_like(flat, dtype=np.float64)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        up = sess.run(loss, {**feed, var: value})
        flat[i] = old - eps
        down = sess.run(loss, {**feed, var: value})
        flat[i] = old
        grads[i] = (up - down) / (2 * eps)
    return grads.reshape(value.shape)


def test_crop_and_resize_gradients_match_finite_differences():
    image = tf.placeholder(tf.float32, IMAGE.shape)
    boxes = tf.placeholder(tf.float32, [3, 4])
    box_values = np.array([[0.13, 0.21, 0.77, 0.88], [0.05, -0.3, 0.61, 0.42], [0.52, 0.66, 0.18, 0.09]], np.float32)
    crops = tf.image.crop_and_resize(image, boxes, [0, 1, 1], [3, 4])
    weights = RNG.uniform(0.5, 1.5, (3, 3, 4, 3)).astype(np.float32)
    loss = tf.reduce_sum(crops * weights)
    g_image, g_boxes = tf.gradients(loss, [image, boxes])
    feed = {image: IMAGE.copy(), boxes: box_values.copy()}
    with tf.Session() as sess:
        got_image, got_boxes = sess.run([g_image, g_boxes], feed)
        np.testing.assert_allclose(got_image, _finite_difference(loss, image, IMAGE.copy(), feed, sess),
                                   rtol=2e-2, atol=2e-2)
        np.testing.assert_allclose(got_boxes, _finite_difference(loss, boxes, box_values.copy(), feed, sess, 1e-4),
                                   rtol=2e-2, atol=5e-2)


def test_nearest_crops_take_the_bilinear_box_gradient_as_tf_does():
    image = tf.constant(IMAGE)
    boxes = tf.constant(BOXES[:2])
    grads = {}
    for method in ("bilinear", "nearest"):
        crops = tf.image.crop_and_resize(image, boxes, [0, 1], [3, 3], method=method)
        grads[method] = tf.gradients(tf.reduce_sum(crops), [image, boxes])
    bil, near = run([grads["bilinear"], grads["nearest"]])
    np.testing.assert_allclose(near[1], bil[1], rtol=1e-5)  # boxes: the bilinear derivative
    counts = np.zeros_like(IMAGE)  # image: each sample adds 1 to its nearest pixel (all samples are inside)
    for n, (y1, x1, y2, x2) in enumerate(BOXES[:2]):
        for y in range(3):
            for x in range(3):
                iy, ix = (y1 + y * (y2 - y1) / 2) * 4, (x1 + x * (x2 - x1) / 2) * 5
                if 0 <= iy <= 4 and 0 <= ix <= 5:
                    counts[[0, 1][n], int(np.floor(iy + 0.5)), int(np.floor(ix + 0.5))] += 1
    np.testing.assert_allclose(near[0], counts)


def test_crop_and_resize_errors():
    with pytest.raises(ValueError, match="crop_and_resize: method must be"):
        tf.image.crop_and_resize(IMAGE, BOXES, BOX_IND, [2, 2], method="area")
    with pytest.raises(ValueError, match="crop_and_resize: image must be 4-D"):
        tf.image.crop_and_resize(IMAGE[0], BOXES, BOX_IND, [2, 2])
    with pytest.raises(ValueError, match="crop_and_resize: boxes must be 2-D"):
        tf.image.crop_and_resize(IMAGE, BOXES[:, :3], BOX_IND, [2, 2])
    with pytest.raises(ValueError, match="crop_size must be"):
        tf.image.crop_and_resize(IMAGE, BOXES, BOX_IND, [0, 2])
    with pytest.raises(TypeError, match="box_ind must be int32"):
        tf.image.crop_and_resize(IMAGE, BOXES, BOX_IND.astype(np.float32), [2, 2])
    with pytest.raises(ValueError, match="crop_size must be a constant"):
        tf.image.crop_and_resize(IMAGE, BOXES, BOX_IND, tf.placeholder(tf.int32, [2]))


def area_reference(image, out_h, out_w):
    """Integrate the piecewise-constant image over each output cell: repeat every pixel out times,
    then average blocks of in pixels (exact for TF's non-align-corners area resize)."""
    in_h, in_w = image.shape[1:3]
    fine = np.repeat(np.repeat(image.astype(np.float64), out_h, axis=1), out_w, axis=2)
    return fine.reshape(image.shape[0], out_h, in_h, out_w, in_w, image.shape[3]).mean(axis=(2, 4))


@pytest.mark.parametrize("out_size", [(2, 3), (3, 2), (7, 9), (5, 6)])
def test_resize_area_integrates_the_covered_pixels(out_size):
    image = RNG.uniform(0, 255, (2, 5, 6, 2)).astype(np.uint8)
    out = tf.image.resize_area(image, out_size)
    assert out.shape == (2, *out_size, 2) and out.dtype == np.float32
    np.testing.assert_allclose(run(out), area_reference(image, *out_size), rtol=1e-5, atol=1e-3)
    one = tf.image.resize_images(image[0], out_size, method=tf.image.ResizeMethod.AREA)
    np.testing.assert_allclose(run(one), area_reference(image[:1], *out_size)[0], rtol=1e-5, atol=1e-3)
    with pytest.raises(ValueError, match="resize_area: size must be"):
        tf.image.resize_area(image, [0, 3])


def _gaussian(size=11, sigma=1.5):
    r = np.arange(size) - (size - 1) / 2
    g = np.exp(-(r[:, None] ** 2 + r[None, :] ** 2) / (2 * sigma * sigma))
    return g / g.sum()


def _ssim_channel(x, y, max_val=1.0):
    g = _gaussian()
    c1, c2 = (0.01 * max_val) ** 2, (0.03 * max_val) ** 2

    def f(a):
        return correlate2d(a, g, "valid")

    mx, my = f(x), f(y)
    sxx, syy, sxy = f(x * x) - mx * mx, f(y * y) - my * my, f(x * y) - mx * my
    lum = (2 * mx * my + c1) / (mx ** 2 + my ** 2 + c1)
    cs = (2 * sxy + c2) / (sxx + syy + c2)
    return (lum * cs).mean(), cs.mean()


def _ms_ssim(a, b, weights=(0.0448, 0.2856, 0.3001, 0.2363, 0.1333)):
    per_channel = []
    for c in range(a.shape[-1]):
        x, y = a[..., c].astype(np.float64), b[..., c].astype(np.float64)
        values = []
        for k in range(len(weights)):
            if k:
                pads = [(0, x.shape[0] % 2), (0, x.shape[1] % 2)]
                x, y = np.pad(x, pads, "symmetric"), np.pad(y, pads, "symmetric")
                x = x.reshape(x.shape[0] // 2, 2, x.shape[1] // 2, 2).mean((1, 3))
                y = y.reshape(y.shape[0] // 2, 2, y.shape[1] // 2, 2).mean((1, 3))
            s, cs = _ssim_channel(x, y)
            values.append(max(cs if k < len(weights) - 1 else s, 0.0))
        per_channel.append(np.prod(np.array(values) ** np.array(weights)))
    return np.mean(per_channel)


def test_ssim_matches_the_formula_for_float_and_uint8_images():
    a = RNG.uniform(size=(2, 24, 20, 3)).astype(np.float32)
    b = np.clip(a + 0.1 * RNG.standard_normal(a.shape), 0, 1).astype(np.float32)
    expected = [np.mean([_ssim_channel(a[i, ..., c], b[i, ..., c])[0] for c in range(3)]) for i in range(2)]
    out = tf.image.ssim(a, b, max_val=1.0)
    assert out.shape == (2,)
    np.testing.assert_allclose(run(out), expected, rtol=1e-4)
    ua, ub = (a * 255).astype(np.uint8), (b * 255).astype(np.uint8)
    expected_u8 = [np.mean([_ssim_channel(ua[i, ..., c] / 255.0, ub[i, ..., c] / 255.0)[0] for c in range(3)])
                   for i in range(2)]
    np.testing.assert_allclose(run(tf.image.ssim(ua, ub, 255)), expected_u8, rtol=1e-4)
    np.testing.assert_allclose(run(tf.image.ssim(a, a, 1.0)), [1.0, 1.0], rtol=1e-5)


def test_ssim_multiscale_matches_the_formula_with_odd_sizes():
    a = RNG.uniform(size=(1, 181, 177, 2)).astype(np.float32)
    b = np.clip(a + 0.2 * RNG.standard_normal(a.shape), 0, 1).astype(np.float32)
    out = tf.image.ssim_multiscale(a, b, 1.0)
    assert out.shape == (1,)
    np.testing.assert_allclose(run(out), [_ms_ssim(a[0], b[0])], rtol=1e-4)


def test_an_ssim_loss_trains_an_image_towards_its_target():
    """A TF1 script: minimize 1 - SSIM by gradient descent on a variable image."""
    target = RNG.uniform(size=(1, 16, 16, 1)).astype(np.float32)
    start = np.clip(target + 0.3 * RNG.standard_normal(target.shape), 0, 1).astype(np.float32)
    image = tf.Variable(start, name="image")
    loss = 1.0 - tf.reduce_mean(tf.image.ssim(image, tf.constant(target), max_val=1.0))
    train = tf.train.AdamOptimizer(0.02).minimize(loss)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss)
        for _ in range(60):
            sess.run(train)
        last = sess.run(loss)
    assert last < 0.5 * first  # measured 1e-3 of the first loss; deterministic


def test_ssim_errors():
    a = np.zeros((8, 8, 1), np.float32)
    with pytest.raises(ValueError, match="smaller than filter_size 11"):
        tf.image.ssim(a, a, 1.0)
    with pytest.raises(ValueError, match="same height, width and channels"):
        tf.image.ssim(np.zeros((12, 12, 1), np.float32), np.zeros((12, 13, 1), np.float32), 1.0)
    with pytest.raises(TypeError, match="same dtype"):
        tf.image.ssim(np.zeros((12, 12, 1), np.float32), np.zeros((12, 12, 1), np.uint8), 1.0)


BOXES_NMS = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                      [0, 100, 1, 101]], np.float32)
SCORES = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3], np.float32)  # TF's documented NMS example


def test_non_max_suppression_padded():
    selected, valid = tf.image.non_max_suppression_padded(BOXES_NMS, SCORES, 5, 0.5, pad_to_max_output_size=True)
    assert selected.shape == (5,)
    got, n = run([selected, valid])
    np.testing.assert_array_equal(got, [3, 0, 5, 0, 0])
    assert n == 3
    unpadded, n2 = run(tf.image.non_max_suppression_padded(BOXES_NMS, SCORES, 5, 0.5))
    np.testing.assert_array_equal(unpadded, [3, 0, 5])
    assert n2 == 3


def test_non_max_suppression_overlaps_uses_the_given_matrix():
    overlaps = np.array([[1.0, 0.6, 0.2, 0.0], [0.6, 1.0, 0.7, 0.0], [0.2, 0.7, 1.0, 0.4], [0.0, 0.0, 0.4, 1.0]],
                        np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.1], np.float32)
    np.testing.assert_array_equal(run(tf.image.non_max_suppression_overlaps(overlaps, scores, 4, 0.5)), [0, 2, 3])
    np.testing.assert_array_equal(run(tf.image.non_max_suppression_overlaps(overlaps, scores, 4, 0.3)), [0, 2])
    np.testing.assert_array_equal(
        run(tf.image.non_max_suppression_overlaps(overlaps, scores, 4, 0.5, score_threshold=0.5)), [0, 2])
    with pytest.raises(ValueError, match="square"):
        tf.image.non_max_suppression_overlaps(overlaps[:3], scores, 2)


def test_combined_non_max_suppression_a_tf1_detector_head():
    boxes = tf.placeholder(tf.float32, [None, 6, 1, 4])
    scores = tf.placeholder(tf.float32, [None, 6, 2])
    out = tf.image.combined_non_max_suppression(boxes, scores, max_output_size_per_class=2, max_total_size=5,
                                                iou_threshold=0.5, score_threshold=0.0, clip_boxes=False)
    nmsed_boxes, nmsed_scores, nmsed_classes, valid = out
    assert nmsed_boxes.shape == (None, 5, 4) and valid.shape == (None,) and valid.dtype == np.int32
    class_scores = np.stack([SCORES, [0.1, 0.8, 0.3, 0.5, 0.7, 0.2]], axis=-1)
    feed = {boxes: np.stack([BOXES_NMS[:, None], BOXES_NMS[:, None] / 200.0]),
            scores: np.stack([class_scores, class_scores * np.array([1.0, 0.0])])}
    b, s, c, v = run(out, feed)
    np.testing.assert_array_equal(v, [4, 2])
    np.testing.assert_allclose(s[0], [0.95, 0.9, 0.8, 0.7, 0.0])
    np.testing.assert_array_equal(c[0], [0, 0, 1, 1, 0])
    np.testing.assert_allclose(b[0, :4], BOXES_NMS[[3, 0, 1, 4]])
    np.testing.assert_array_equal(b[0, 4], 0.0)
    np.testing.assert_allclose(s[1], [0.95, 0.9, 0, 0, 0])  # class 1 scores 0: below the threshold
    clipped = run(tf.image.combined_non_max_suppression(
        BOXES_NMS[None, :, None], class_scores[None], 1, 2, 0.5, pad_per_class=True))
    assert clipped[0].shape == (1, 2, 4)
    np.testing.assert_allclose(clipped[0][0], [[0, 1, 1, 1], [0, 0.1, 1, 1]])  # clip_boxes to [0, 1]


def test_combined_non_max_suppression_per_class_boxes_and_bad_input():
    per_class = np.zeros((1, 2, 2, 4), np.float32)
    per_class[0, :, 0] = [[0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5]]  # class 0: two identical boxes
    per_class[0, :, 1] = [[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]]  # class 1: disjoint boxes
    scores = np.array([[[0.9, 0.6], [0.8, 0.7]]], np.float32)
    _, s, c, v = run(tf.image.combined_non_max_suppression(per_class, scores, 2, 4))
    assert v[0] == 3
    np.testing.assert_allclose(s[0, :3], [0.9, 0.7, 0.6])
    np.testing.assert_array_equal(c[0, :3], [0, 1, 1])
    with pytest.raises(ValueError, match="boxes must be \\[batch, num_boxes, q, 4\\]"):
        tf.image.combined_non_max_suppression(per_class[0], scores, 2, 4)
    with pytest.raises(Exception, match="disagree"):
        run(tf.image.combined_non_max_suppression(np.zeros((1, 2, 3, 4), np.float32), scores, 2, 4))
