"""tf.complex, tf.real, tf.imag, tf.conj and tf.angle: values against NumPy, and their gradients
(TensorFlow's rules) through real-valued chains against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.trainer.gradient_check import central_difference

R = np.random.default_rng(11)


def test_complex_parts_round_trip_in_both_widths():
    for part, want in ((np.float32, np.complex64), (np.float64, np.complex128)):
        re, im = R.normal(size=(2, 3)).astype(part), R.normal(size=(2, 3)).astype(part)
        z = tf.complex(tf.constant(re), tf.constant(im))
        assert z.dtype == want and z.shape == (2, 3)
        got = tf.Session().run([z, tf.real(z), tf.imag(z), tf.conj(z), tf.angle(z)])
        np.testing.assert_array_equal(got[0], re + 1j * im)
        np.testing.assert_array_equal(got[1], re)
        np.testing.assert_array_equal(got[2], im)
        np.testing.assert_array_equal(got[3], re - 1j * im)
        np.testing.assert_allclose(got[4], np.angle(re + 1j * im), rtol=1e-6)
        assert all(g.dtype == part for g in (got[1], got[2], got[4]))


def test_real_inputs_pass_through_as_tensorflow_does():
    x = tf.constant([-2.0, 0.0, 3.0])
    got = tf.Session().run([tf.real(x), tf.imag(x), tf.conj(x), tf.angle(x)])
    np.testing.assert_array_equal(got[0], [-2.0, 0.0, 3.0])
    np.testing.assert_array_equal(got[1], [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(got[2], [-2.0, 0.0, 3.0])
    np.testing.assert_allclose(got[3], [np.pi, 0.0, 0.0])


def test_bad_dtypes_are_rejected():
    with pytest.raises(TypeError, match="complex: real and imag must be float32 or float64"):
        tf.complex(tf.constant([1], tf.int32), tf.constant([2], tf.int32))
    with pytest.raises(TypeError, match="conj: expected a numeric tensor"):
        tf.conj(tf.constant(["a"]))


@pytest.mark.parametrize("chain", ["real_imag", "conj", "angle"])
def test_gradients_through_complex_values(chain):
    a = tf.placeholder(tf.float64, [4])
    b = tf.placeholder(tf.float64, [4])
    z = tf.complex(a, b)
    w1, w2 = R.uniform(0.5, 1.5, 4), R.uniform(0.5, 1.5, 4)
    if chain == "real_imag":
        loss = tf.reduce_sum(tf.square(tf.real(z)) * w1 + tf.sin(tf.imag(z)) * w2)
    elif chain == "conj":
        loss = tf.reduce_sum(tf.imag(tf.conj(z)) * w1 + tf.real(tf.conj(z)) * w2)
    else:
        loss = tf.reduce_sum(tf.angle(z) * w1)
    av, bv = R.uniform(0.3, 2.0, 4), R.uniform(-2.0, 2.0, 4)
    sess = tf.Session()
    ga, gb = sess.run(tf.gradients(loss, [a, b]), {a: av, b: bv})
    np.testing.assert_allclose(ga, central_difference(lambda v: sess.run(loss, {a: v, b: bv}), av), rtol=1e-6)
    np.testing.assert_allclose(gb, central_difference(lambda v: sess.run(loss, {a: av, b: v}), bv), rtol=1e-6)
