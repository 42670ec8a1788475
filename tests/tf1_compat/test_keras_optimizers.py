"""Keras optimizers follow Keras' update rules exactly (NumPy references of Keras 2.2's formulas), with
their Keras defaults: RMSprop divides by sqrt(accumulator) + epsilon, unlike tf.train's RMSProp."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

EPS = 1e-7
GRADS = [np.array([0.5, -1.0], np.float32), np.array([-0.2, 0.3], np.float32), np.array([1.5, 0.1], np.float32)]


def _sgd(p, g, s, t, lr=0.1, momentum=0.9, nesterov=True):
    v = momentum * s.get("v", 0) - lr * g
    s["v"] = v
    return p + momentum * v - lr * g if nesterov else p + v


def _rmsprop(p, g, s, t, lr=0.001, rho=0.9):
    s["a"] = rho * s.get("a", 0) + (1 - rho) * g ** 2
    return p - lr * g / (np.sqrt(s["a"]) + EPS)


def _adagrad(p, g, s, t, lr=0.01):
    s["a"] = s.get("a", 0) + g ** 2
    return p - lr * g / (np.sqrt(s["a"]) + EPS)


def _adadelta(p, g, s, t, lr=1.0, rho=0.95):
    s["a"] = rho * s.get("a", 0) + (1 - rho) * g ** 2
    update = g * np.sqrt(s.get("d", 0) + EPS) / np.sqrt(s["a"] + EPS)
    s["d"] = rho * s.get("d", 0) + (1 - rho) * update ** 2
    return p - lr * update


def _adam(p, g, s, t, lr=0.001, b1=0.9, b2=0.999, amsgrad=True):
    lr_t = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g ** 2
    s["vhat"] = np.maximum(s.get("vhat", 0), s["v"])
    return p - lr_t * s["m"] / (np.sqrt(s["vhat"] if amsgrad else s["v"]) + EPS)


def _adamax(p, g, s, t, lr=0.002, b1=0.9, b2=0.999):
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["u"] = np.maximum(b2 * s.get("u", 0), np.abs(g))
    return p - lr / (1 - b1 ** t) * s["m"] / (s["u"] + EPS)


def _nadam(p, g, s, t, lr=0.002, b1=0.9, b2=0.999, sd=0.004):
    cache_t = b1 * (1 - 0.5 * 0.96 ** (t * sd))
    cache_t1 = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * sd))
    schedule = s.get("schedule", 1.0) * cache_t
    schedule_next = schedule * cache_t1
    s["schedule"] = schedule
    g_prime = g / (1 - schedule)
    s["m"] = b1 * s.get("m", 0) + (1 - b1) * g
    s["v"] = b2 * s.get("v", 0) + (1 - b2) * g ** 2
    m_bar = (1 - cache_t) * g_prime + cache_t1 * s["m"] / (1 - schedule_next)
    return p - lr * m_bar / (np.sqrt(s["v"] / (1 - b2 ** t)) + EPS)


@pytest.mark.parametrize("optimizer, reference", [
    (lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True), _sgd),
    (lambda: tf.keras.optimizers.RMSprop(), _rmsprop),
    (lambda: tf.keras.optimizers.Adagrad(), _adagrad),
    (lambda: tf.keras.optimizers.Adadelta(), _adadelta),
    (lambda: tf.keras.optimizers.Adam(amsgrad=True), _adam),
    (lambda: tf.keras.optimizers.Adamax(), _adamax),
    (lambda: tf.keras.optimizers.Nadam(), _nadam),
])
def test_updates_follow_keras_formulas(optimizer, reference):
    start = np.array([1.0, 2.0], np.float32)
    w = tf.Variable(start)
    g = tf.placeholder(tf.float32, [2])
    updates = optimizer().get_updates(tf.reduce_sum(w * g), [w])
    want, state = start.astype(np.float64), {}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for t, grad in enumerate(GRADS, start=1):
            sess.run(updates, {g: grad})
            want = reference(want, grad.astype(np.float64), state, t)
        np.testing.assert_allclose(sess.run(w), want, rtol=1e-5, atol=1e-6)


def test_decay_and_clipping():
    w = tf.Variable(np.array([0.0], np.float32))
    optimizer = tf.keras.optimizers.SGD(1.0, decay=0.5, clipvalue=0.25)
    updates = optimizer.get_updates(tf.reduce_sum(w * 3.0), [w])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(2):
            sess.run(updates)
        # step 1: lr 1 / (1 + 0.5 * 0), step 2: 1 / (1 + 0.5 * 1); the gradient 3 clipped to 0.25
        np.testing.assert_allclose(sess.run(w), [-(0.25 + 0.25 / 1.5)], rtol=1e-6)
