"""TF1 scripts that print, look up or key things by variable and tensor names, written as the
TensorFlow guides and StackOverflow answers write them, with only the import changed. Each asserts
the names TensorFlow 1.15 gives: a variable's name is its tensor's ("dense/kernel:0"), its op's
name has no output index ("dense/kernel"), checkpoints are keyed by op names, Adam's slots are
"w/Adam:0" and "w/Adam_1:0"."""

from __future__ import annotations

import os

import numpy as np
import pytest

import trainer as tf
from trainer.kernels.summary import tensorboard_proto


def test_variable_scopes_share_variables_as_the_tf_guide_shows():
    image1 = tf.placeholder(tf.float32, [None, 8, 8, 1], name="image1")
    image2 = tf.placeholder(tf.float32, [None, 8, 8, 1], name="image2")

    def conv_relu(input, kernel_shape, bias_shape):
        weights = tf.get_variable("weights", kernel_shape, initializer=tf.random_normal_initializer())
        biases = tf.get_variable("biases", bias_shape, initializer=tf.constant_initializer(0.0))
        conv = tf.nn.conv2d(input, weights, strides=[1, 1, 1, 1], padding="SAME")
        return tf.nn.relu(conv + biases)

    def my_image_filter(input_images):
        with tf.variable_scope("conv1"):
            relu1 = conv_relu(input_images, [5, 5, 1, 4], [4])
        with tf.variable_scope("conv2"):
            return conv_relu(relu1, [5, 5, 4, 4], [4])

    with tf.variable_scope("image_filters") as scope:
        result1 = my_image_filter(image1)
        scope.reuse_variables()
        result2 = my_image_filter(image2)
    assert [v.name for v in tf.trainable_variables()] == [
        "image_filters/conv1/weights:0", "image_filters/conv1/biases:0",
        "image_filters/conv2/weights:0", "image_filters/conv2/biases:0"]
    assert (result1.name, result2.name) == ("image_filters/conv2/Relu:0", "image_filters/conv2_1/Relu:0")

    with tf.variable_scope("foo"):
        with tf.name_scope("bar"):
            v = tf.get_variable("v", [1])
            x = 1.0 + v
    assert v.name == "foo/v:0" and v.op.name == "foo/v" and x.op.name == "foo/bar/add"
    with tf.variable_scope("foo", reuse=True):
        assert tf.get_variable("v", [1]) is v
    with tf.variable_scope("foo", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("v", [1]) is v and tf.get_variable("u", [1]).name == "foo/u:0"
    with pytest.raises(ValueError, match="Variable foo/v already exists"):
        with tf.variable_scope("foo"):
            tf.get_variable("v", [1])

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        ones = np.ones((2, 8, 8, 1), np.float32)
        a, b = sess.run([result1, result2], {image1: ones, image2: ones})
        np.testing.assert_array_equal(a, b)  # one set of weights behind both towers
        by_name = sess.run("image_filters/conv2/Relu:0", feed_dict={"image1:0": ones})
        np.testing.assert_array_equal(by_name, a)


def test_printing_trainable_variables_names_and_shapes(capsys):
    x = tf.placeholder(tf.float32, [None, 8, 8, 1], name="input")
    conv = tf.layers.conv2d(x, 4, 3, activation=tf.nn.relu)
    pool = tf.layers.max_pooling2d(conv, 2, 2)
    hidden = tf.layers.dense(tf.layers.flatten(pool), 16, activation=tf.nn.relu)
    logits = tf.layers.dense(hidden, 10)
    print(x)
    for v in tf.trainable_variables():
        print(v.name, v.shape)
    total_parameters = 0
    for variable in tf.trainable_variables():
        variable_parameters = 1
        for dim in variable.get_shape():
            variable_parameters *= dim
        total_parameters += variable_parameters
    print("total:", total_parameters)
    print(tf.trainable_variables()[0])
    assert capsys.readouterr().out.splitlines() == [
        'Tensor("input:0", shape=(?, 8, 8, 1), dtype=float32)',
        "conv2d/kernel:0 (3, 3, 1, 4)",
        "conv2d/bias:0 (4,)",
        "dense/kernel:0 (36, 16)",
        "dense/bias:0 (16,)",
        "dense_1/kernel:0 (16, 10)",
        "dense_1/bias:0 (10,)",
        "total: 802",
        "<tf.Variable 'conv2d/kernel:0' shape=(3, 3, 1, 4) dtype=float32_ref>",
    ]
    assert logits.get_shape().as_list() == [None, 10]
    assert (conv.name, hidden.name) == ("conv2d/Relu:0", "dense/Relu:0")  # activations inside the layer
    assert str(tf.constant(1.0, name="one")) == 'Tensor("one:0", shape=(), dtype=float32)'
    assert repr(hidden.op.graph.get_tensor_by_name("input:0")) == "<tf.Tensor 'input:0' shape=(?, 8, 8, 1) dtype=float32>"


def test_saver_round_trip_with_var_list_keyed_by_op_name(tmp_path):
    # The TF guide's "Save and restore variables", then restoring under another scope by op name.
    v1 = tf.get_variable("v1", shape=[3], initializer=tf.zeros_initializer)
    v2 = tf.get_variable("v2", shape=[5], initializer=tf.zeros_initializer)
    inc_v1 = v1.assign(v1 + 1)
    dec_v2 = v2.assign(v2 - 1)
    init_op = tf.global_variables_initializer()
    saver = tf.train.Saver()
    model = os.path.join(str(tmp_path), "model.ckpt")
    with tf.Session() as sess:
        sess.run(init_op)
        inc_v1.op.run()
        dec_v2.op.run()
        saver.save(sess, model)
    assert tf.train.list_variables(str(tmp_path)) == [("v1", [3]), ("v2", [5])]  # op names, no ":0"
    np.testing.assert_array_equal(tf.train.load_variable(str(tmp_path), "v1:0"), [1, 1, 1])

    tf.reset_default_graph()
    v1 = tf.get_variable("v1", [3], initializer=tf.zeros_initializer)
    v2 = tf.get_variable("v2", [5], initializer=tf.zeros_initializer)
    saver = tf.train.Saver({"v2": v2})
    with tf.Session() as sess:
        v1.initializer.run()
        saver.restore(sess, model)
        np.testing.assert_array_equal(v1.eval(), [0, 0, 0])
        np.testing.assert_array_equal(v2.eval(), [-1, -1, -1, -1, -1])

    tf.reset_default_graph()
    with tf.variable_scope("student"):
        s1 = tf.get_variable("v1", [3])
        s2 = tf.get_variable("v2", [5])
    var_list = {v.op.name.replace("student/", "", 1): v for v in tf.global_variables()}
    assert sorted(var_list) == ["v1", "v2"]
    with tf.Session() as sess:
        tf.train.Saver(var_list).restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(s1), [1, 1, 1])
        copy = tf.train.Saver({v.name[:-2]: v for v in tf.global_variables()})  # "student/v1:0" -> "student/v1"
        path = copy.save(sess, os.path.join(str(tmp_path), "student", "model.ckpt"), global_step=7)
        np.testing.assert_array_equal(sess.run(s2), [-1, -1, -1, -1, -1])
    assert tf.train.list_variables(path) == [("student/v1", [3]), ("student/v2", [5])]


