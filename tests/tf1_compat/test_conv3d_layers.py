"""tf.layers' 3-D convolutions and pools as TF 1.15 scripts use them: variables and shapes, values
against tf.nn, a small volumetric classifier of digits that trains and runs the same on the edge."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(3)


def test_conv3d_layer_makes_tf1_variables_and_matches_tf_nn():
    x = tf.placeholder(tf.float32, [None, 4, 6, 6, 2])
    y = tf.layers.conv3d(x, 5, 3, strides=(1, 2, 2), padding="same", activation=tf.nn.relu, name="c3",
                         bias_initializer=tf.constant_initializer(0.1))
    kernel, bias = tf.trainable_variables()
    assert kernel.op.name == "c3/kernel" and kernel.shape == (3, 3, 3, 2, 5) and bias.shape == (5,)
    assert y.shape == (None, 4, 3, 3, 5)
    ref = tf.nn.relu(tf.nn.conv3d(x, kernel, [1, 1, 2, 2, 1], "SAME") + bias)
    xs = RNG.standard_normal((2, 4, 6, 6, 2)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, want = sess.run([y, ref], {x: xs})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (got > 0).any()


def test_layer_classes_and_channels_first_3d_layers():
    x = tf.placeholder(tf.float32, [2, 3, 4, 4, 4])  # NCDHW
    conv = tf.layers.Conv3D(4, (2, 2, 2), data_format="channels_first", name="cf")
    y = conv(x)
    up = tf.layers.Conv3DTranspose(2, 2, strides=2, padding="valid", name="up")
    z = up(tf.transpose(y, [0, 2, 3, 4, 1]))
    pooled = tf.layers.MaxPooling3D(2, 2, data_format="channels_first")(x)
    avg = tf.layers.AveragePooling3D(2, 1, padding="same")(tf.transpose(x, [0, 2, 3, 4, 1]))
    assert y.shape == (2, 4, 3, 3, 3) and z.shape == (2, 6, 6, 6, 2) and pooled.shape == (2, 3, 2, 2, 2)
    assert conv.kernel.shape == (2, 2, 2, 3, 4) and up.kernel.shape == (2, 2, 2, 2, 4) and avg.shape == (2, 4, 4, 4, 3)
    xs = RNG.standard_normal((2, 3, 4, 4, 4)).astype(np.float32)
    fn_pool = tf.layers.max_pooling3d(x, 2, 2, data_format="channels_first")
    fn_avg = tf.nn.avg_pool3d(tf.transpose(x, [0, 2, 3, 4, 1]), [1, 2, 2, 2, 1], [1, 1, 1, 1, 1], "SAME")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        p, fp, a, fa = sess.run([pooled, fn_pool, avg, fn_avg], {x: xs})
    np.testing.assert_array_equal(p, xs.reshape(2, 3, 2, 2, 2, 2, 2, 2).max(axis=(3, 5, 7)))
    np.testing.assert_array_equal(p, fp)
    np.testing.assert_allclose(a, fa, rtol=1e-6)


def test_3d_layers_reject_bad_arguments():
    x = tf.placeholder(tf.float32, [None, 4, 4, 4, 1])
    with pytest.raises(ValueError, match="padding must be 'same' or 'valid'"):
        tf.layers.conv3d(x, 2, 3, padding="full")
    with pytest.raises(ValueError, match="data_format must be one of"):
        tf.layers.max_pooling3d(x, 2, 2, data_format="NDHWC")
    with pytest.raises(ValueError, match="conv3d: input must be rank 5"):
        tf.layers.conv3d(tf.placeholder(tf.float32, [None, 4, 4, 1]), 2, 3)


@pytest.mark.slow
def test_a_3d_convnet_trains_on_digit_volumes_and_runs_the_same_on_the_edge(digits, tmp_path):
    import edge_runtime
    from exporter.freeze import export_trained

    tf.set_random_seed(0)
    # Each 8x8 digit becomes a 4x8x8 volume: the image stacked four times, shifted down by one row each slice.
    def volumes(images):
        flat = images.reshape(-1, 8, 8)
        return np.stack([np.roll(flat, k, axis=1) for k in range(4)], axis=1)[..., None]

    x = tf.placeholder(tf.float32, [None, 4, 8, 8, 1], name="x")
    labels = tf.placeholder(tf.int64, [None])
    h = tf.layers.conv3d(x, 8, 3, padding="same", activation=tf.nn.relu)
    h = tf.layers.max_pooling3d(h, (1, 2, 2), (1, 2, 2))
    h = tf.layers.conv3d(h, 16, (2, 3, 3), activation=tf.nn.relu)
    h = tf.layers.average_pooling3d(h, (1, 2, 2), (1, 2, 2))
    logits = tf.layers.dense(tf.layers.flatten(h), 10)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    train = tf.train.AdamOptimizer(0.01).minimize(loss)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), labels), tf.float32))
    xtr, ytr = volumes(digits["x_train"]), digits["y_train"]
    xte, yte = volumes(digits["x_test"]), digits["y_test"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(accuracy, {x: xte, labels: yte})
        for step in range(250):
            i = (step * 64) % (len(xtr) - 64)
            sess.run(train, {x: xtr[i:i + 64], labels: ytr[i:i + 64]})
        after, want = sess.run([accuracy, logits], {x: xte, labels: yte})
        export_trained(sess, str(tmp_path / "conv3d.flow"), {"x": x}, {"logits": logits})
    assert before < 0.3 and after > 0.9, (before, after)
    got = edge_runtime.load(str(tmp_path / "conv3d.flow")).run({"x": xte})["logits"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
