"""map_fn, scan, foldl and foldr over nests of tensors, as TF 1.x scripts use them: per-example
(image, label) pairs, several outputs of different dtypes, tuple accumulators, with gradients."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def test_map_fn_over_a_tuple_gives_a_tuple_of_dtypes() -> None:
    images = tf.placeholder(tf.float32, [None, 2, 2])
    labels = tf.placeholder(tf.int32, [None])
    flipped, shifted = tf.map_fn(lambda e: (tf.reverse(e[0], [1]), e[1] + 1), (images, labels),
                                 dtype=(tf.float32, tf.int32))
    x = np.arange(12, dtype=np.float32).reshape(3, 2, 2)
    got = tf.Session().run([flipped, shifted], {images: x, labels: [0, 5, 9]})
    np.testing.assert_array_equal(got[0], x[:, :, ::-1])
    assert got[1].tolist() == [1, 6, 10] and got[1].dtype == np.int32


def test_map_fn_over_a_dict_and_to_another_dtype() -> None:
    out = tf.map_fn(lambda e: {"sum": e["a"] + e["b"], "big": e["a"] > 1.5},
                    {"a": tf.constant([1.0, 2.0]), "b": tf.constant([10.0, 20.0])},
                    dtype={"big": tf.bool, "sum": tf.float32})
    got = tf.Session().run(out)
    assert got["sum"].tolist() == [11.0, 22.0] and got["big"].tolist() == [False, True]


def test_scan_and_folds_carry_tuple_accumulators() -> None:
    values = tf.constant([1.0, 2.0, 3.0])
    sums, products = tf.scan(lambda acc, v: (acc[0] + v, acc[1] * v), values,
                             initializer=(tf.constant(0.0), tf.constant(1.0)))
    total, count = tf.foldl(lambda acc, v: (acc[0] + v, acc[1] + 1), values, initializer=(0.0, 0))
    firsts = tf.foldr(lambda acc, pair: pair, (values, values * 2))  # no initializer: elems' nest is the state
    got = tf.Session().run([sums, products, total, count, firsts])
    assert got[0].tolist() == [1.0, 3.0, 6.0] and got[1].tolist() == [1.0, 2.0, 6.0]
    assert (got[2], got[3]) == (6.0, 3)
    assert tuple(got[4]) == (1.0, 2.0)  # folded from the last element down to the first


def test_gradients_flow_through_every_tensor_of_the_nest() -> None:
    a = tf.Variable([1.0, 2.0, 3.0])
    b = tf.Variable([4.0, 5.0, 6.0])
    products = tf.map_fn(lambda e: e[0] * e[1], (a, b))
    grad_a, grad_b = tf.gradients(tf.reduce_sum(products), [a, b])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(grad_a), [4.0, 5.0, 6.0])
        np.testing.assert_array_equal(sess.run(grad_b), [1.0, 2.0, 3.0])


def test_nests_of_unequal_length_and_wrong_dtype_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="same length along axis 0"):
        tf.map_fn(lambda e: e[0], (tf.zeros([3]), tf.zeros([4])))
    with pytest.raises(ValueError, match="dtype has 1 entries but fn returns 2 tensors"):
        tf.map_fn(lambda e: (e, e), tf.zeros([3]), dtype=tf.float32)
