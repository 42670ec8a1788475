"""Gradients checked against central differences, shared by the tf1_compat tests of new ops."""

from __future__ import annotations

import numpy as np

import trainer as tf


def numeric_gradient_check(build, values, rng: np.random.Generator) -> None:
    """d(sum(y * w))/d(input) from tf.gradients against central differences, for float64 inputs;
    the weights ``w`` are drawn from ``rng``."""
    phs = [tf.placeholder(tf.float64, v.shape) for v in values]
    y = build(*phs)
    feed = dict(zip(phs, values))
    sess = tf.Session()
    weights = tf.constant(rng.uniform(0.5, 1.5, sess.run(y, feed).shape))
    loss = tf.reduce_sum(y * weights)
    analytic = sess.run(tf.gradients(loss, phs), feed)
    eps = 1e-6
    for k, v in enumerate(values):
        flat = v.reshape(-1)
        for i in range(flat.size):
            old = flat[i]
            flat[i] = old + eps
            up = sess.run(loss, feed)
            flat[i] = old - eps
            down = sess.run(loss, feed)
            flat[i] = old
            np.testing.assert_allclose(np.reshape(analytic[k], -1)[i], (up - down) / (2 * eps), rtol=1e-6, atol=1e-7)
