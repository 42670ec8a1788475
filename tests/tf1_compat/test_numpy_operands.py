"""TF 1.x semantics at the seams with NumPy and Python values: arithmetic with an array on the
left builds one node (not one per element), a variable made from a constant takes the constant's
dtype, and a summary's tag carries the name scope it was made in."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboard.compat.proto.summary_pb2 import Summary

import trainer as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


OPERATORS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "matmul": lambda a, b: a @ b, "pow": lambda a, b: a ** b, "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b, "lt": lambda a, b: a < b, "ge": lambda a, b: a >= b,
}


@pytest.mark.parametrize("op", sorted(OPERATORS))
@pytest.mark.parametrize("kind", ["tensor", "variable"])
def test_an_array_on_the_left_builds_one_node(op, kind) -> None:
    rng = np.random.default_rng(0)
    left = rng.uniform(0.5, 4.0, (8, 8)).astype(np.float32)
    right_value = rng.uniform(0.5, 3.0, (8, 8)).astype(np.float32)
    right = tf.constant(right_value) if kind == "tensor" else tf.Variable(right_value)
    before = len(tf.get_default_graph().get_operations())
    got = OPERATORS[op](left, right)
    assert isinstance(got, tf.Tensor), type(got)
    # the operator (a few nodes for floordiv and mod) and the array's constant, not one per element
    assert len(tf.get_default_graph().get_operations()) - before <= 8
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(got), OPERATORS[op](left, right_value), rtol=1e-5)


def test_numpy_scalars_and_python_numbers_on_the_left_too() -> None:
    t = tf.constant([1.0, 2.0])
    for got in (np.float32(2) * t, 2 * t, 1.0 - t, np.float64(3) / tf.cast(t, tf.float64)):
        assert isinstance(got, tf.Tensor)
    assert tf.Session().run(np.float32(2) * t).tolist() == [2.0, 4.0]


def test_a_numpy_function_on_a_tensor_is_refused() -> None:
    with pytest.raises(TypeError):
        np.add(np.ones(2, np.float32), tf.constant([1.0, 2.0]))


@pytest.mark.parametrize("initializer, dtype", [
    (np.int64(0), np.int64), (0.25, np.float32), (np.float64(1.0), np.float64),
    (np.array([1, 2], np.int32), np.int32), (lambda: tf.constant(3, dtype=tf.int32), np.int32),
])
def test_a_variable_from_a_constant_takes_its_dtype(initializer, dtype) -> None:
    value = initializer() if callable(initializer) else initializer
    v = tf.get_variable("v", initializer=value)
    assert v.dtype == dtype
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(v), np.asarray(tf.Session().run(value) if isinstance(value, tf.Tensor)
                                                              else value, dtype))


def test_an_explicit_dtype_still_wins_and_functions_default_to_float32() -> None:
    assert tf.get_variable("a", initializer=np.int64(1), dtype=tf.float32).dtype == np.float32
    assert tf.get_variable("b", shape=[2]).dtype == np.float32
    with tf.variable_scope("s", dtype=tf.float64):
        assert tf.get_variable("c", initializer=np.float32(1)).dtype == np.float64


def _tags(summary_op) -> list[str]:
    with tf.Session() as sess:
        return [v.tag for v in Summary.FromString(np.asarray(sess.run(summary_op), dtype=object)[()]).value]


def test_summary_tags_carry_their_name_scope_and_are_made_unique() -> None:
    x = tf.constant(1.0)
    with tf.name_scope("train"):
        tf.summary.scalar("loss", x)
        tf.summary.scalar("loss", x)
        tf.summary.histogram("weights", tf.constant([1.0, 2.0]))
    with tf.variable_scope("model"):
        tf.summary.scalar("accuracy", x, family="eval")
    tf.summary.scalar("top", x)
    assert _tags(tf.summary.merge_all()) == ["train/loss", "train/loss_1", "train/weights", "eval/model/eval/accuracy",
                                             "top"]
