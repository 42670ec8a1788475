"""tf.custom_gradient in a graph: the decorated call's gradients are grad_fn's, none flow through
the function's own ops, and several inputs and outputs map as TensorFlow maps them."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def test_clipped_gradient_replaces_the_ops_own() -> None:
    @tf.custom_gradient
    def clip_gradient(x):
        return tf.identity(x), lambda dy: tf.clip_by_value(dy, -0.1, 0.1)

    x = tf.Variable([2.0, -3.0])
    y = clip_gradient(x) * 10.0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(y), [20.0, -30.0])
        np.testing.assert_allclose(sess.run(tf.gradients(tf.reduce_sum(y), x)[0]), [0.1, 0.1])


def test_a_stable_gradient_where_the_ops_own_is_nan() -> None:
    """TensorFlow's documented example: d/dx log(1 + e^x) at x = 100 is nan through the ops (e^x
    overflows float32: inf / inf); the custom rule 1 - 1 / (1 + e^x) gives 1. The overflow is a
    value, as in TensorFlow, not a NumPy warning (which this suite turns into an error)."""
    @tf.custom_gradient
    def log1pexp(x):
        e = tf.exp(x)
        return tf.log(1 + e), lambda dy: dy * (1 - 1 / (1 + e))

    x = tf.constant(100.0)
    plain = tf.log(1 + tf.exp(x))
    with tf.Session() as sess:
        assert sess.run(tf.gradients(log1pexp(x), x)[0]) == pytest.approx(1.0)
        assert np.isnan(sess.run(tf.gradients(plain, x)[0]))


def test_several_inputs_and_outputs() -> None:
    @tf.custom_gradient
    def pair(a, b):
        return (a * b, a + b), lambda d_product, d_sum: (d_product * 0 + 1.0, d_sum * 0 + 2.0)

    w = tf.Variable([1.0, 2.0])
    product, total = pair(w, w * 3.0)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(product), [3.0, 12.0])
        # grad_fn's 1 for a, plus its 2 for b = 3w: 1 + 2 * 3
        np.testing.assert_allclose(sess.run(tf.gradients(tf.reduce_sum(product) + tf.reduce_sum(total), w)[0]),
                                   [7.0, 7.0])


def test_a_wrong_number_of_gradients_is_named() -> None:
    @tf.custom_gradient
    def bad(a, b):
        return a + b, lambda dy: dy

    y = bad(tf.constant(1.0), tf.constant(2.0))
    with pytest.raises(ValueError, match="grad_fn returned 1 gradients for 2 inputs"):
        tf.gradients(y, tf.get_default_graph().get_operations()[0].outputs[0])
