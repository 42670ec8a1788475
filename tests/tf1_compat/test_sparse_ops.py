"""tf.sparse's own functions (from_dense, reorder, retain, reset_shape, fill_empty_rows,
to_indicator, reduce_*_sparse, segment_*, mask) and tf.sparse_to_dense: values checked against
NumPy loops over the dense equivalents and TF 1.15's documented examples; gradients against
central finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.tf1_compat.gradient_check import numeric_gradient_check

RNG = np.random.default_rng(7)


def run(fetch, feed=None):
    return tf.Session().run(fetch, feed)


def dense_of(value) -> np.ndarray:
    out = np.zeros(value.dense_shape, value.values.dtype)
    for idx, v in zip(value.indices.tolist(), value.values.tolist()):
        out[tuple(idx)] = v
    return out


SP = ([[1, 0], [0, 2], [0, 0]], [1.0, 2.0, 3.0], [3, 3])


def test_from_dense_and_reorder():
    x = np.array([[0, 2.5, 0], [3, 0, -1]], np.float32)
    fd, words = run([tf.sparse.from_dense(x), tf.sparse.from_dense(tf.constant([["a", ""], ["", "b"]]))])
    assert fd.indices.tolist() == np.argwhere(x != 0).tolist() and fd.values.tolist() == x[x != 0].tolist()
    assert fd.dense_shape.tolist() == [2, 3]
    assert words.indices.tolist() == [[0, 0], [1, 1]] and words.values.tolist() == [b"a", b"b"]
    ro = run(tf.sparse.reorder(tf.SparseTensor(*SP)))
    assert ro.indices.tolist() == [[0, 0], [0, 2], [1, 0]] and ro.values.tolist() == [3.0, 2.0, 1.0]
    assert run(tf.sparse_reorder(tf.SparseTensor(*SP))).values.tolist() == [3.0, 2.0, 1.0]


def test_retain_and_reset_shape():
    sp = tf.SparseTensor(*SP)
    kept, tight, wider = run([tf.sparse.retain(sp, [True, False, True]), tf.sparse.reset_shape(sp),
                              tf.sparse.reset_shape(sp, [4, 5])])
    assert kept.indices.tolist() == [[1, 0], [0, 0]] and kept.values.tolist() == [1.0, 3.0]
    assert tight.dense_shape.tolist() == [2, 3] and wider.dense_shape.tolist() == [4, 5]
    with pytest.raises(tf.errors.OpError, match="new_shape must be >= the old dense_shape"):
        run(tf.sparse.reset_shape(sp, [2, 5]))
    with pytest.raises(ValueError, match="to_retain must be 1-D"):
        tf.sparse.retain(sp, [[True]])
    with pytest.raises(TypeError, match="sp_input must be a SparseTensor"):
        tf.sparse.reorder(tf.constant([1.0]))


def test_fill_empty_rows_matches_tfs_example():
    # TF's docstring: rows 1 and 4 are empty, default_value fills them at column 0
    sp = tf.SparseTensor([[0, 1], [0, 3], [2, 0], [3, 1]], [10.0, 11.0, 12.0, 13.0], [5, 6])
    filled, empty = run(tf.sparse.fill_empty_rows(sp, -1.0))
    assert filled.indices.tolist() == [[0, 1], [0, 3], [1, 0], [2, 0], [3, 1], [4, 0]]
    assert filled.values.tolist() == [10.0, 11.0, -1.0, 12.0, 13.0, -1.0]
    assert empty.tolist() == [False, True, False, False, True]


def test_to_indicator_and_sparse_reductions():
    ids = tf.SparseTensor([[0, 0], [0, 1], [2, 0], [2, 1]], [0, 10, 13, 14], [3, 2])
    indicator = run(tf.sparse.to_indicator(ids, 15))
    expected = np.zeros((3, 15), bool)
    expected[0, [0, 10]] = expected[2, [13, 14]] = True
    assert indicator.tolist() == expected.tolist()
    values = [[1, 0], [0, 2], [0, 0], [2, 2]]
    sp = tf.SparseTensor(values, [1.0, -2.0, 2.0, 5.0], [3, 3])
    dense = np.array([[2.0, 0, -2.0], [1.0, 0, 0], [0, 0, 5.0]])
    rows, cols, cols_max = run([tf.sparse.reduce_sum_sparse(sp, 1), tf.sparse.reduce_sum_sparse(sp, 0, keepdims=True),
                                tf.sparse.reduce_max_sparse(sp, 0)])
    assert dense_of(rows).tolist() == dense.sum(1).tolist() and rows.indices.tolist() == [[0], [1], [2]]
    assert dense_of(cols).tolist() == dense.sum(0, keepdims=True).tolist() and cols.dense_shape.tolist() == [1, 3]
    # only stored entries count: column 2 holds -2 and 5, column 1 nothing
    assert cols_max.indices.tolist() == [[0], [2]] and cols_max.values.tolist() == [2.0, 5.0]


def test_sparse_segment_reductions_match_a_loop():
    data = RNG.standard_normal((5, 3))
    indices, segments = [0, 3, 3, 1, 4], [0, 0, 1, 3, 3]
    sums = np.zeros((4, 3))
    counts = np.zeros(4)
    for i, s in zip(indices, segments):
        sums[s] += data[i]
        counts[s] += 1
    safe = np.maximum(counts, 1)[:, None]
    out = run([tf.sparse.segment_sum(data, indices, segments), tf.sparse.segment_mean(data, indices, segments),
               tf.sparse.segment_sqrt_n(data, indices, segments),
               tf.sparse_segment_sqrt_n(data, indices, segments, num_segments=6)])
    np.testing.assert_allclose(out[0], sums)
    np.testing.assert_allclose(out[1], sums / safe)
    np.testing.assert_allclose(out[2], sums / np.sqrt(safe))
    np.testing.assert_allclose(out[3], np.concatenate([sums / np.sqrt(safe), np.zeros((2, 3))]))


def test_mask_and_sparse_to_dense():
    a = tf.IndexedSlices(tf.constant([[10.0, 0], [0, 2], [3, 0]]), tf.constant([12, 26, 37], tf.int64),
                         tf.constant([40, 2], tf.int64))
    masked = tf.sparse.mask(a, [12, 45])
    values, indices = run([masked.values, masked.indices])
    assert indices.tolist() == [26, 37] and values.tolist() == [[0, 2], [3, 0]]
    out = run([tf.sparse_to_dense([[0, 1], [1, 0]], [2, 3], [5, 6], default_value=-1),
               tf.sparse_to_dense([2, 0], [4], 7), tf.sparse_to_dense(3, [5], 1.5)])
    assert out[0].tolist() == [[-1, 5, -1], [6, -1, -1]]
    assert out[1].tolist() == [7, 0, 7, 0]
    assert out[2].tolist() == [0, 0, 0, 1.5, 0]


def test_cross_matches_tfs_documented_example():
    a = tf.SparseTensor([[0, 0], [1, 0], [1, 1]], ["a", "b", "c"], [2, 2])
    b = tf.SparseTensor([[0, 0], [1, 0]], ["d", "e"], [2, 1])
    crossed, with_ints = run([tf.sparse.cross([a, b, tf.constant([["f"], ["g"]])]),
                              tf.sparse.cross([tf.constant([["x"], ["y"]]), tf.constant([[1, 2], [3, 4]], tf.int64)])])
    assert crossed.indices.tolist() == [[0, 0], [1, 0], [1, 1]] and crossed.dense_shape.tolist() == [2, 2]
    assert crossed.values.tolist() == [b"a_X_d_X_f", b"b_X_e_X_g", b"c_X_e_X_g"]
    assert with_ints.values.tolist() == [b"x_X_1", b"x_X_2", b"y_X_3", b"y_X_4"]
    with pytest.raises(TypeError, match="input 0 must hold int64 or string values"):
        tf.sparse.cross([tf.constant([[1.5]])])
    with pytest.raises(tf.errors.OpError, match="different batch sizes"):
        run(tf.sparse.cross([a, tf.constant([["f"]])]))


def test_gradients_match_finite_differences():
    idx = [[1, 0], [0, 2], [0, 0], [3, 1]]
    numeric_gradient_check(lambda v: tf.sparse.reorder(tf.SparseTensor(idx, v, [4, 3])).values,
                           [RNG.standard_normal(4)], RNG)
    numeric_gradient_check(
        lambda v, d: tf.sparse.fill_empty_rows(tf.SparseTensor(idx, v, [5, 3]), d)[0].values,
        [RNG.standard_normal(4), np.array(0.7)], RNG)
    numeric_gradient_check(lambda x: tf.sparse.segment_sqrt_n(x, [0, 2, 2, 1], [0, 0, 1, 1]),
                           [RNG.standard_normal((3, 2))], RNG)
    # entries away from zero: a step at a zero would change which entries are stored
    numeric_gradient_check(lambda x: tf.sparse.from_dense(x).values, [np.array([[0.5, 1.5], [-2.0, 3.0]])], RNG)
    numeric_gradient_check(lambda v, d: tf.sparse_to_dense([[0, 1], [1, 0]], [2, 2], v, d),
                           [RNG.standard_normal(2), np.array(0.3)], RNG)


def test_a_tf1_bag_of_ids_script():
    """Variable-length id lists, as a TF1 recommender feeds them: empty rows filled with an
    out-of-vocabulary id, then one multi-hot row per example."""
    ids = tf.sparse_placeholder(tf.int64, shape=[None, None])
    filled, was_empty = tf.sparse.fill_empty_rows(ids, 0)
    multi_hot = tf.cast(tf.sparse.to_indicator(filled, 6), tf.float32)
    counts = tf.reduce_sum(multi_hot, axis=1)
    with tf.Session() as sess:
        got_hot, got_counts, got_empty = sess.run(
            [multi_hot, counts, was_empty],
            {ids: tf.SparseTensorValue([[0, 0], [0, 1], [2, 0]], [3, 5, 1], [3, 2])})
    assert got_hot.tolist() == [[0, 0, 0, 1, 0, 1], [1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]]
    assert got_counts.tolist() == [2, 1, 1] and got_empty.tolist() == [False, True, False]
