"""TF 1.15's remaining top-level array functions (trainer/array_extras.py): values against NumPy or
TensorFlow's documented examples, gradients against central differences, bad input, and a script."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.tf1_compat.gradient_check import numeric_gradient_check

RNG = np.random.default_rng(21)


def run(fetches, feed=None):
    return tf.Session().run(fetches, feed)


# -- roll ------------------------------------------------------------------------------------------
def test_roll_matches_numpy_with_static_and_fed_shifts():
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = tf.placeholder(tf.float32, (None, 3, 4))
    shift = tf.placeholder(tf.int32, ())
    both = tf.roll(x, shift=[1, -2], axis=[0, 2])
    fed = tf.manip.roll(x, shift, axis=1)
    assert both.shape == (None, 3, 4)
    out, out_fed = run([both, fed], {x: v, shift: 7})
    np.testing.assert_array_equal(out, np.roll(v, (1, -2), (0, 2)))
    np.testing.assert_array_equal(out_fed, np.roll(v, 7, 1))
    # the same axis twice adds its shifts, as TensorFlow documents
    np.testing.assert_array_equal(run(tf.roll(v, [2, 3], [1, 1])), np.roll(v, 5, 1))


def test_roll_gradient_and_bad_input():
    numeric_gradient_check(lambda a: tf.roll(a, [1, 2], [0, 1]), [RNG.normal(size=(3, 4))], RNG)
    with pytest.raises(ValueError, match="same number of entries"):
        tf.roll(np.zeros((2, 2)), [1, 2], [0])
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        tf.roll(np.zeros((2, 2)), 1, 2)


# -- tensor scatters -------------------------------------------------------------------------------
def test_tensor_scatter_nd_family_matches_documented_examples():
    tensor = tf.ones([8], tf.int32)
    indices = tf.constant([[4], [3], [1], [7]])
    updates = tf.constant([9, 10, 11, 12], tf.int32)
    upd, add, sub = run([tf.tensor_scatter_nd_update(tensor, indices, updates),
                         tf.tensor_scatter_nd_add(tensor, indices, updates),
                         tf.tensor_scatter_nd_sub(tensor, indices, updates)])
    np.testing.assert_array_equal(upd, [1, 11, 1, 10, 9, 1, 1, 12])
    np.testing.assert_array_equal(add, [1, 12, 1, 11, 10, 1, 1, 13])
    np.testing.assert_array_equal(sub, [1, -10, 1, -9, -8, 1, 1, -11])
    # slices of a matrix, and TF 1.15's older names
    base = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = run(tf.tensor_scatter_update(base, [[0], [2]], [[-1, -1, -1], [-2, -2, -2]]))
    want = base.copy()
    want[[0, 2]] = [[-1] * 3, [-2] * 3]
    np.testing.assert_array_equal(out, want)
    assert tf.tensor_scatter_add is tf.tensor_scatter_nd_add and tf.tensor_scatter_sub is tf.tensor_scatter_nd_sub


def test_tensor_scatter_gradients():
    idx = [[0, 1], [2, 0]]
    numeric_gradient_check(lambda t, u: tf.tensor_scatter_nd_update(t, idx, u),
                           [RNG.normal(size=(3, 2)), RNG.normal(size=(2,))], RNG)
    numeric_gradient_check(lambda t, u: tf.tensor_scatter_nd_sub(t, idx, u),
                           [RNG.normal(size=(3, 2)), RNG.normal(size=(2,))], RNG)


def test_tensor_scatter_rejects_mismatched_updates():
    with pytest.raises(ValueError, match=r"TensorScatterUpdate: updates must have shape \(2, 3\)"):
        tf.tensor_scatter_nd_update(np.zeros((4, 3)), [[0], [1]], np.zeros((2, 4)))
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        tf.tensor_scatter_nd_add(np.zeros(4), np.array([[0.5]]), [1.0])


# -- searchsorted, unravel_index, histograms -------------------------------------------------------
def test_searchsorted_matches_numpy_per_row():
    seq = np.sort(RNG.integers(0, 20, size=(3, 7)), axis=1).astype(np.float32)
    vals = RNG.integers(-2, 22, size=(3, 5)).astype(np.float32)
    left, right = run([tf.searchsorted(seq, vals), tf.searchsorted(seq, vals, side="right", out_type=tf.int64)])
    assert left.dtype == np.int32 and right.dtype == np.int64
    for r in range(3):
        np.testing.assert_array_equal(left[r], np.searchsorted(seq[r], vals[r], side="left"))
        np.testing.assert_array_equal(right[r], np.searchsorted(seq[r], vals[r], side="right"))
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        tf.searchsorted(seq, vals, side="middle")
    with pytest.raises(ValueError, match="same rank"):
        tf.searchsorted(seq, vals[0])


def test_unravel_index_matches_numpy_and_checks_range():
    dims = [6, 7, 8, 9]
    flat = np.array([1621, 1874, 6], np.int64)
    np.testing.assert_array_equal(run(tf.unravel_index(flat, dims)), np.stack(np.unravel_index(flat, dims)))
    np.testing.assert_array_equal(run(tf.unravel_index(np.int32(1621), np.array(dims, np.int32))),
                                  np.unravel_index(1621, dims))
    with pytest.raises(tf.errors.InvalidArgumentError, match="indices must be < prod"):
        run(tf.unravel_index(np.array([6 * 7 * 8 * 9]), dims))
    with pytest.raises(TypeError, match="int32 or int64"):
        tf.unravel_index(np.array([1.5]), dims)


def test_histogram_fixed_width_documented_example():
    # TensorFlow's docstring: [-1.0, 0.0, 1.5, 2.0, 5.0, 15] over [0, 5) in 5 bins
    values = [-1.0, 0.0, 1.5, 2.0, 5.0, 15]
    hist, bins = run([tf.histogram_fixed_width(values, [0.0, 5.0], nbins=5),
                      tf.histogram_fixed_width_bins(values, [0.0, 5.0], nbins=5)])
    np.testing.assert_array_equal(hist, [2, 1, 1, 0, 2])
    np.testing.assert_array_equal(bins, [0, 0, 1, 2, 4, 4])
    v = RNG.uniform(-3, 3, size=500)
    np.testing.assert_array_equal(run(tf.histogram_fixed_width(v, [-3.0, 3.0], nbins=12, dtype=tf.int64)),
                                  np.histogram(v, bins=12, range=(-3, 3))[0])
    with pytest.raises(ValueError, match="nbins must be positive"):
        tf.histogram_fixed_width(values, [0.0, 5.0], nbins=0)


# -- batch gathers and scatters --------------------------------------------------------------------
def test_batch_gather_values_shape_and_gradient():
    params = RNG.normal(size=(2, 5, 3))
    idx = np.array([[4, 0], [1, 1]])
    p = tf.placeholder(tf.float64, (None, 5, 3))
    out = tf.batch_gather(p, idx)
    assert out.shape[-1] == 3
    np.testing.assert_allclose(run(out, {p: params}), np.stack([params[b, idx[b]] for b in range(2)]))
    numeric_gradient_check(lambda a: tf.batch_gather(a, idx), [params], RNG)


def test_batch_scatter_update_writes_rows_per_batch():
    ref = tf.Variable(np.zeros((2, 4), np.float32))
    op = tf.batch_scatter_update(ref, [[1, 3], [0, 2]], [[1.0, 2.0], [3.0, 4.0]])
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    sess.run(op)
    np.testing.assert_array_equal(sess.run(ref), [[0, 1, 0, 2], [3, 0, 4, 0]])


# -- broadcast shapes and paddings -----------------------------------------------------------------
def test_broadcast_static_and_dynamic_shapes():
    assert tf.broadcast_static_shape(tf.TensorShape([None, 1, 3]), tf.TensorShape([2, 1])).as_list() == [None, 2, 3]
    assert tf.broadcast_static_shape(tf.TensorShape([5, 1]), tf.TensorShape([1, 4])).as_list() == [5, 4]
    with pytest.raises(ValueError, match="Incompatible shapes"):
        tf.broadcast_static_shape(tf.TensorShape([2]), tf.TensorShape([3]))
    a = tf.placeholder(tf.int32, (None,))
    out = tf.broadcast_dynamic_shape(a, tf.constant([4, 1]))
    np.testing.assert_array_equal(run(out, {a: [2, 1, 3]}), np.broadcast_shapes((2, 1, 3), (4, 1)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="incompatible shapes"):
        run(out, {a: [3, 3]})


def test_required_space_to_batch_paddings_fit_space_to_batch():
    paddings, crops = run(tf.required_space_to_batch_paddings([5, 7], [2, 3], base_paddings=[[1, 0], [0, 0]]))
    np.testing.assert_array_equal(paddings, [[1, 0], [0, 2]])  # 5+1 -> 6 (even), 7 -> 9 (a multiple of 3)
    np.testing.assert_array_equal(crops, [[0, 0], [0, 2]])
    x = np.arange(35, dtype=np.float32).reshape(1, 5, 7, 1)
    paddings, crops = run(tf.required_space_to_batch_paddings([5, 7], [2, 3]))
    back = tf.batch_to_space_nd(tf.space_to_batch_nd(x, [2, 3], paddings), [2, 3], crops)
    np.testing.assert_array_equal(run(back), x)
    size = tf.placeholder(tf.int32, (2,))  # fed at run time: the same numbers, computed by ops
    fed = run(tf.required_space_to_batch_paddings(size, [2, 3], base_paddings=[[1, 0], [0, 0]]), {size: [5, 7]})
    np.testing.assert_array_equal(fed[0], [[1, 0], [0, 2]])
    np.testing.assert_array_equal(fed[1], [[0, 0], [0, 2]])
    with pytest.raises(ValueError, match="block_shape must be positive"):
        tf.required_space_to_batch_paddings([5, 7], [0, 3])


# -- bitcast and ensure_shape ----------------------------------------------------------------------
def test_bitcast_matches_numpy_views():
    f = np.array([1.0, -2.5], np.float32)
    as_bytes = run(tf.bitcast(f, tf.uint8))
    assert as_bytes.shape == (2, 4)
    np.testing.assert_array_equal(as_bytes, f.view(np.uint8).reshape(2, 4))
    np.testing.assert_array_equal(run(tf.bitcast(as_bytes, tf.float32)), f)
    np.testing.assert_array_equal(run(tf.bitcast(f, tf.int32)), f.view(np.int32))
    with pytest.raises(Exception, match="last dim must be 4"):
        tf.bitcast(np.zeros((2, 3), np.uint8), tf.float32)


def test_ensure_shape_merges_static_shape_and_checks_at_run_time():
    x = tf.placeholder(tf.float32, (None, None))
    y = tf.ensure_shape(x, [None, 3])
    assert y.shape == (None, 3)
    np.testing.assert_array_equal(run(y, {x: np.ones((2, 3))}), np.ones((2, 3)))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"EnsureShape: shape of tensor \[2, 4\] is not "
                                                             r"compatible with expected shape \[\?,3\]"):
        run(y, {x: np.ones((2, 4))})
    with pytest.raises(Exception, match="not compatible"):
        tf.ensure_shape(tf.zeros([2, 2]), [3, 2])
    numeric_gradient_check(lambda a: tf.ensure_shape(a, [2, None]) * a, [RNG.normal(size=(2, 3))], RNG)


def test_tf1_script_with_rolls_and_scatters():
    """A TF1 script: shift a sequence batch, patch entries, look up bins, and train through it."""
    tf.set_random_seed(1)
    x = tf.placeholder(tf.float32, (None, 6), name="x")
    w = tf.get_variable("w", (6,), initializer=tf.zeros_initializer())
    shifted = tf.roll(x + w, shift=1, axis=1)
    patched = tf.tensor_scatter_nd_update(shifted, [[0, 0]], [0.0])
    loss = tf.reduce_mean(tf.square(patched - 1.0))
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    bins = tf.histogram_fixed_width(tf.reshape(patched, [-1]), [0.0, 2.0], nbins=4)
    feed = {x: np.zeros((2, 6), np.float32)}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, feed)
        for _ in range(50):
            sess.run(train, feed)
        last, hist = sess.run([loss, bins], feed)
    assert first == pytest.approx(1.0)
    # entry (0, 0) is always patched to 0, so 1/12 of the squared error (1.0) stays
    assert last == pytest.approx(1.0 / 12, abs=1e-3)
    assert hist.sum() == 12 and hist[0] == 1
