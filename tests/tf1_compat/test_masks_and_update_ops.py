"""Two TF1 idioms: per-token losses masked with tf.sequence_mask and tf.boolean_mask, and batch
normalization's update ops as control dependencies of an optimizer that makes slot variables."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_boolean_mask_with_a_sequence_mask_keeps_the_valid_tokens_and_their_gradients():
    lengths = tf.placeholder(tf.int32, [None])
    losses = tf.placeholder(tf.float32, [None, 5, 2])
    kept = tf.boolean_mask(losses, tf.sequence_mask(lengths, 5))
    total = tf.reduce_sum(kept * kept)
    grad, = tf.gradients(total, [losses])
    value = np.arange(30, dtype=np.float32).reshape(3, 5, 2)
    with tf.Session() as sess:
        got, g = sess.run([kept, grad], {lengths: [1, 3, 5], losses: value})
    mask = np.arange(5)[None, :] < np.asarray([1, 3, 5])[:, None]
    np.testing.assert_array_equal(got, value[mask])
    np.testing.assert_array_equal(g, np.where(mask[..., None], 2 * value, 0))


def test_boolean_mask_along_a_later_axis():
    x = tf.constant(np.arange(24).reshape(2, 3, 4))
    got = tf.boolean_mask(x, tf.constant([[True, False, True, False]] * 3), axis=1)
    with tf.Session() as sess:
        assert sess.run(got).tolist() == np.arange(24).reshape(2, 12)[:, [0, 2, 4, 6, 8, 10]].tolist()


@pytest.mark.parametrize("optimizer", [lambda: tf.train.MomentumOptimizer(0.1, 0.9),
                                       lambda: tf.train.AdamOptimizer(0.01)], ids=["momentum", "adam"])
def test_slot_variables_made_under_update_ops_initialize_without_feeds(optimizer):
    """TF creates variables in an init scope: the update ops' control dependencies (which read the
    fed batch) must not reach the slots' initializers."""
    x = tf.placeholder(tf.float32, [None, 4])
    training = tf.placeholder_with_default(False, [])
    h = tf.layers.batch_normalization(x, training=training)
    loss = tf.reduce_mean(tf.square(tf.layers.dense(h, 1) - 1.0))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train = optimizer().minimize(loss)
    batch = np.random.default_rng(0).normal(3.0, 2.0, (64, 4)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())  # no feed
        for _ in range(50):
            sess.run(train, {x: batch, training: True})
        moving_mean = sess.run([v for v in tf.global_variables() if "moving_mean" in v.name][0])
    # the update ops ran with every step: momentum 0.99 from 0 towards the batch mean
    np.testing.assert_allclose(moving_mean, batch.mean(axis=0) * (1 - 0.99 ** 50), rtol=1e-4)
