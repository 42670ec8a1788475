"""Space/batch/depth rearrangements and extract_image_patches as TF 1.15 scripts use them, checked
against the examples of TF's documentation and NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_top_level_space_to_depth_and_depth_to_space_are_the_nn_ops():
    x = np.arange(2 * 4 * 6 * 3, dtype=np.float32).reshape(2, 4, 6, 3)
    down = tf.space_to_depth(x, 2)
    up = tf.depth_to_space(down, 2)
    assert down.shape == (2, 2, 3, 12)
    d, u, n = tf.Session().run([down, up, tf.nn.space_to_depth(x, 2)])
    np.testing.assert_array_equal(d, n)
    np.testing.assert_array_equal(d, x.reshape(2, 2, 2, 3, 2, 3).transpose(0, 1, 3, 2, 4, 5).reshape(2, 2, 3, 12))
    np.testing.assert_array_equal(u, x)


def test_space_to_batch_nd_matches_tf_documentation():
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 4, 4, 1)
    y = tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]])
    padded = np.arange(1, 17, dtype=np.float32).reshape(2, 2, 4, 1)
    z = tf.space_to_batch_nd(padded, [2, 2], [[0, 0], [2, 0]])
    assert y.shape == (4, 2, 2, 1) and z.shape == (8, 1, 3, 1)
    yv, zv, back = tf.Session().run([y, z, tf.batch_to_space_nd(z, [2, 2], [[0, 0], [2, 0]])])
    assert yv[..., 0].tolist() == [[[1, 3], [9, 11]], [[2, 4], [10, 12]], [[5, 7], [13, 15]], [[6, 8], [14, 16]]]
    assert zv[..., 0].tolist() == [[[0, 1, 3]], [[0, 9, 11]], [[0, 2, 4]], [[0, 10, 12]],
                                   [[0, 5, 7]], [[0, 13, 15]], [[0, 6, 8]], [[0, 14, 16]]]
    np.testing.assert_array_equal(back, padded)


def _space_to_batch_reference(x, block, paddings):
    p = np.pad(x, [[0, 0], *paddings, [0, 0]])
    b, h, w, c = p.shape
    return p.reshape(b, h // block, block, w // block, block, c).transpose(2, 4, 0, 1, 3, 5).reshape(
        -1, h // block, w // block, c)


def test_4d_forms_round_trip_and_differentiate_as_the_transpose():
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(2, 3, 5, 2))
    paddings = [[1, 0], [2, 1]]
    x = tf.placeholder(tf.float64, [None, 3, 5, 2])
    y = tf.space_to_batch(x, paddings, block_size=2)
    nn_y = tf.nn.space_to_batch(x, paddings, block_size=2)
    back = tf.batch_to_space(y, crops=paddings, block_size=2)
    w = rng.normal(size=(8, 2, 4, 2))
    (grad,) = tf.gradients(tf.reduce_sum(y * w), [x])
    yv, nv, bv, gv = tf.Session().run([y, nn_y, back, grad], {x: xv})
    np.testing.assert_array_equal(yv, _space_to_batch_reference(xv, 2, paddings))
    np.testing.assert_array_equal(nv, yv)
    np.testing.assert_array_equal(bv, xv)
    # The op is linear: its gradient is the adjoint, entry i is <w, S(e_i)>.
    basis = np.eye(xv.size).reshape(-1, *xv.shape)
    expected = np.array([(w * _space_to_batch_reference(e, 2, paddings)).sum() for e in basis]).reshape(xv.shape)
    np.testing.assert_allclose(gv, expected, atol=1e-12)


def test_bad_blocks_and_paddings_are_refused():
    x = tf.zeros([1, 5, 4, 1])
    with pytest.raises(ValueError, match=r"padded_shape\[0\]=5 is not divisible by block_shape\[0\]=2"):
        tf.space_to_batch_nd(x, [2, 2], [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match="paddings must be 2 non-negative"):
        tf.space_to_batch(x, [[0, 1]], block_size=2)
    with pytest.raises(ValueError, match="block_shape must be positive"):
        tf.space_to_batch_nd(x, [0, 1], [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match="the batch 3 is not divisible by the product of block_shape, 4"):
        tf.batch_to_space_nd(tf.zeros([3, 2, 2, 1]), [2, 2], [[0, 0], [0, 0]])
    with pytest.raises(ValueError, match="the dims after the batch must be known"):
        tf.space_to_batch(tf.placeholder(tf.float32, [1, None, 4, 1]), [[0, 0], [0, 0]], block_size=2)


def _patches_reference(x, k, s, r, padding):
    (kh, kw), (sh, sw), (rh, rw) = k, s, r
    eh, ew = (kh - 1) * rh + 1, (kw - 1) * rw + 1
    h, w = x.shape[1:3]
    if padding == "VALID":
        oh, ow = (h - eh) // sh + 1, (w - ew) // sw + 1
    else:
        oh, ow = -(-h // sh), -(-w // sw)
        ph, pw = max((oh - 1) * sh + eh - h, 0), max((ow - 1) * sw + ew - w, 0)
        x = np.pad(x, [[0, 0], [ph // 2, ph - ph // 2], [pw // 2, pw - pw // 2], [0, 0]])
    out = np.zeros((x.shape[0], oh, ow, kh * kw * x.shape[3]), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = x[:, i * sh:i * sh + eh:rh, j * sw:j * sw + ew:rw].reshape(x.shape[0], -1)
    return out


@pytest.mark.parametrize("k, s, r, padding", [
    ((2, 3), (1, 1), (1, 1), "VALID"), ((3, 2), (2, 3), (1, 1), "SAME"),
    ((2, 2), (1, 2), (2, 2), "VALID"), ((3, 3), (2, 2), (2, 1), "SAME"),
])
def test_extract_image_patches_as_numpy(k, s, r, padding):
    x = np.random.default_rng(1).normal(size=(2, 7, 6, 3)).astype(np.float32)
    p = tf.extract_image_patches(x, [1, *k, 1], [1, *s, 1], [1, *r, 1], padding)
    q = tf.image.extract_patches(x, sizes=[1, *k, 1], strides=[1, *s, 1], rates=[1, *r, 1], padding=padding)
    expected = _patches_reference(x, k, s, r, padding)
    assert p.shape == expected.shape
    pv, qv = tf.Session().run([p, q])
    np.testing.assert_array_equal(pv, expected)
    np.testing.assert_array_equal(qv, expected)


def test_extract_image_patches_gradient_counts_each_pixels_windows():
    x = tf.placeholder(tf.float32, [1, 3, 3, 1])
    (grad,) = tf.gradients(tf.reduce_sum(tf.extract_image_patches(x, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1],
                                                                  "VALID")), [x])
    g = tf.Session().run(grad, {x: np.ones((1, 3, 3, 1), np.float32)})
    assert g[0, :, :, 0].tolist() == [[1, 2, 1], [2, 4, 2], [1, 2, 1]]
    with pytest.raises(ValueError, match=r"ksizes must be \[1, rows, cols, 1\]"):
        tf.extract_image_patches(x, [2, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match="padding must be VALID or SAME"):
        tf.extract_image_patches(x, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "FULL")
