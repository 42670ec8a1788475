"""``tf.image`` on NHWC images, against NumPy and TensorFlow 1.x's documented sampling conventions."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

SQUARE = np.array([[0.0, 1.0], [2.0, 3.0]], np.float32)[None, :, :, None]  # [1, 2, 2, 1]


def run(t, feeds=None):
    with tf.Session() as sess:
        return sess.run(t, feeds)


def test_resizing_samples_as_tensorflow_1_does():
    x = tf.constant(SQUARE)
    bilinear = run(tf.image.resize_images(x, [4, 4]))[0, :, :, 0]  # asymmetric: source = dest * in / out
    np.testing.assert_allclose(bilinear, [[0, .5, 1, 1], [1, 1.5, 2, 2], [2, 2.5, 3, 3], [2, 2.5, 3, 3]])
    nearest = run(tf.image.resize_images(x, [4, 4], method=tf.image.ResizeMethod.NEAREST_NEIGHBOR))[0, :, :, 0]
    np.testing.assert_array_equal(nearest, np.kron(SQUARE[0, :, :, 0], np.ones((2, 2))))
    corners = run(tf.image.resize_bilinear(x, [3, 3], align_corners=True))[0, :, :, 0]
    np.testing.assert_allclose(corners, [[0, .5, 1], [1, 1.5, 2], [2, 2.5, 3]])
    one_image = run(tf.image.resize_images(tf.constant(np.arange(12, dtype=np.uint8).reshape(2, 2, 3)), [4, 6]))
    assert one_image.shape == (4, 6, 3) and one_image.dtype == np.float32
    area = run(tf.image.resize_images(x, [1, 1], method=tf.image.ResizeMethod.AREA))[0, :, :, 0]
    np.testing.assert_allclose(area, [[1.5]])  # the mean of the four pixels
    with pytest.raises(ValueError, match="expected one of tf.image.ResizeMethod"):
        tf.image.resize_images(x, [4, 4], method=7)


def test_a_resize_is_differentiable():
    x = tf.constant(SQUARE)
    (grad,) = tf.gradients(tf.reduce_sum(tf.image.resize_bilinear(x, [4, 4])), [x])
    assert run(grad).sum() == pytest.approx(16.0)  # every output pixel's weights sum to one


def test_flips_rotations_and_crops_match_numpy():
    images = np.random.default_rng(0).standard_normal((2, 4, 6, 3)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 4, 6, 3])
    got = run([tf.image.flip_left_right(x), tf.image.flip_up_down(x), tf.image.rot90(x, 1), tf.image.transpose_image(x),
               tf.image.crop_to_bounding_box(x, 1, 2, 2, 3), tf.image.pad_to_bounding_box(x, 1, 0, 6, 7),
               tf.image.central_crop(x, 0.5), tf.image.resize_image_with_crop_or_pad(x, 2, 8)], {x: images})
    want = [images[:, :, ::-1], images[:, ::-1], np.rot90(images, 1, axes=(1, 2)), images.transpose(0, 2, 1, 3),
            images[:, 1:3, 2:5], np.pad(images, [(0, 0), (1, 1), (0, 1), (0, 0)]), images[:, 1:3, 1:5],
            np.pad(images[:, 1:3], [(0, 0), (0, 0), (1, 1), (0, 0)])]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match="does not fit"):
        tf.image.pad_to_bounding_box(x, 3, 0, 6, 6)


def test_standardization_dtype_conversion_and_color():
    images = np.random.default_rng(1).integers(0, 256, (2, 3, 3, 3)).astype(np.uint8)
    x = tf.constant(images)
    standard, as_float, back, gray = run([tf.image.per_image_standardization(x), tf.image.convert_image_dtype(x, tf.float32),
                                          tf.image.convert_image_dtype(tf.image.convert_image_dtype(x, tf.float32), tf.uint8),
                                          tf.image.rgb_to_grayscale(tf.image.convert_image_dtype(x, tf.float32))])
    f = images.astype(np.float32)
    mean = f.mean(axis=(1, 2, 3), keepdims=True)
    adjusted = np.maximum(f.std(axis=(1, 2, 3), keepdims=True), 1 / np.sqrt(27))
    np.testing.assert_allclose(standard, (f - mean) / adjusted, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(as_float, f / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(back, images)
    np.testing.assert_allclose(gray[..., 0], (f / 255.0) @ np.array([0.2989, 0.5870, 0.1140], np.float32), rtol=1e-5)


def test_random_flips_flip_each_image_or_leave_it():
    images = np.random.default_rng(2).standard_normal((16, 2, 3, 1)).astype(np.float32)
    out = run(tf.image.random_flip_left_right(tf.constant(images), seed=7))
    flipped = [np.array_equal(o, i[:, ::-1]) for o, i in zip(out, images)]
    kept = [np.array_equal(o, i) for o, i in zip(out, images)]
    assert all(f or k for f, k in zip(flipped, kept)) and 0 < sum(flipped) < 16


def test_color_spaces_and_adjustments_match_their_formulas():
    import colorsys

    rgb = np.random.default_rng(1).random((2, 5, 6, 3)).astype(np.float32)
    rgb[0, 0, 0] = [0.5, 0.5, 0.5]  # gray: hue 0
    x = tf.constant(rgb)
    with tf.Session() as sess:
        hsv, back, yiq, yuv, gamma, hue, sat, grads, tv, score = sess.run([
            tf.image.rgb_to_hsv(x), tf.image.hsv_to_rgb(tf.image.rgb_to_hsv(x)), tf.image.yiq_to_rgb(
                tf.image.rgb_to_yiq(x)), tf.image.rgb_to_yuv(x), tf.image.adjust_gamma(x, 2.0, 0.5),
            tf.image.adjust_hue(x, 0.25), tf.image.adjust_saturation(x, 0.5), tf.image.image_gradients(x),
            tf.image.total_variation(x), tf.image.psnr(x, x * 0.9, 1.0)])
    expected_hsv = np.array([colorsys.rgb_to_hsv(*p) for p in rgb.reshape(-1, 3)]).reshape(rgb.shape)
    np.testing.assert_allclose(hsv, expected_hsv, atol=1e-5)
    np.testing.assert_allclose(back, rgb, atol=1e-5)
    np.testing.assert_allclose(yiq, rgb, atol=1e-4)  # to YIQ and back
    np.testing.assert_allclose(yuv[..., 0], rgb @ [0.299, 0.587, 0.114], atol=1e-5)
    np.testing.assert_allclose(gamma, 0.5 * rgb ** 2, rtol=1e-5)
    shifted = expected_hsv.copy()
    shifted[..., 0] = (shifted[..., 0] + 0.25) % 1.0
    np.testing.assert_allclose(hue, np.array([colorsys.hsv_to_rgb(*p) for p in shifted.reshape(-1, 3)]).reshape(
        rgb.shape), atol=1e-5)
    desaturated = expected_hsv.copy()
    desaturated[..., 1] *= 0.5
    np.testing.assert_allclose(sat, np.array([colorsys.hsv_to_rgb(*p) for p in desaturated.reshape(-1, 3)]).reshape(
        rgb.shape), atol=1e-5)
    dy, dx = grads
    np.testing.assert_allclose(dy[:, :-1], np.diff(rgb, axis=1), atol=1e-6)
    assert not dy[:, -1].any() and not dx[:, :, -1].any()
    np.testing.assert_allclose(tv, np.abs(np.diff(rgb, axis=1)).sum((1, 2, 3)) +
                               np.abs(np.diff(rgb, axis=2)).sum((1, 2, 3)), rtol=1e-5)
    mse = ((rgb * 0.1) ** 2).mean((1, 2, 3))
    np.testing.assert_allclose(score, -10 * np.log10(mse), rtol=1e-5)


def test_uint8_adjustments_keep_the_dtype_and_jpeg_quality_round_trips():
    rng = np.random.default_rng(2)
    ramps = np.add.outer(np.arange(16), np.arange(24))[..., None] * [4, 6, 8]
    image = np.clip(ramps + rng.integers(0, 10, (16, 24, 3)), 0, 255).astype(np.uint8)
    x = tf.constant(image)
    with tf.Session() as sess:
        hue, sat, low, high, noisy = sess.run([
            tf.image.random_hue(x, 0.2, seed=1), tf.image.random_saturation(x, 0.5, 1.5, seed=1),
            tf.image.adjust_jpeg_quality(x, 10),
            tf.image.adjust_jpeg_quality(tf.image.convert_image_dtype(x, tf.float32), 95),
            tf.image.psnr(x, tf.image.adjust_jpeg_quality(x, 10), 255)])
    assert hue.dtype == sat.dtype == low.dtype == np.uint8 and hue.shape == image.shape
    assert high.dtype == np.float32 and np.abs(high - image / 255).mean() < 0.02
    assert np.abs(low.astype(int) - image).mean() > np.abs(high * 255 - image).mean()
    assert 15 < noisy < 40
    with pytest.raises(ValueError, match="max_delta must be in"):
        tf.image.random_hue(x, 0.7)


def test_non_max_suppression_keeps_the_best_of_overlapping_boxes_and_freezes():
    from exporter.freeze import freeze

    boxes = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                      [0, 100, 1, 101]], np.float32)
    scores = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3], np.float32)
    b, s = tf.placeholder(tf.float32, [None, 4], name="boxes"), tf.placeholder(tf.float32, [None], name="scores")
    selected = tf.image.non_max_suppression(b, s, 3, iou_threshold=0.5)
    above = tf.image.non_max_suppression(b, s, 10, score_threshold=0.55)
    kept, kept_scores = tf.image.non_max_suppression_with_scores(b, s, 2)
    feeds = {b: boxes, s: scores}
    with tf.Session() as sess:
        assert sess.run(selected, feeds).tolist() == [3, 0, 5]  # TensorFlow's documented greedy order
        assert sess.run(above, feeds).tolist() == [3, 0]
        np.testing.assert_allclose(sess.run(kept_scores, feeds), [0.95, 0.9])
        model = freeze(sess, inputs={"boxes": b, "scores": s}, outputs={"selected": selected})
    assert "NonMaxSuppression" in [n.op_type for n in model.graph.nodes]
    assert selected.dtype == tf.int32 and kept.dtype == tf.int32


def test_resize_image_with_pad_and_sobel_edges():
    image = np.arange(4 * 8, dtype=np.float32).reshape(1, 4, 8, 1)
    x = tf.constant(image)
    padded = tf.image.resize_image_with_pad(x, 8, 8, method=tf.image.ResizeMethod.NEAREST_NEIGHBOR)
    ramp = np.add.outer(np.arange(5, dtype=np.float32) * 2, np.arange(6, dtype=np.float32) * 3)[None, :, :, None]
    edges = tf.image.sobel_edges(tf.constant(ramp))
    with tf.Session() as sess:
        out, sobel = sess.run([padded, edges])
    assert out.shape == (1, 8, 8, 1) and padded.get_shape().as_list() == [1, 8, 8, 1]
    assert not out[0, :2].any() and not out[0, 6:].any()  # 4x8 fits as 4x8, two zero rows above and below
    np.testing.assert_array_equal(out[0, 2:6], image[0])
    assert sobel.shape == (1, 5, 6, 1, 2)
    np.testing.assert_allclose(sobel[0, 1:-1, 1:-1, 0, 0], 8 * 2)  # rows step 2: 1+2+1 times 2 rows apart
    np.testing.assert_allclose(sobel[0, 1:-1, 1:-1, 0, 1], 8 * 3)


def test_draw_bounding_boxes_outlines_each_box_in_its_color():
    images = np.zeros((1, 5, 7, 3), np.float32)
    boxes = np.array([[[0.0, 0.0, 0.5, 0.5], [0.25, 0.5, 1.0, 1.5], [2.0, 2.0, 3.0, 3.0]]], np.float32)
    with tf.Session() as sess:
        drawn = sess.run(tf.image.draw_bounding_boxes(tf.constant(images), boxes))
        red = sess.run(tf.image.draw_bounding_boxes(tf.constant(images), boxes[:, :1], colors=[[1.0, 0, 0, 1]]))
    yellow, blue = [1, 1, 0], [0, 0, 1]
    expected = np.zeros((5, 7, 3), np.float32)
    expected[0, 0:4] = expected[2, 0:4] = expected[0:3, 0] = expected[0:3, 3] = yellow  # rows 0-2, columns 0-3
    expected[1, 3:7] = expected[4, 3:7] = expected[1:5, 3] = blue  # rows 1-4 from column 3; its right edge is outside
    np.testing.assert_array_equal(drawn[0], expected)
    assert red[0, 0, 0].tolist() == [1, 0, 0]


def test_sample_distorted_bounding_box_crops_as_inception_preprocessing_does():
    image = tf.constant(np.arange(60 * 80 * 3, dtype=np.float32).reshape(60, 80, 3))
    boxes = tf.constant([[[0.1, 0.2, 0.6, 0.7]]])
    begin, size, box = tf.image.sample_distorted_bounding_box(tf.shape(image), boxes, seed=3, min_object_covered=0.5,
                                                              aspect_ratio_range=[0.5, 2.0], area_range=[0.1, 1.0])
    crop = tf.slice(image, begin, size)
    with tf.Session() as sess:
        draws = [sess.run([begin, size, box, crop]) for _ in range(20)]
    with tf.Session() as sess:
        assert sess.run(begin).tolist() == draws[0][0].tolist()  # seeded: a new session replays the crops
    assert len({tuple(b.tolist()) for b, _, _, _ in draws}) > 5
    for (y, x, _), (h, w, depth), (((y0, x0, y1, x1),),), pixels in draws:
        assert depth == -1 and pixels.shape == (h, w, 3)
        assert 0.1 * 60 * 80 <= h * w <= 60 * 80 and 0.5 - 0.5 / h <= w / h <= 2.0 + 0.5 / h  # w: round(h * ratio)
        covered = max(0, min(y + h, 36) - max(y, 6)) * max(0, min(x + w, 56) - max(x, 16)) / (30 * 40)
        assert covered >= 0.5  # of the box in pixels: rows 6-36, columns 16-56
        np.testing.assert_allclose([y0, x0, y1, x1], [y / 60, x / 80, (y + h) / 60, (x + w) / 80], rtol=1e-6)
    no_boxes = tf.image.sample_distorted_bounding_box([60, 80, 3], tf.zeros([1, 0, 4]))
    with tf.Session() as sess, pytest.raises(tf.errors.InvalidArgumentError, match="use_image_if_no_bounding_boxes"):
        sess.run(no_boxes)