def test_global_variables_after_adam_name_its_slots_as_tensorflow():
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    y = tf.placeholder(tf.float32, [None, 1], name="y")
    w = tf.Variable(tf.zeros([2, 1]), name="w")
    b = tf.Variable(tf.zeros([1]), name="b")
    global_step = tf.Variable(0, name="global_step", trainable=False)
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    optimizer = tf.train.AdamOptimizer(learning_rate=0.1)
    train_op = optimizer.minimize(loss, global_step=global_step)
    assert [v.name for v in tf.global_variables()] == [
        "w:0", "b:0", "global_step:0", "beta1_power:0", "beta2_power:0",
        "w/Adam:0", "w/Adam_1:0", "b/Adam:0", "b/Adam_1:0"]
    assert [v.name for v in tf.trainable_variables()] == ["w:0", "b:0"]
    assert optimizer.get_slot(w, "m").name == "w/Adam:0" and optimizer.get_slot(b, "v").name == "b/Adam_1:0"
    assert optimizer.get_slot_names() == ["m", "v"]
    assert [v.name for v in optimizer.variables()] == [
        "b/Adam:0", "b/Adam_1:0", "beta1_power:0", "beta2_power:0", "w/Adam:0", "w/Adam_1:0"]
    model_vars = [v for v in tf.global_variables() if "Adam" not in v.name and "power" not in v.name]
    assert [v.op.name for v in model_vars] == ["w", "b", "global_step"]

    xs = np.asarray([[1.0, 2.0], [2.0, 1.0], [0.0, 1.0]], np.float32)
    ys = xs @ np.asarray([[2.0], [-1.0]], np.float32) + 0.5
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op, {x: xs, y: ys})
        values = {v.name: value for v, value in zip(tf.global_variables(), sess.run(tf.global_variables()))}
        sess.run(tf.variables_initializer(optimizer.variables()))  # reset the optimizer's state alone
        reset = sess.run(["beta1_power:0", "w/Adam:0", "w:0"])
    assert values["global_step:0"] == 3
    np.testing.assert_allclose(values["beta1_power:0"], 0.9 ** 4, rtol=1e-6)
    np.testing.assert_allclose(values["beta2_power:0"], 0.999 ** 4, rtol=1e-6)
    assert np.abs(values["w/Adam:0"]).min() > 0 and (values["w/Adam_1:0"] > 0).all()
    np.testing.assert_allclose(reset[0], 0.9, rtol=1e-6)
    assert not reset[1].any() and (reset[2] == values["w:0"]).all()


