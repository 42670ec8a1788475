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
    with pytest.raises(NotImplementedError, match="no AREA"):
        tf.image.resize_images(x, [4, 4], method=tf.image.ResizeMethod.AREA)


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
