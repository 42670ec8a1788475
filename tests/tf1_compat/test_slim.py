"""TF-Slim scripts (``slim = tf.contrib.slim``) on scikit-learn's digits: arg_scope, slim's layers
with their variable names and collections, slim.losses, create_train_op, restoring a subset of
the variables from a checkpoint, and slim.learning.train."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

slim = tf.contrib.slim


def lenet(images, is_training):
    with slim.arg_scope([slim.conv2d, slim.fully_connected], activation_fn=tf.nn.relu,
                        weights_initializer=tf.truncated_normal_initializer(stddev=0.1),
                        weights_regularizer=slim.l2_regularizer(0.0005)):
        net = slim.conv2d(images, 16, [3, 3], scope="conv1")
        net = slim.repeat(net, 2, slim.conv2d, 16, [3, 3], normalizer_fn=slim.batch_norm,
                          normalizer_params={"is_training": is_training, "decay": 0.9}, scope="conv2")
        net = slim.max_pool2d(net, [2, 2], scope="pool2")
        net = slim.flatten(net)
        net = slim.fully_connected(net, 64, scope="fc1")
        net = slim.dropout(net, 0.8, is_training=is_training, scope="dropout1")
        return slim.fully_connected(net, 10, activation_fn=None, scope="fc2")


def build(is_training):
    images = tf.placeholder(tf.float32, [None, 64])
    labels = tf.placeholder(tf.float32, [None, 10])
    logits = lenet(tf.reshape(images, [-1, 8, 8, 1]), is_training)
    return images, labels, logits


def accuracy(sess, images, logits, x, y):
    return float(np.mean(sess.run(logits, {images: x}).argmax(1) == y))


@pytest.mark.slow  # 0.5-8 s here, with the load
def test_a_slim_lenet_trains_with_create_train_op_and_names_its_variables_as_slim(digits):
    tf.set_random_seed(0)
    is_training = tf.placeholder_with_default(False, [])
    images, labels, logits = build(is_training)
    slim.losses.softmax_cross_entropy(logits, labels)
    total_loss = slim.losses.get_total_loss()
    train_op = slim.learning.create_train_op(total_loss, tf.train.AdamOptimizer(0.01))

    model = [v.op.name for v in slim.get_model_variables()]
    assert model == ["conv1/weights", "conv1/biases",
                     "conv2/conv2_1/weights", "conv2/conv2_1/BatchNorm/beta", "conv2/conv2_1/BatchNorm/moving_mean",
                     "conv2/conv2_1/BatchNorm/moving_variance",
                     "conv2/conv2_2/weights", "conv2/conv2_2/BatchNorm/beta", "conv2/conv2_2/BatchNorm/moving_mean",
                     "conv2/conv2_2/BatchNorm/moving_variance",
                     "fc1/weights", "fc1/biases", "fc2/weights", "fc2/biases"]
    assert [v.op.name for v in slim.get_variables_by_name("weights")] == [
        "conv1/weights", "conv2/conv2_1/weights", "conv2/conv2_2/weights", "fc1/weights", "fc2/weights"]
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 5  # one per weights variable
    assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 4  # two moving averages per batch_norm
    assert tf.get_collection(tf.GraphKeys.TRAIN_OP) == [train_op]

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        order = np.random.default_rng(0).permutation(len(digits["x_train"]))
        for _ in range(3):
            for i in range(0, len(order), 50):
                batch = order[i:i + 50]
                loss = sess.run(train_op, {images: digits["x_train"][batch], labels: digits["y_train_1h"][batch],
                                           is_training: True})
        assert np.isfinite(loss)
        assert sess.run(tf.train.get_global_step()) == 3 * 28
        moving_mean = slim.get_unique_variable("conv2/conv2_1/BatchNorm/moving_mean")
        assert np.abs(sess.run(moving_mean)).sum() > 0  # UPDATE_OPS ran with each step
        assert accuracy(sess, images, logits, digits["x_test"], digits["y_test"]) > 0.95  # 0.98 seen


def test_arg_scopes_nest_merge_and_yield_to_explicit_arguments():
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    with slim.arg_scope([slim.conv2d, slim.fully_connected], activation_fn=None, trainable=False):
        with slim.arg_scope([slim.conv2d], padding="VALID", biases_initializer=None) as scope:
            valid = slim.conv2d(x, 2, [3, 3], scope="valid")
            same = slim.conv2d(x, 2, [3, 3], padding="SAME", scope="same")
        dense = slim.fully_connected(slim.flatten(x), 5, scope="dense")
    outside = slim.conv2d(x, 2, [3, 3], scope="outside")
    with slim.arg_scope(scope):  # a saved scope, re-entered: all three defaults again
        again = slim.conv2d(x, 2, [3, 3], scope="again")

    assert valid.shape == (None, 2, 2, 2) and same.shape == (None, 4, 4, 2) and outside.shape == (None, 4, 4, 2)
    assert again.shape == (None, 2, 2, 2)
    names = [v.op.name for v in tf.global_variables()]
    assert names == ["valid/weights", "same/weights", "dense/weights", "dense/biases", "outside/weights",
                     "outside/biases", "again/weights"]
    assert [v.op.name for v in tf.trainable_variables()] == ["outside/weights", "outside/biases"]
    assert outside.op.type == "Relu" and valid.op.type != "Relu" and dense.op.type != "Relu"
    assert scope[slim.arg_scope_func_key(slim.conv2d)] == {"activation_fn": None, "trainable": False,
                                                           "padding": "VALID", "biases_initializer": None}


def test_arg_scope_refuses_undecorated_functions_and_bad_arguments_fail_the_call():
    x = tf.placeholder(tf.float32, [None, 4])
    with pytest.raises(ValueError, match="dense is not decorated with @add_arg_scope"):
        with slim.arg_scope([tf.layers.dense], units=3):
            pass
    with slim.arg_scope([slim.fully_connected], weights_regularizr=None):
        with pytest.raises(TypeError, match="weights_regularizr"):
            slim.fully_connected(x, 3)
    with pytest.raises(ValueError, match="kwargs must be empty"):
        with slim.arg_scope({}, activation_fn=None):
            pass

    @slim.add_arg_scope
    def scaled(value, factor=1.0):
        return value * factor

    with slim.arg_scope([scaled], factor=3.0):
        assert scaled(2.0) == 6.0 and scaled(2.0, factor=0.5) == 1.0
    assert scaled(2.0) == 2.0


def test_variables_to_restore_with_exclude_restore_a_subset_into_a_new_graph(tmp_path):
    images, labels, logits = build(False)
    path = str(tmp_path / "model.ckpt")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saved = {v.op.name: sess.run(v) for v in slim.get_model_variables()}
        tf.train.Saver().save(sess, path)

    tf.reset_default_graph()
    images, labels, logits = build(False)
    restore = slim.get_variables_to_restore(exclude=["fc2"])
    assert {v.op.name for v in restore} == set(saved) - {"fc2/weights", "fc2/biases"}
    init_fn = slim.assign_from_checkpoint_fn(path, restore)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        init_fn(sess)
        values = {v.op.name: sess.run(v) for v in slim.get_model_variables()}
    for name in set(saved) - {"fc2/weights", "fc2/biases"}:
        np.testing.assert_array_equal(values[name], saved[name], err_msg=name)
    assert not np.array_equal(values["fc2/weights"], saved["fc2/weights"])  # a fresh head, not the checkpoint's


def test_slim_layers_beyond_the_basics_build_with_slim_names():
    x = tf.placeholder(tf.float32, [None, 4, 4, 3])
    up = slim.conv2d_transpose(x, 5, [3, 3], stride=2, scope="up")
    sep = slim.separable_conv2d(x, 6, [3, 3], depth_multiplier=2, scope="sep")
    depthwise = slim.separable_conv2d(x, None, [3, 3], scope="dw", outputs_collections="endpoints")
    stacked = slim.stack(slim.flatten(x), slim.fully_connected, [8, (4,)], activation_fn=None, scope="fc")
    onehot = slim.one_hot_encoding(tf.constant([0, 2]), 3)
    unit = slim.unit_norm(stacked, 1)
    with slim.arg_scope([slim.fully_connected], biases_initializer=None):  # linear and relu go through it
        linear = slim.linear(slim.flatten(x), 2, scope="linear")
        hidden = slim.relu(linear, 3, scope="relu")
        probabilities = slim.softmax(slim.bias_add(hidden, initializer=tf.ones_initializer()))
    assert up.shape == (None, 8, 8, 5) and sep.shape == (None, 4, 4, 6) and depthwise.shape == (None, 4, 4, 3)
    assert [v.op.name for v in slim.get_model_variables()] == [
        "up/weights", "up/biases", "sep/depthwise_weights", "sep/pointwise_weights", "sep/biases",
        "dw/depthwise_weights", "dw/biases", "fc/fc_1/weights", "fc/fc_1/biases", "fc/fc_2/weights",
        "fc/fc_2/biases", "linear/weights", "relu/weights", "BiasAdd/biases"]
    assert linear.op.type != "Relu" and probabilities.shape == (None, 3)
    assert tf.get_collection("endpoints") == [depthwise]
    xs = np.random.default_rng(0).standard_normal((2, 4, 4, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got_onehot, got_unit, got_probabilities = sess.run([onehot, unit, probabilities], {x: xs})
    np.testing.assert_array_equal(got_onehot, [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_allclose(np.linalg.norm(got_unit, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(got_probabilities.sum(1), 1.0, rtol=1e-5)


def test_slim_learning_train_runs_an_input_pipeline_to_number_of_steps_and_resumes(digits, tmp_path):
    def graph_and_train_op():
        tf.set_random_seed(1)
        dataset = tf.data.Dataset.from_tensor_slices((digits["x_train"], digits["y_train"])).repeat().batch(70)
        images, labels = dataset.make_one_shot_iterator().get_next()
        net = slim.fully_connected(images, 32, scope="fc1")
        logits = slim.fully_connected(net, 10, activation_fn=None, scope="fc2")
        slim.losses.sparse_softmax_cross_entropy(logits, labels)
        optimizer = tf.train.GradientDescentOptimizer(0.5)
        return slim.learning.create_train_op(slim.losses.get_total_loss(), optimizer, clip_gradient_norm=5.0)

    logdir = str(tmp_path / "train")
    final_loss = slim.learning.train(graph_and_train_op(), logdir, number_of_steps=60, save_summaries_secs=0,
                                     log_every_n_steps=0)
    assert final_loss < 0.6
    assert tf.train.latest_checkpoint(logdir).endswith("model.ckpt-60")

    tf.reset_default_graph()  # run again: resumes from the checkpoint at step 60, so 20 more steps
    resumed = slim.learning.train(graph_and_train_op(), logdir, number_of_steps=80, save_summaries_secs=0,
                                  log_every_n_steps=0)
    assert tf.train.latest_checkpoint(logdir).endswith("model.ckpt-80") and resumed < final_loss * 1.5

    tf.reset_default_graph()  # a new model in a new logdir, started from the old one's fc1 by init_fn
    train_op = graph_and_train_op()
    checkpoint = tf.train.latest_checkpoint(logdir)
    init_fn = slim.assign_from_checkpoint_fn(checkpoint, slim.get_variables_to_restore(include=["fc1"]))
    fresh = str(tmp_path / "fine_tune")
    assert slim.learning.train(train_op, fresh, number_of_steps=0, init_fn=init_fn, save_summaries_secs=0) is None
    for name in ("fc1/weights", "fc1/biases"):
        np.testing.assert_array_equal(tf.train.load_variable(fresh, name), tf.train.load_variable(checkpoint, name))
    assert not np.array_equal(tf.train.load_variable(fresh, "fc2/weights"),
                              tf.train.load_variable(checkpoint, "fc2/weights"))


def test_slim_metrics_aggregate_streaming_metrics_that_take_predictions_first():
    predictions = tf.placeholder(tf.int64, [None])
    labels = tf.placeholder(tf.int64, [None])
    names_to_values, names_to_updates = slim.metrics.aggregate_metric_map({
        "accuracy": slim.metrics.streaming_accuracy(predictions, labels),
        "mse": slim.metrics.streaming_mean_squared_error(tf.to_float(predictions), tf.to_float(labels)),
    })
    values, updates = slim.metrics.aggregate_metrics(slim.metrics.streaming_mean(tf.to_float(labels)))
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for p, y in (([0, 1, 2], [0, 1, 1]), ([3], [3])):
            sess.run([names_to_updates, updates], {predictions: p, labels: y})
        got = sess.run([names_to_values, values])
    assert got[0] == pytest.approx({"accuracy": 0.75, "mse": 0.25}) and got[1] == pytest.approx([1.25])


def test_batch_norm_updates_in_place_or_into_the_collection_asked():
    x = tf.placeholder(tf.float32, [None, 3])
    in_place = slim.batch_norm(x, decay=0.5, updates_collections=None, is_training=True)
    elsewhere = slim.batch_norm(x, decay=0.5, updates_collections="my_updates", is_training=True)
    assert tf.get_collection(tf.GraphKeys.UPDATE_OPS) == [] and len(tf.get_collection("my_updates")) == 2
    assert [v.op.name for v in slim.get_variables_by_name("moving_mean")] == ["BatchNorm/moving_mean",
                                                                            "BatchNorm_1/moving_mean"]
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run([in_place, elsewhere], {x: xs})
        means = sess.run(slim.get_variables_by_name("moving_mean"))
    np.testing.assert_allclose(means[0], xs.mean(0) / 2)  # updated with the output: 0.5 * 0 + 0.5 * mean
    np.testing.assert_array_equal(means[1], 0)  # its updates wait in my_updates


def test_slim_losses_take_predictions_first_and_weight_examples():
    logits = tf.constant([[2.0, 0.0], [0.0, 2.0]])
    onehot = tf.constant([[1.0, 0.0], [1.0, 0.0]])
    xent = slim.losses.softmax_cross_entropy(logits, onehot, weights=tf.constant([1.0, 0.0]))
    mse = slim.losses.mean_squared_error(tf.constant([1.0, 3.0]), tf.constant([1.0, 1.0]))
    hinge = slim.losses.hinge_loss(tf.constant([0.5, -2.0]), tf.constant([1.0, 0.0]))
    with tf.Session() as sess:
        got = sess.run([xent, mse, hinge, slim.losses.get_total_loss()])
    first = np.log1p(np.exp(-2.0))  # only the first example weighs
    np.testing.assert_allclose(got, [first, 2.0, 0.25, first + 2.25], rtol=1e-5)
    assert slim.losses.get_losses() == [xent, mse, hinge]


def test_slim_variables_land_in_the_collections_slim_puts_them_in():
    with tf.variable_scope("block"):
        weights = slim.model_variable("weights", [2, 3], initializer=tf.ones_initializer(),
                                      regularizer=slim.l2_regularizer(0.5), collections=["mine"])
        steps = slim.variable("steps", [], dtype=tf.int64, trainable=False)
    counter = slim.local_variable(np.zeros(3, np.float32), name="counter")
    assert slim.get_model_variables() == [weights] and slim.get_variables("block") == [weights, steps]
    assert tf.get_collection("mine") == [weights] and slim.get_trainable_variables() == [weights]
    assert slim.get_local_variables() == [counter] and slim.get_variable_full_name(steps) == "block/steps"
    assert slim.get_variables_by_suffix("steps") == [steps] and slim.get_unique_variable("block/weights") is weights
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert sess.run(slim.losses.get_regularization_losses()) == [pytest.approx(1.5)]  # 0.5 * 6 / 2


def test_create_train_op_scales_clips_and_limits_what_it_trains():
    tf.set_random_seed(2)  # fc1's ReLUs must not all start dead (then fc2's weights get no gradient)
    x = tf.constant(np.ones((4, 3), np.float32))
    hidden = slim.fully_connected(x, 3, scope="fc1")
    out = slim.fully_connected(hidden, 1, activation_fn=None, scope="fc2")
    loss = slim.losses.mean_squared_error(out, tf.constant(np.full((4, 1), 5.0, np.float32)))
    fc1_weights, fc2_weights = slim.get_variables_by_name("weights")
    train_op = slim.learning.create_train_op(loss, tf.train.GradientDescentOptimizer(0.01), clip_gradient_norm=1.0,
                                             gradient_multipliers={fc1_weights: 0.0},
                                             variables_to_train=[fc1_weights, fc2_weights])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(slim.get_model_variables())
        sess.run(train_op)
        after = sess.run(slim.get_model_variables())
    changed = [not np.array_equal(b, a) for b, a in zip(before, after)]
    assert changed == [False, False, True, False]  # only fc2/weights: fc1's gradient is scaled to 0
    assert np.linalg.norm(after[2] - before[2]) <= 0.01 * 1.0 + 1e-6  # a step of lr * the clipped norm at most
