"""Segment reductions and dynamic_partition / dynamic_stitch as TF 1.15 scripts use them, against
NumPy references and TF's gradients (ties share a segment's gradient)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

DATA = np.array([[1.0, 5.0], [3.0, 2.0], [4.0, 4.0], [0.0, 7.0], [2.0, -1.0]])


def _reference(ids, n, reduce, empty):
    out = np.full((n, DATA.shape[1]), empty)
    for s in range(n):
        rows = DATA[ids == s]
        if len(rows):
            out[s] = reduce(rows, axis=0)
    return out


def test_sorted_segments_leave_empty_segments_at_zero():
    ids = np.array([0, 0, 2, 2, 3])
    ops = [tf.segment_max(DATA, ids), tf.segment_min(DATA, ids), tf.segment_prod(DATA, ids)]
    assert all(o.shape == (None, 2) for o in ops)
    got = tf.Session().run(ops)
    for out, reduce in zip(got, (np.max, np.min, np.prod)):
        np.testing.assert_array_equal(out, _reference(ids, 4, reduce, 0.0))


def test_unsorted_segments_take_any_order_and_drop_negative_ids():
    ids = tf.placeholder(tf.int32, [5])
    value = np.array([2, -1, 0, 2, 0])
    ops = [tf.unsorted_segment_max(DATA, ids, 4), tf.unsorted_segment_min(DATA, ids, 4),
           tf.unsorted_segment_prod(DATA, ids, 4), tf.math.unsorted_segment_sqrt_n(DATA, ids, 4)]
    assert all(o.shape == (4, 2) for o in ops)
    mx, mn, prod, sqrt_n = tf.Session().run(ops, {ids: value})
    lowest, highest = np.finfo(np.float64).min, np.finfo(np.float64).max
    np.testing.assert_array_equal(mx, _reference(value, 4, np.max, lowest))
    np.testing.assert_array_equal(mn, _reference(value, 4, np.min, highest))
    np.testing.assert_array_equal(prod, _reference(value, 4, np.prod, 1.0))
    counts = np.bincount(value[value >= 0], minlength=4)[:, None]
    np.testing.assert_allclose(sqrt_n, _reference(value, 4, np.sum, 0.0) / np.sqrt(np.maximum(counts, 1)))


def test_sums_and_means_drop_negative_ids_and_take_fed_ids():
    ids = tf.placeholder(tf.int32, [5])
    value = np.array([2, -1, 0, 2, 0])
    x = tf.placeholder(tf.float64, [5, 2])
    total = tf.unsorted_segment_sum(x, ids, 4)
    counted = tf.unsorted_segment_sum(x, ids, tf.constant(4))  # a tensor num_segments
    mean = tf.unsorted_segment_mean(x, ids, 4)
    grad = tf.gradients(tf.reduce_sum(total * np.arange(8.0).reshape(4, 2)), x)[0]
    with tf.Session() as sess:
        t, c, m, g = sess.run([total, counted, mean, grad], {x: DATA, ids: value})
    counts = np.bincount(value[value >= 0], minlength=4)[:, None]
    np.testing.assert_array_equal(t, _reference(value, 4, np.sum, 0.0))
    np.testing.assert_array_equal(c, t)
    np.testing.assert_allclose(m, t / np.maximum(counts, 1))
    np.testing.assert_array_equal(g, [[4, 5], [0, 0], [0, 1], [4, 5], [0, 1]])  # the dropped row gets none


def test_sorted_sums_and_means_take_ids_known_only_when_run():
    ids = tf.placeholder(tf.int64, [None])
    total, mean = tf.segment_sum(DATA, ids), tf.segment_mean(DATA, ids)
    with tf.Session() as sess:
        t, m = sess.run([total, mean], {ids: [0, 0, 2, 2, 3]})
    np.testing.assert_array_equal(t, _reference(np.array([0, 0, 2, 2, 3]), 4, np.sum, 0.0))
    np.testing.assert_array_equal(m, _reference(np.array([0, 0, 2, 2, 3]), 4, np.mean, 0.0))


def test_max_gradient_is_shared_among_ties():
    x = tf.placeholder(tf.float64, [4])
    y = tf.segment_max(x, [0, 0, 0, 1])
    u = tf.unsorted_segment_min(x, [1, 1, -1, 0], 2)
    w = tf.constant([1.0, 2.0], tf.float64)
    gy, gu = tf.gradients(tf.reduce_sum(y * w), x)[0], tf.gradients(tf.reduce_sum(u * (w + 2.0)), x)[0]
    out_y, out_u = tf.Session().run([gy, gu], {x: [5.0, 5.0, 1.0, 2.0]})
    assert out_y.tolist() == [0.5, 0.5, 0.0, 2.0]  # the tie at 5.0 splits segment 0's gradient
    assert out_u.tolist() == [2.0, 2.0, 0.0, 3.0]


def test_product_gradient_with_zeros_in_a_segment():
    x = tf.placeholder(tf.float64, [7])
    p = tf.unsorted_segment_prod(x, [0, 0, 0, 1, 1, 2, -1], 3)
    (g,) = tf.gradients(tf.reduce_sum(p), [x])
    out = tf.Session().run(g, {x: [2.0, 0.0, 3.0, 0.0, 0.0, 5.0, 9.0]})
    # segment 0 has one zero: only that entry's gradient is nonzero (2 * 3); segment 1 has two: none
    assert out.tolist() == [0.0, 6.0, 0.0, 0.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize("build, error, message", [
    (lambda: tf.segment_max(DATA, tf.constant([0, 1, 0, 2, 2])), tf.errors.InvalidArgumentError,
     r"SegmentMax: segment ids are not increasing: segment_ids\[2\] = 0 follows 1"),
    (lambda: tf.unsorted_segment_prod(DATA, tf.constant([0, 1, 5, 2, 2]), 3), tf.errors.InvalidArgumentError,
     r"UnsortedSegmentProd: segment_ids\[2\] = 5 is out of range \[0, 3\)"),
    # The edge runtime's kernel (a frozen embedding lookup runs it) refuses the ids, naming the node.
    (lambda: tf.dynamic_partition(DATA, tf.constant([0, 1, 2, 0, 0]), 2)[0], tf.errors.InvalidArgumentError,
     r"node 'DynamicPartition'.*partition index 2 is outside \[0, 2\)"),
    (lambda: tf.unsorted_segment_sum(DATA, tf.constant([0, 1, 5, 2, 2]), 3), tf.errors.InvalidArgumentError,
     r"ScatterND.*index 5 is out of bounds"),
])
def test_bad_ids_fail_the_run_naming_the_op(build, error, message):
    with pytest.raises(error, match=message):
        tf.Session().run(build())


def test_mismatched_shapes_fail_when_built():
    with pytest.raises(ValueError, match="segment_ids should be the same size as dimension 0 of data: 3 vs 5"):
        tf.segment_min(DATA, [0, 0, 1])
    with pytest.raises(ValueError, match=r"segment_ids of shape \(4,\) must lead data of shape \(5, 2\)"):
        tf.unsorted_segment_max(DATA, [0, 0, 1, 1], 2)
    with pytest.raises(ValueError, match="segment_ids must be int32 or int64"):
        tf.segment_prod(DATA, tf.constant([0.0, 0.0, 1.0, 1.0, 1.0]))


def test_partition_and_stitch_round_trip_with_gradients():
    x = tf.placeholder(tf.float64, [5, 2])
    parts = tf.dynamic_partition(x, [1, 0, 1, 2, 0], 3)
    positions = tf.dynamic_partition(tf.range(5), [1, 0, 1, 2, 0], 3)
    merged = tf.dynamic_stitch(positions, [p * 2.0 for p in parts])
    grad = tf.gradients(tf.reduce_sum(parts[1] * 3.0) + tf.reduce_sum(parts[2]), x)[0]
    with tf.Session() as sess:
        p, m, g = sess.run([parts, merged, grad], {x: DATA})
    np.testing.assert_array_equal(p[0], DATA[[1, 4]])
    np.testing.assert_array_equal(p[1], DATA[[0, 2]])
    np.testing.assert_array_equal(p[2], DATA[[3]])
    np.testing.assert_array_equal(m, DATA * 2.0)
    np.testing.assert_array_equal(g, [[3, 3], [0, 0], [3, 3], [1, 1], [0, 0]])
    with pytest.raises(ValueError, match="2 index tensors but 1 data tensors"):
        tf.dynamic_stitch(positions[:2], parts[:1])
