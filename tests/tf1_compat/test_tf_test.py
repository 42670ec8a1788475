"""``tf.test``: a TF 1.15 unit-test file (a ``tf.test.TestCase`` subclass) runs under pytest as it
is, its assertions fail when they should, and the gradient checker measures real errors."""

from __future__ import annotations

import os
import unittest

import numpy as np
import pytest

import trainer as tf


class SquareTest(tf.test.TestCase):
    """Written as a TF 1.15 op test is: graph built in the test, values checked in a session."""

    def testSquare(self):  # noqa: N802 - TensorFlow's test naming
        with self.cached_session():
            x = tf.constant([1.0, -2.0, 3.0])
            y = tf.square(x)
            self.assertAllClose(y.eval(), [1.0, 4.0, 9.0])
            self.assertShapeEqual(np.zeros(3), y)

    def testSessionsShareTheDefaultGraph(self):  # noqa: N802
        a = tf.constant(2.0)
        with self.session() as sess:
            self.assertEqual(sess.run(a * 3), 6.0)
        with self.test_session() as first, self.cached_session() as second:
            self.assertIs(first, second)
            self.assertIs(tf.get_default_session(), second)

    def testEvaluateNestedStructures(self):  # noqa: N802
        values = {"a": tf.constant([1, 2]), "b": (tf.constant(1.5), tf.constant("s"))}
        out = self.evaluate(values)
        self.assertAllEqual(out["a"], [1, 2])
        self.assertAllClose({"a": tf.constant([1.0, 2.0]), "b": [tf.constant(0.5)]},
                            {"a": np.array([1.0, 2.0 + 1e-8]), "b": [0.5]})
        self.assertAllEqual(out["b"][1], "s")

    def testToleranceByType(self):  # noqa: N802
        a = np.array([1.0, 2.0], np.float16)
        self.assertAllCloseAccordingToType(a, a.astype(np.float64) * (1 + 5e-4))
        with self.assertRaises(AssertionError):
            self.assertAllCloseAccordingToType(a.astype(np.float64), a.astype(np.float64) * (1 + 5e-4))

    def testArrayNearAndRanges(self):  # noqa: N802
        self.assertArrayNear([1.0, 2.0], [1.05, 1.95], 0.1)
        self.assertAllInRange(tf.constant([0.0, 0.5, 1.0]), 0.0, 1.0)
        self.assertAllGreater(np.array([2, 3]), 1)
        self.assertAllInSet(tf.constant([1, 2, 1]), {1, 2})

    def testRaisesOpError(self):  # noqa: N802
        with self.cached_session() as sess:
            check = tf.assert_positive(tf.constant([-1.0]), message="must be positive")
            with self.assertRaisesOpError("must be positive"):
                sess.run(check)

    def testTempDirIsPerTest(self):  # noqa: N802
        path = self.get_temp_dir()
        self.assertTrue(os.path.isdir(path))
        self.assertTrue(path.startswith(tf.test.get_temp_dir()))


def test_each_test_gets_a_fresh_default_graph():
    class Probe(tf.test.TestCase):
        def testOne(self):  # noqa: N802
            tf.constant(1.0, name="only")
            self.assertEqual([n.name for n in tf.get_default_graph().get_operations()], ["only"])

        testTwo = testOne  # noqa: N815

    result = unittest.TestResult()
    unittest.defaultTestLoader.loadTestsFromTestCase(Probe).run(result)
    assert result.testsRun == 2 and not result.failures and not result.errors, result.failures + result.errors


def test_assertions_fail_with_their_messages():
    case = tf.test.TestCase()
    case.setUp()
    try:
        with pytest.raises(AssertionError, match="not close"):
            case.assertAllClose([1.0, 2.0], [1.0, 2.1])
        with pytest.raises(AssertionError, match="shape mismatch"):
            case.assertAllClose(np.zeros((2, 3)), np.zeros((3, 2)))
        with pytest.raises(AssertionError, match="same keys"):
            case.assertAllClose({"a": 1.0}, {"b": 1.0})
        with pytest.raises(AssertionError):
            case.assertAllEqual([1, 2], [1, 3])
        with pytest.raises(AssertionError):
            case.assertArrayNear([1.0], [1.5], 0.1)
        with pytest.raises(AssertionError):
            case.assertShapeEqual(np.zeros((2, 2)), tf.zeros([2, 3]))
        with pytest.raises(AssertionError, match="not raised"):
            with case.assertRaisesOpError("x"):
                pass
        with pytest.raises(TypeError, match="NumPy array and a Tensor"):
            case.assertShapeEqual([1, 2], tf.zeros([2]))
    finally:
        case.tearDown()


def test_gradient_checker_matches_analytic_jacobians():
    x = tf.placeholder(tf.float64, (2, 3))
    y = tf.reduce_sum(tf.square(x) * np.array([1.0, 2.0, 3.0]), axis=1)
    x0 = np.arange(6, dtype=np.float64).reshape(2, 3) / 10
    with tf.Session():
        theoretical, numerical = tf.test.compute_gradient(x, (2, 3), y, (2,), x_init_value=x0)
        error = tf.test.compute_gradient_error(x, (2, 3), y, (2,), x_init_value=x0)
    want = np.zeros((6, 2))
    for i in range(6):
        want[i, i // 3] = 2 * x0.reshape(-1)[i] * (i % 3 + 1)
    np.testing.assert_allclose(theoretical, want, atol=1e-12)
    np.testing.assert_allclose(numerical, want, atol=1e-8)
    assert error < 1e-8
    with pytest.raises(ValueError, match="needs a default session"):
        tf.test.compute_gradient(x, (2, 3), y, (2,))


def test_gradient_checker_sees_a_wrong_gradient():
    x = tf.placeholder(tf.float64, (3,))

    @tf.RegisterGradient("FlowstackTestWrongSin")
    def _wrong(op, grad):
        return [grad * 0.0]  # the true gradient is cos(x)

    with tf.get_default_graph().gradient_override_map({"Sin": "FlowstackTestWrongSin"}):
        y = tf.sin(x)
    with tf.Session():
        error = tf.test.compute_gradient_error(x, (3,), y, (3,), x_init_value=np.array([1.0, 2.0, 3.0]))
    assert error == pytest.approx(abs(np.cos(3.0)), rel=1e-5)  # the largest |cos(x)| of the three


def test_module_helpers():
    assert isinstance(tf.test.is_gpu_available(), bool)
    assert tf.test.gpu_device_name() in ("", "/device:GPU:0")
    assert tf.test.is_gpu_available() == (tf.test.gpu_device_name() != "")
    assert tf.test.is_built_with_rocm() is False
    assert tf.test.mock is unittest.mock
    assert os.path.isdir(tf.test.get_temp_dir())
