"""``tf.contrib.seq2seq.sequence_loss``: TensorFlow's reductions, against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((2, 3, 4)).astype(np.float32)
TARGETS = np.array([[0, 3, 1], [2, 2, 0]], np.int64)
WEIGHTS = np.array([[1, 1, 0], [1, 0.5, 0]], np.float32)


def crossent() -> np.ndarray:
    shifted = LOGITS - LOGITS.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return -np.take_along_axis(logp, TARGETS[..., None], -1)[..., 0] * WEIGHTS


@pytest.mark.parametrize("flags,reduce", [
    ({}, lambda c: c.sum() / WEIGHTS.sum()),
    ({"average_across_batch": False}, lambda c: c.sum(1) / WEIGHTS.sum(1)),
    ({"average_across_timesteps": False},  # time step 2 has no weight: 0, as div_no_nan gives
     lambda c: np.divide(c.sum(0), WEIGHTS.sum(0), out=np.zeros(3, np.float32), where=WEIGHTS.sum(0) > 0)),
    ({"average_across_timesteps": False, "average_across_batch": False}, lambda c: c),
    ({"average_across_timesteps": False, "average_across_batch": False, "sum_over_timesteps": True,
      "sum_over_batch": True}, lambda c: c.sum() / np.count_nonzero(WEIGHTS)),
])
def test_reductions(flags, reduce):
    loss = tf.contrib.seq2seq.sequence_loss(tf.constant(LOGITS), tf.constant(TARGETS), tf.constant(WEIGHTS), **flags)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(loss), reduce(crossent()), rtol=1e-5, atol=1e-6)


def test_a_contradiction_is_refused():
    with pytest.raises(ValueError, match="cannot be set to True at same time"):
        tf.contrib.seq2seq.sequence_loss(LOGITS, TARGETS, WEIGHTS, sum_over_timesteps=True)
