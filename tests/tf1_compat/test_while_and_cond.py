"""``tf.while_loop`` and ``tf.cond`` with TensorFlow 1.x's whole signatures: nested loop variables,
``shape_invariants``, ``maximum_iterations``, ``back_prop``, ``return_same_structure``, ``strict``."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import trainer as tf

Pair = collections.namedtuple("Pair", "total count")


def run(fetches, feeds=None):
    with tf.Session() as sess:
        return sess.run(fetches, feeds)


def test_nested_loop_variables_keep_their_structure():
    i, (state, (a, b)) = tf.while_loop(
        lambda i, s: i < 3,
        lambda i, s: (i + 1, (Pair(s[0].total + 2.0, s[0].count + 1), (s[1][0] * 2.0, s[1][1] - 1.0))),
        (tf.constant(0), (Pair(tf.constant(0.0), tf.constant(0)), (tf.constant(1.0), tf.constant(5.0)))))
    assert isinstance(state, Pair)
    assert run([i, state.total, state.count, a, b]) == [3, 6.0, 3, 8.0, 2.0]


def test_one_loop_variable_comes_back_as_a_tensor_unless_the_structure_is_asked_for():
    single = tf.while_loop(lambda i: i < 4, lambda i: i + 1, [tf.constant(0)])
    same = tf.while_loop(lambda i: i < 4, lambda i: [i + 1], [tf.constant(0)], return_same_structure=True)
    assert isinstance(single, tf.Tensor) and isinstance(same, list) and len(same) == 1
    assert run([single, same[0]]) == [4, 4]


def test_maximum_iterations_bounds_the_trip_count():
    x = tf.placeholder(tf.float32, [])
    _, doubled = tf.while_loop(lambda i, v: v < 1000.0, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x],
                               maximum_iterations=tf.constant(3))
    capped = tf.while_loop(lambda v: v < 1000.0, lambda v: v * 2.0, [x], maximum_iterations=10)
    none = tf.while_loop(lambda v: v < 1000.0, lambda v: v * 2.0, [x], maximum_iterations=0)
    assert run([doubled, capped, none], {x: 1.0}) == [8.0, 1024.0, 1.0]
    assert run(capped, {x: 0.5}) == 512.0  # ten doublings, then the bound stops it
    (grad,) = tf.gradients(doubled, [x])
    assert run(grad, {x: 1.0}) == 8.0


def test_shape_invariants_let_a_loop_variable_grow():
    def body(i, seq):
        return i + 1, tf.concat([seq, tf.reshape(tf.cast(i, tf.float32) * 10.0, [1])], axis=0)

    _, seq = tf.while_loop(lambda i, seq: i < 4, body, [tf.constant(0), tf.zeros([1])],
                           shape_invariants=[tf.TensorShape([]), tf.TensorShape([None])])
    assert seq.shape == (None,)
    np.testing.assert_array_equal(run(seq), [0.0, 0.0, 10.0, 20.0, 30.0])
    with pytest.raises(tf.GraphError, match=r"shape \(1,\) but has shape \(2,\) after one iteration.*shape_invariants"):
        tf.while_loop(lambda i, seq: i < 4, body, [tf.constant(0), tf.zeros([1])])
    with pytest.raises(ValueError, match=r"enters the loop with shape \(1,\), which does not fit its shape invariant \(2,\)"):
        tf.while_loop(lambda i, seq: i < 4, body, [tf.constant(0), tf.zeros([1])],
                      shape_invariants=[tf.TensorShape([]), tf.TensorShape([2])])
    with pytest.raises(ValueError, match="do not have the structure of the loop variables"):
        tf.while_loop(lambda i, seq: i < 4, body, [tf.constant(0), tf.zeros([1])], shape_invariants=[tf.TensorShape([])])


def test_a_body_returning_another_structure_is_named():
    with pytest.raises(tf.GraphError, match=r"the body returns \(x,\) for loop variables \(x, x\)"):
        tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1,), (tf.constant(0), tf.constant(1.0)))


def test_back_prop_false_runs_but_refuses_gradients():
    x = tf.placeholder(tf.float32, [])
    _, y = tf.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v * x), [tf.constant(0), x], back_prop=False,
                         swap_memory=True, parallel_iterations=1)
    assert run(y, {x: 3.0}) == 27.0
    with pytest.raises(tf.GraphError, match="back_prop=False"):
        tf.gradients(y, [x])


def test_cond_returns_nests_and_unpacks_singletons_unless_strict():
    p = tf.placeholder(tf.bool, [])
    nested = tf.cond(p, lambda: (tf.constant(1), {"a": tf.constant(2.0)}), lambda: (tf.constant(3), {"a": tf.constant(4.0)}))
    single = tf.cond(p, lambda: [tf.constant(1)], lambda: [tf.constant(2)])
    strict = tf.cond(p, lambda: [tf.constant(1)], lambda: [tf.constant(2)], strict=True)
    old = tf.cond(p, fn1=lambda: tf.constant(5), fn2=lambda: tf.constant(6))
    assert isinstance(single, tf.Tensor) and isinstance(strict, list)
    assert run([nested[0], nested[1]["a"], single, strict[0], old], {p: False}) == [3, 4.0, 2, 2, 6]
    with pytest.raises(tf.GraphError, match=r"true_fn returns \(x, x\), false_fn x"):
        tf.cond(p, lambda: (tf.constant(1), tf.constant(1)), lambda: tf.constant(2))


def test_cond_of_ops_runs_the_taken_branchs_op():
    v = tf.Variable(0.0)
    p = tf.placeholder(tf.bool, [])
    update = tf.cond(p, lambda: tf.group(tf.assign(v, 5.0)), lambda: tf.no_op())
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(update, {p: False}) is None and sess.run(v) == 0.0
        sess.run(update, {p: True})
        assert sess.run(v) == 5.0