def test_graph_lookups_by_tensor_and_op_name():
    x = tf.placeholder(tf.float32, shape=[None, 3], name="input")
    with tf.variable_scope("layer1"):
        W = tf.get_variable("W", [3, 2], initializer=tf.ones_initializer())
        b = tf.get_variable("b", [2], initializer=tf.zeros_initializer())
        h = tf.matmul(x, W) + b
    with tf.variable_scope("layer2"):
        W2 = tf.Variable(tf.ones([2, 1]), name="W")
    out = tf.identity(tf.matmul(h, W2), name="output")
    graph = tf.get_default_graph()
    assert graph.get_tensor_by_name("input:0") is x
    assert graph.get_operation_by_name("input") is x.op and x.op.name == "input"
    assert graph.get_tensor_by_name(W.name) is W.value() and W.name == "layer1/W:0"
    assert graph.get_operation_by_name(W.op.name) is W.op
    assert h.name == "layer1/add:0" and graph.get_tensor_by_name("layer1/add:0") is h
    by_name = {v.name: v for v in tf.global_variables()}
    assert list(by_name) == ["layer1/W:0", "layer1/b:0", "layer2/W:0"] and by_name["layer2/W:0"] is W2
    assert [v.name for v in tf.trainable_variables() if v.name.startswith("layer1/")] == ["layer1/W:0", "layer1/b:0"]
    assert tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope="layer2") == [W2]
    assert [v.op.name for v in tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="layer")] == [
        "layer1/W", "layer1/b", "layer2/W"]
    assert [n.name for n in graph.get_operations() if n.type == "Placeholder"] == ["input"]
    assert out.name == "output:0"

    summaries = [tf.summary.histogram(v.name, v) for v in tf.trainable_variables()]
    merged = tf.summary.merge(summaries)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        feed = {"input:0": np.asarray([[1.0, 2.0, 3.0]], np.float32)}
        np.testing.assert_array_equal(sess.run("output:0", feed_dict=feed), [[12.0]])
        np.testing.assert_array_equal(sess.run(graph.get_tensor_by_name("layer1/add:0"), feed), [[6.0, 6.0]])
        summary = tensorboard_proto("summary_pb2").Summary.FromString(sess.run(merged))
    assert [value.tag for value in summary.value] == ["layer1/W_0", "layer1/b_0", "layer2/W_0"]


