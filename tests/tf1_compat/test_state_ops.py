"""tf.scatter_* and tf.scatter_nd_*: in-place sparse updates of variables as TF 1.15 scripts use
them, checked against NumPy's ufunc.at (repeated indices accumulate)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

START = np.arange(12, dtype=np.float32).reshape(4, 3) + 1.0
ROW_UPDATES = {  # tf function -> what NumPy does at each index
    tf.scatter_add: np.add, tf.scatter_sub: np.subtract, tf.scatter_mul: np.multiply,
    tf.scatter_div: np.divide, tf.scatter_max: np.maximum, tf.scatter_min: np.minimum,
}


def _run(update, *variables):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(update)
        return out, [sess.run(v) for v in variables]


@pytest.mark.parametrize("fn", ROW_UPDATES, ids=lambda f: f.__name__)
def test_row_updates_accumulate_repeated_indices_as_numpy(fn):
    v = tf.Variable(START)
    updates = np.array([[2, -1, 3], [0.5, 4, -2], [3, 3, 3]], np.float32)
    out, (after,) = _run(fn(v, tf.constant([2, 0, 2]), updates, use_locking=True), v)
    expected = START.copy()
    ROW_UPDATES[fn].at(expected, [2, 0, 2], updates)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    np.testing.assert_allclose(after, expected, rtol=1e-6)


def test_scatter_update_keeps_the_variable_and_broadcasts_a_scalar():
    v = tf.Variable(START)
    w = tf.Variable([1, 2, 3, 4], dtype=tf.int64)
    rows = tf.scatter_update(v, [3, 1], [[0.0, 0.0, 0.0], [7.0, 8.0, 9.0]], name="set_rows")
    scalar = tf.scatter_update(w, np.array([[0], [2]], np.int64), 9)
    assert rows.op.name == "set_rows" and rows.shape == (4, 3) and rows.dtype == tf.float32
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        expected = START.copy()
        expected[3], expected[1] = 0.0, [7, 8, 9]
        np.testing.assert_array_equal(sess.run(rows), expected)
        assert sess.run(scalar).tolist() == [9, 2, 9, 4]


def test_integer_scatter_div_truncates_toward_zero():
    v = tf.Variable([7, -7, 9], dtype=tf.int32)
    out, _ = _run(tf.scatter_div(v, [0, 1, 0], [2, 2, 2]))
    assert out.tolist() == [1, -3, 9] and out.dtype == np.int32  # 7/2 -> 3, then 3/2 -> 1


def test_nd_updates_on_elements_and_slices():
    v = tf.Variable(START)
    elements = tf.scatter_nd_add(v, [[0, 0], [3, 2], [0, 0]], [1.0, 2.0, 3.0])
    out, _ = _run(elements)
    expected = START.copy()
    np.add.at(expected, ([0, 3, 0], [0, 2, 0]), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(out, expected)

    tf.reset_default_graph()
    v = tf.Variable(START)
    rows = tf.scatter_nd_update(v, [[1], [2]], [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])
    expected = START.copy()
    expected[1:3] = [[0, 1, 2], [3, 4, 5]]
    np.testing.assert_array_equal(_run(rows)[0], expected)

    tf.reset_default_graph()
    v = tf.Variable(START)
    sub = tf.scatter_nd_sub(v, [[[1, 1]], [[1, 1]]], [[0.5], [0.25]])
    expected = START.copy()
    expected[1, 1] -= 0.75
    np.testing.assert_array_equal(_run(sub)[0], expected)


def test_variable_methods_take_indexed_slices():
    v = tf.Variable(START)
    delta = tf.IndexedSlices(tf.constant([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]), tf.constant([3, 0]))
    added = v.scatter_add(delta)
    with tf.control_dependencies([added]):
        elements = v.scatter_nd_update([[1, 1]], [-5.0])
    expected = START.copy()
    expected[3] += 1.0
    expected[0] += 2.0
    expected[1, 1] = -5.0
    np.testing.assert_array_equal(_run(elements)[0], expected)
    with pytest.raises(TypeError, match="sparse_delta is not IndexedSlices"):
        v.scatter_sub([[1.0, 1.0, 1.0]])


def test_updates_run_in_order_under_control_dependencies():
    counts = tf.Variable(tf.zeros([3], tf.int32))
    first = tf.scatter_add(counts, [0, 1], [1, 1])
    with tf.control_dependencies([first]):
        second = tf.scatter_max(counts, [1, 2], [5, -1])
    assert _run(second)[0].tolist() == [1, 5, 0]


@pytest.mark.parametrize("build, message", [
    (lambda v: tf.scatter_update(v, [1, 5], [[1.0] * 3] * 2), r"ScatterUpdate: indices\[1\] = 5 is not in \[0, 4\)"),
    (lambda v: tf.scatter_add(v, [-1], [[1.0] * 3]), r"ScatterAdd: indices\[0\] = -1 is not in \[0, 4\)"),
    (lambda v: tf.scatter_nd_update(v, [[0, 0], [4, 1]], [1.0, 2.0]),
     r"ScatterNdUpdate: indices\[1\] = \[4, 1\] does not index into \[4,3\]"),
])
def test_an_index_outside_the_variable_is_an_invalid_argument(build, message):
    v = tf.Variable(START)
    update = build(v)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(tf.errors.InvalidArgumentError, match=message):
            sess.run(update)
        np.testing.assert_array_equal(sess.run(v), START)  # nothing was written


def test_mismatched_updates_and_float_indices_fail_when_built():
    v = tf.Variable(START)
    with pytest.raises(ValueError, match=r"ScatterAdd .*updates of shape \(2, 2\) do not match the shape \(2, 3\)"):
        tf.scatter_add(v, [0, 1], [[1.0, 1.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match=r"ScatterNdAdd .*indices.shape\[-1\] = 3 exceeds the rank 2"):
        tf.scatter_nd_add(v, [[0, 0, 0]], [1.0])
    with pytest.raises(TypeError, match="ScatterMul: indices must be int32 or int64"):
        tf.scatter_mul(v, [0.0], [[1.0] * 3])
