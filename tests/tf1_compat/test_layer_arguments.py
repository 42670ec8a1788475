"""tf.layers' full TF 1.15 argument lists: kernel/bias/activity regularizers and constraints on every
weighted layer (applied by the optimizers after each update), batch_normalization's beta/gamma
regularizers, fused= and its refused options, flatten's data_format; and NewCheckpointReader."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _l2(scale):
    return tf.contrib.layers.l2_regularizer(scale)


@pytest.mark.parametrize("build", [
    lambda x2, x4, x3, x5: tf.layers.dense(x2, 3, kernel_regularizer=_l2(0.1), bias_regularizer=_l2(0.2)),
    lambda x2, x4, x3, x5: tf.layers.conv2d(x4, 3, 2, kernel_regularizer=_l2(0.1), bias_regularizer=_l2(0.2)),
    lambda x2, x4, x3, x5: tf.layers.conv2d_transpose(x4, 3, 2, kernel_regularizer=_l2(0.1), bias_regularizer=_l2(0.2)),
    lambda x2, x4, x3, x5: tf.layers.conv1d(x3, 3, 2, kernel_regularizer=_l2(0.1), bias_regularizer=_l2(0.2)),
    lambda x2, x4, x3, x5: tf.layers.conv3d(x5, 3, 2, kernel_regularizer=_l2(0.1), bias_regularizer=_l2(0.2)),
    lambda x2, x4, x3, x5: tf.layers.separable_conv2d(x4, 3, 2, depthwise_regularizer=_l2(0.1),
                                                      pointwise_regularizer=_l2(0.1), bias_regularizer=_l2(0.2)),
], ids=["dense", "conv2d", "conv2d_transpose", "conv1d", "conv3d", "separable_conv2d"])
def test_weight_regularizers_join_the_regularization_losses(build) -> None:
    inputs = (tf.ones([2, 4]), tf.ones([1, 4, 4, 2]), tf.ones([1, 5, 2]), tf.ones([1, 3, 3, 3, 2]))
    build(*inputs)
    losses = tf.losses.get_regularization_losses()
    weights = {v.op.name.rsplit("/", 1)[-1]: v for v in tf.trainable_variables()}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sum(sess.run(losses))
        want = sum((0.2 if name == "bias" else 0.1) * (sess.run(v) ** 2).sum() / 2 for name, v in weights.items())
    assert len(losses) == len(weights)
    assert got == pytest.approx(want, rel=1e-5)


def test_the_activity_regularizer_is_per_example() -> None:
    x = tf.placeholder(tf.float32, [None, 2])
    tf.layers.dense(x, 2, kernel_initializer=tf.ones_initializer(), activity_regularizer=tf.contrib.layers.l1_regularizer(1.0))
    (penalty,) = tf.losses.get_regularization_losses()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        # outputs [[3, 3], [7, 7]]: sum |y| = 20, over a batch of 2
        assert sess.run(penalty, {x: [[1.0, 2.0], [3.0, 4.0]]}) == pytest.approx(10.0)


def test_constraints_apply_after_each_update() -> None:
    x = tf.constant([[1.0, 1.0]])
    y = tf.layers.dense(x, 1, kernel_initializer=tf.constant_initializer(0.9),
                        kernel_constraint=lambda w: tf.clip_by_value(w, -1.0, 1.0),
                        bias_constraint=lambda b: tf.maximum(b, 0.0))
    train = tf.train.GradientDescentOptimizer(1.0).minimize(-tf.reduce_sum(y) + 10.0 * tf.reduce_sum(
        [v for v in tf.trainable_variables() if "bias" in v.op.name][0]))
    kernel, bias = tf.trainable_variables()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(kernel), [[1.0], [1.0]])  # 0.9 + 1 clipped to 1
        assert sess.run(bias) == pytest.approx([0.0])  # 0 - 9 held at 0


def test_batch_normalization_takes_tf_1_15s_arguments() -> None:
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.layers.batch_normalization(x, fused=True, gamma_regularizer=_l2(1.0), beta_regularizer=_l2(1.0),
                                      renorm_momentum=0.9, training=True)
    (gamma_loss, beta_loss) = tf.losses.get_regularization_losses()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run(y, {x: [[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]]})
        assert sess.run(gamma_loss) == pytest.approx(1.5) and sess.run(beta_loss) == 0.0
    np.testing.assert_allclose(out[:, 0], [-1.0, 1.0], atol=1e-2)
    with pytest.raises(ValueError, match="renorm=True is not supported"):
        tf.layers.batch_normalization(x, renorm=True)
    with pytest.raises(ValueError, match="virtual_batch_size is not supported"):
        tf.layers.batch_normalization(x, virtual_batch_size=2)


def test_flatten_channels_first_orders_features_as_channels_last() -> None:
    nchw = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    first = tf.layers.flatten(tf.constant(nchw), data_format="channels_first")
    last = tf.layers.flatten(tf.constant(nchw.transpose(0, 2, 3, 1)))
    with tf.Session() as sess:
        np.testing.assert_array_equal(sess.run(first), sess.run(last))


def test_new_checkpoint_reader_reads_a_saved_checkpoint(tmp_path) -> None:
    w = tf.get_variable("w", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        prefix = tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    reader = tf.train.NewCheckpointReader(prefix)
    assert reader.get_variable_to_shape_map() == {"w": [2, 3]} and reader.has_tensor("w")
    np.testing.assert_array_equal(reader.get_tensor("w"), np.arange(6).reshape(2, 3))
