"""tf.orthogonal_initializer, tf.qr, tf.assert_rank / assert_rank_at_least / assert_type,
tf.random_crop and tf.bincount, against NumPy and TF 1.15's errors."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


@pytest.mark.parametrize("shape", [(3, 5), (6, 4), (2, 2, 3, 4)])
def test_orthogonal_initializer_gives_orthonormal_rows_or_columns(shape):
    tf.set_random_seed(1)
    w = tf.get_variable("w", shape, initializer=tf.orthogonal_initializer(gain=2.0))
    v = tf.Variable(tf.initializers.orthogonal(seed=3)([4, 4]))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        flat = sess.run(w).reshape(-1, shape[-1])
        first = sess.run(v)
        sess.run(v.initializer)
        again = sess.run(v)
    small = flat @ flat.T if flat.shape[0] < flat.shape[1] else flat.T @ flat
    np.testing.assert_allclose(small, 4.0 * np.eye(min(flat.shape)), atol=1e-5)
    np.testing.assert_allclose(first.T @ first, np.eye(4), atol=1e-5)
    assert not np.allclose(first, again)  # drawn anew by each initializer run


def test_orthogonal_initializer_refuses_vectors():
    with pytest.raises(ValueError, match="must be at least two-dimensional"):
        tf.get_variable("b", [3], initializer=tf.orthogonal_initializer())


def test_qr_reconstructs_the_matrix():
    a = np.random.default_rng(0).normal(size=(2, 5, 3))
    q, r = tf.qr(tf.constant(a))
    qf, rf = tf.linalg.qr(tf.constant(a[0]), full_matrices=True)
    assert q.shape == (2, 5, 3) and r.shape == (2, 3, 3) and qf.shape == (5, 5) and rf.shape == (5, 3)
    qv, rv, qfv = tf.Session().run([q, r, qf])
    np.testing.assert_allclose(qv @ rv, a, atol=1e-10)
    np.testing.assert_allclose(np.triu(rv), rv)
    np.testing.assert_allclose(qfv.T @ qfv, np.eye(5), atol=1e-10)


def test_assert_rank_is_static_where_it_can_be():
    x = tf.constant(np.zeros((2, 3), np.float32), name="x")
    assert tf.assert_rank(x, 2).type == "NoOp" and tf.assert_rank_at_least(x, 1).type == "NoOp"
    with pytest.raises(ValueError, match=r"wrong\.  Tensor x:0 must have rank 3\.  Received rank 2, shape \(2, 3\)"):
        tf.assert_rank(x, 3, message="wrong")
    with pytest.raises(ValueError, match=r"Tensor x:0 must have rank at least 3\.  Received rank 2"):
        tf.assert_rank_at_least(x, 3)


def test_assert_rank_of_an_unknown_rank_checks_when_run():
    x = tf.placeholder(tf.float32, None, name="p")
    with tf.control_dependencies([tf.assert_rank(x, 2, message="images")]):
        y = tf.identity(x)
    at_least = tf.assert_rank_at_least(x, 2)
    with tf.Session() as sess:
        sess.run([y, at_least], {x: np.zeros((1, 2))})
        sess.run(at_least, {x: np.zeros((1, 2, 3))})
        with pytest.raises(tf.errors.InvalidArgumentError, match="images: Tensor p:0 must have rank 2"):
            sess.run(y, {x: np.zeros(3)})
        with pytest.raises(tf.errors.InvalidArgumentError, match="Tensor p:0 must have rank at least 2"):
            sess.run(at_least, {x: np.zeros(3)})


def test_assert_type():
    x = tf.constant([1.0], name="f")
    assert tf.assert_type(x, tf.float32).type == "NoOp"
    with pytest.raises(TypeError, match="labels  f:0 must be of type tf.int32"):
        tf.assert_type(x, tf.int32, message="labels")


def test_random_crop_takes_a_window_at_a_random_offset():
    image = np.arange(6 * 7 * 3, dtype=np.float32).reshape(6, 7, 3)
    x = tf.placeholder(tf.float32, [None, None, 3])
    crop = tf.random_crop(x, [4, 2, 3], seed=5)
    image_crop = tf.image.random_crop(x, [6, 7, 3])
    assert crop.shape == (4, 2, 3)
    offsets = set()
    with tf.Session() as sess:
        for _ in range(30):
            c = sess.run(crop, {x: image})
            i, j = divmod(int(c[0, 0, 0]) // 3, 7)
            np.testing.assert_array_equal(c, image[i:i + 4, j:j + 2])
            offsets.add((i, j))
        np.testing.assert_array_equal(sess.run(image_crop, {x: image}), image)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Need value.shape >= size"):
            sess.run(crop, {x: image[:3]})
    assert len(offsets) > 5 and all(0 <= i <= 2 and 0 <= j <= 5 for i, j in offsets)
    with pytest.raises(ValueError, match="Need value.shape >= size"):
        tf.random_crop(tf.zeros([2, 2]), [3, 1])


def test_bincount_as_numpy():
    values = np.array([[1, 1, 4], [0, 4, 4]], np.int32)
    weights = np.array([[0.5, 1.0, 2.0], [1.0, 1.0, 1.0]], np.float32)
    counts = tf.bincount(values)
    assert counts.dtype == tf.int32
    ops = [counts, tf.math.bincount(values, weights=weights), tf.bincount(values, minlength=7, dtype=tf.float64),
           tf.bincount(values, maxlength=2), tf.bincount(tf.zeros([0], tf.int32))]
    c, w, m, cut, empty = tf.Session().run(ops)
    assert c.tolist() == np.bincount(values.ravel()).tolist()
    np.testing.assert_allclose(w, np.bincount(values.ravel(), weights.ravel()))
    assert m.dtype == np.float64 and m.tolist() == np.bincount(values.ravel(), minlength=7).tolist()
    assert cut.tolist() == [1, 2] and empty.tolist() == []
    with pytest.raises(tf.errors.InvalidArgumentError, match="Bincount: input arr must be non-negative"):
        tf.Session().run(tf.bincount(tf.constant([1, -2], tf.int32)))
