"""tf.case and tf.make_template as TF 1.15 scripts use them: branch selection with its assertions,
and variables shared across a template's calls."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def _sign_case(x, **kwargs):
    return tf.case([(tf.less(x, 0), lambda: tf.constant(-1.0)), (tf.equal(x, 0), lambda: tf.constant(0.0))],
                   default=lambda: tf.constant(1.0), **kwargs)


def test_case_takes_the_first_true_branch_else_the_default():
    x = tf.placeholder(tf.int32, [])
    y = _sign_case(x)
    with tf.Session() as sess:
        assert [float(sess.run(y, {x: v})) for v in (-3, 0, 8)] == [-1.0, 0.0, 1.0]


def test_only_the_chosen_branch_runs():
    counter = tf.Variable(0)
    x = tf.placeholder(tf.bool, [])
    y = tf.case([(x, lambda: tf.identity(tf.assign_add(counter, 1)))], default=lambda: tf.assign_add(counter, 10))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(y, {x: True})
        sess.run(y, {x: False})
        assert sess.run(counter) == 11


def test_without_a_default_the_last_branch_asserts_its_predicate():
    x = tf.placeholder(tf.int32, [])
    y = tf.case([(tf.less(x, 0), lambda: tf.constant(-1)), (tf.greater(x, 0), lambda: tf.constant(1))])
    with tf.Session() as sess:
        assert sess.run(y, {x: 4}) == 1 and sess.run(y, {x: -4}) == -1
        with pytest.raises(tf.errors.InvalidArgumentError, match="None of conditions evaluated as True"):
            sess.run(y, {x: 0})


def test_exclusive_fails_when_two_predicates_hold_and_dicts_order_by_name(tf_log):
    x = tf.placeholder(tf.int32, [], name="x")
    small, smaller = tf.less(x, 10, name="b_small"), tf.less(x, 5, name="a_smaller")
    ordered = tf.case({small: lambda: tf.constant(10), smaller: lambda: tf.constant(5)}, default=lambda: tf.constant(0))
    assert "unordered dictionary of predicate/fn pairs" in tf_log.text  # TF's warning, on the tensorflow logger
    exclusive = tf.case([(small, lambda: tf.constant(10)), (smaller, lambda: tf.constant(5))],
                        default=lambda: tf.constant(0), exclusive=True)
    with tf.Session() as sess:
        assert sess.run(ordered, {x: 3}) == 5  # a_smaller sorts first
        assert sess.run(exclusive, {x: 7}) == 10 and sess.run(exclusive, {x: 20}) == 0
        with pytest.raises(tf.errors.InvalidArgumentError, match="More than one condition evaluated as True but "
                                                                 "exclusive=True"):
            sess.run(exclusive, {x: 3})


def test_case_refuses_bad_pairs():
    x = tf.placeholder(tf.int32, [])
    with pytest.raises(TypeError, match="pred must be Tensor of type bool"):
        tf.case([(x, lambda: x)])
    with pytest.raises(TypeError, match="must be a 2-tuple"):
        tf.case([[tf.less(x, 0), lambda: x]])
    with pytest.raises(TypeError, match="must be callable"):
        tf.case([(tf.less(x, 0), x)])
    with pytest.raises(TypeError, match="fns must be a list, tuple, or dict"):
        tf.case(tf.less(x, 0))


def _dense(x, units):
    w = tf.get_variable("w", [x.shape[-1], units], initializer=tf.constant_initializer(0.5))
    return tf.matmul(x, w)


def test_template_shares_its_variables_across_calls():
    layer = tf.make_template("dense", _dense, units=2)
    a = layer(tf.constant([[1.0, 2.0]]))
    b = layer(tf.constant([[3.0, 4.0]]))
    assert [v.name for v in tf.global_variables()] == ["dense/w:0"]
    assert layer.variable_scope_name == "dense" and [v.name for v in layer.trainable_variables] == ["dense/w:0"]
    other = tf.make_template("dense", _dense, units=2)  # same name: a scope of its own
    other(tf.constant([[1.0, 1.0]]))
    assert [v.name for v in tf.global_variables()] == ["dense/w:0", "dense_1/w:0"]
    grads = tf.gradients(tf.reduce_sum(a) + tf.reduce_sum(b), layer.trainable_variables)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(a), [[1.5, 1.5]])
        np.testing.assert_allclose(sess.run(grads[0]), [[4.0, 4.0], [6.0, 6.0]])


def test_create_scope_now_and_unique_name():
    with tf.variable_scope("outer"):
        early = tf.make_template("t", _dense, create_scope_now_=True, units=1)
    assert early.variable_scope_name == "outer/t"
    early(tf.constant([[1.0]]))  # called outside "outer": the variables are still under it
    named = tf.make_template("ignored", _dense, unique_name_="exact", units=1)
    named(tf.constant([[1.0]]))
    assert [v.name for v in tf.global_variables()] == ["outer/t/w:0", "exact/w:0"]


def test_a_new_variable_on_a_later_call_is_an_error():
    calls = tf.make_template("counter", lambda: tf.Variable(1.0))
    calls()
    with pytest.raises(ValueError, match="Trainable variable created when calling a template after the first time"):
        calls()
    with pytest.raises(ValueError, match="name cannot be None"):
        tf.make_template(None, _dense)