def test_layers_share_weights_when_their_scope_reuses_them_as_gans_do():
    real = tf.placeholder(tf.float32, [None, 4], name="real")
    z = tf.placeholder(tf.float32, [None, 2], name="z")

    def generator(z):
        with tf.variable_scope("generator"):
            h = tf.layers.dense(z, 8, activation=tf.nn.relu)
            return tf.layers.dense(h, 4)

    def discriminator(x, reuse=False):
        with tf.variable_scope("discriminator", reuse=reuse):
            h = tf.layers.dense(x, 8, activation=tf.nn.leaky_relu)
            return tf.layers.dense(h, 1)

    fake = generator(z)
    d_real = discriminator(real)
    d_fake = discriminator(fake, reuse=True)
    t_vars = tf.trainable_variables()
    d_vars = [var for var in t_vars if "discriminator" in var.name]
    g_vars = [var for var in t_vars if var.name.startswith("generator/")]
    assert [v.name for v in d_vars] == ["discriminator/dense/kernel:0", "discriminator/dense/bias:0",
                                        "discriminator/dense_1/kernel:0", "discriminator/dense_1/bias:0"]
    assert [v.name for v in g_vars] == ["generator/dense/kernel:0", "generator/dense/bias:0",
                                        "generator/dense_1/kernel:0", "generator/dense_1/bias:0"]
    assert len(t_vars) == 8 and d_fake.name == "discriminator_1/dense_1/Gemm:0"

    fc = tf.layers.dense(real, 3, name="fc")
    fc_again = tf.layers.dense(real, 3, name="fc", reuse=True)
    with pytest.raises(ValueError, match="Variable fc/kernel already exists"):
        tf.layers.dense(real, 3, name="fc")
    with tf.name_scope("tower_0"):  # name scopes name the ops, not get_variable's variables
        tower = tf.layers.dense(real, 2, name="shared")
    assert tf.trainable_variables()[-2].name == "shared/kernel:0" and tower.name.startswith("tower_0/shared/")

    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b = sess.run([d_real, d_fake], {real: x, fake: x})  # feeding the generator's output
        c, d = sess.run([fc, fc_again], {real: x})
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, d)


def test_an_evaluation_graph_restores_moving_averages_by_their_shadow_names(tmp_path):
    # cifar10_train.py / cifar10_eval.py: train with averages, evaluate with the averaged weights.
    def model():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        with tf.variable_scope("linear"):
            w = tf.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
        return x, w, tf.matmul(x, w)

    x, w, y = model()
    global_step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.5).minimize(tf.reduce_sum(y), global_step=global_step)
    ema = tf.train.ExponentialMovingAverage(0.9, global_step)
    with tf.control_dependencies([train]):
        train_op = tf.group(ema.apply(tf.trainable_variables()))
    assert ema.average_name(w) == "linear/w/ExponentialMovingAverage"
    assert ema.average(w).name == "linear/w/ExponentialMovingAverage:0"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(3):
            sess.run(train_op, {x: np.ones((1, 2), np.float32)})
        averaged, raw = sess.run([ema.average(w), w])
        tf.train.Saver().save(sess, os.path.join(str(tmp_path), "model.ckpt"), global_step=global_step)
    assert not np.allclose(averaged, raw)

    tf.reset_default_graph()
    x, w, y = model()
    tf.train.get_or_create_global_step()
    variables_to_restore = tf.train.ExponentialMovingAverage(0.9).variables_to_restore()
    assert sorted(variables_to_restore) == ["global_step", "linear/w/ExponentialMovingAverage"]
    with tf.Session() as sess:
        tf.train.Saver(variables_to_restore).restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(w), averaged)
    assert [v.name for v in tf.trainable_variables("linear")] == ["linear/w:0"]
    assert tf.global_variables(scope="global") == [tf.train.get_global_step()]
