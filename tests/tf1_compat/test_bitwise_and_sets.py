"""``tf.bitwise`` (TensorFlow's integer semantics, checked against NumPy) and ``tf.sets``."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(5)
INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def run(fetches, feed=None):
    return tf.Session().run(fetches, feed)


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_and_or_xor_invert_match_numpy(dtype):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, size=20, dtype=dtype, endpoint=True)
    y = RNG.integers(info.min, info.max, size=20, dtype=dtype, endpoint=True)
    a, o, e, n = run([tf.bitwise.bitwise_and(x, y), tf.bitwise.bitwise_or(x, y), tf.bitwise.bitwise_xor(x, y),
                      tf.bitwise.invert(x)])
    for got, want in ((a, x & y), (o, x | y), (e, x ^ y), (n, ~x)):
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)


def test_documented_examples():
    # TensorFlow's docstrings: and/or/xor of [0, 5, 3, 14] with [5, 0, 7, 11]; invert of uint8 0 and 255
    lhs, rhs = np.array([0, 5, 3, 14], np.int32), np.array([5, 0, 7, 11], np.int32)
    np.testing.assert_array_equal(run(tf.bitwise.bitwise_and(lhs, rhs)), [0, 0, 3, 10])
    np.testing.assert_array_equal(run(tf.bitwise.bitwise_or(lhs, rhs)), [5, 5, 7, 15])
    np.testing.assert_array_equal(run(tf.bitwise.bitwise_xor(lhs, rhs)), [5, 5, 4, 5])
    np.testing.assert_array_equal(run(tf.bitwise.invert(np.array([0, 255], np.uint8))), [255, 0])
    # left_shift/right_shift of int8 [-1, -5, -3, -14] by [5, 0, 7, 11]: shifts past 7 bits clamp to 7
    x, s = np.array([-1, -5, -3, -14], np.int8), np.array([5, 0, 7, 11], np.int8)
    np.testing.assert_array_equal(run(tf.bitwise.left_shift(x, s)), [-32, -5, -128, 0])
    np.testing.assert_array_equal(run(tf.bitwise.right_shift(x, s)), [-1, -5, -1, -1])


def test_shifts_against_numpy_with_clamping():
    x = RNG.integers(-1000, 1000, size=30).astype(np.int32)
    s = RNG.integers(-3, 40, size=30).astype(np.int32)
    clamped = np.clip(s, 0, 31)
    np.testing.assert_array_equal(run(tf.bitwise.left_shift(x, s)), np.left_shift(x, clamped))
    np.testing.assert_array_equal(run(tf.bitwise.right_shift(x, s)), np.right_shift(x, clamped))
    u = np.array([2 ** 63, 1], np.uint64)
    np.testing.assert_array_equal(run(tf.bitwise.right_shift(u, np.array([63, 0], np.uint64))), [1, 1])
    # broadcasting a scalar shift
    np.testing.assert_array_equal(run(tf.bitwise.left_shift(x, np.int32(2))), x << 2)


def test_bitwise_bad_input():
    with pytest.raises(TypeError, match="bitwise.BitwiseAnd: expected an integer tensor"):
        tf.bitwise.bitwise_and(np.array([1.0]), np.array([2.0]))
    with pytest.raises(TypeError, match="same dtype"):
        tf.bitwise.bitwise_or(np.array([1], np.int32), np.array([2], np.int64))
    with pytest.raises(TypeError, match="invert: expected an integer tensor"):
        tf.bitwise.invert(tf.constant([True]))


def test_sets_namespace_both_spellings():
    a = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.int64)
    b = np.array([[[1, 3], [2, 4]], [[5, 5], [9, 9]]], np.int64)
    inter, union, diff, size = run([tf.sets.intersection(a, b), tf.sets.set_union(a, b),
                                    tf.sets.difference(a, b), tf.sets.size(a)])
    np.testing.assert_array_equal(size, [[2, 2], [2, 2]])
    expected = {"inter": {}, "union": {}, "diff": {}}
    for i in range(2):
        for j in range(2):
            sa, sb = set(a[i, j]), set(b[i, j])
            expected["inter"][(i, j)] = sorted(sa & sb)
            expected["union"][(i, j)] = sorted(sa | sb)
            expected["diff"][(i, j)] = sorted(sa - sb)
    for key, value in (("inter", inter), ("union", union), ("diff", diff)):
        rows: dict = {}
        for idx, v in zip(value.indices, value.values):
            rows.setdefault((idx[0], idx[1]), []).append(v)
        assert {k: v for k, v in expected[key].items() if v} == rows
    assert tf.sets.union is tf.sets.set_union and tf.sets.size is tf.sets.set_size


def test_tf1_script_feature_hash_with_bit_ops():
    """A TF1 script: pack two small ids into one key with shifts and masks, then unpack them."""
    hi = tf.placeholder(tf.int64, (None,), name="hi")
    lo = tf.placeholder(tf.int64, (None,), name="lo")
    key = tf.bitwise.bitwise_or(tf.bitwise.left_shift(hi, tf.constant(16, tf.int64)), lo)
    back_hi = tf.bitwise.right_shift(key, tf.constant(16, tf.int64))
    back_lo = tf.bitwise.bitwise_and(key, tf.constant(0xFFFF, tf.int64))
    ids_hi, ids_lo = np.array([3, 0, 65535]), np.array([7, 65535, 1])
    with tf.Session() as sess:
        k, h, low = sess.run([key, back_hi, back_lo], {hi: ids_hi, lo: ids_lo})
    np.testing.assert_array_equal(k, (ids_hi << 16) | ids_lo)
    np.testing.assert_array_equal(h, ids_hi)
    np.testing.assert_array_equal(low, ids_lo)
