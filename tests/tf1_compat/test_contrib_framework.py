"""tf.contrib.framework as slim-era scripts use it: fine-tuning from a checkpoint with
get_variables_to_restore(exclude=...) and assign_from_checkpoint(_fn), assignment by feed, variable
filters, the global step, tensor checks, deprecation decorators and name-scope helpers."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

framework = tf.contrib.framework


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _net(classes: int):
    x = tf.placeholder(tf.float32, [None, 6, 6, 1])
    with tf.variable_scope("net"):
        h = tf.contrib.layers.conv2d(x, 4, 3, scope="conv")
        return tf.contrib.layers.fully_connected(tf.contrib.layers.flatten(h), classes, scope="logits")


def test_fine_tuning_restores_all_but_the_excluded_head(tmp_path) -> None:
    _net(10)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saved = {v.op.name: sess.run(v) for v in tf.global_variables()}
        prefix = tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    tf.reset_default_graph()
    _net(3)  # a new head: its shapes differ from the checkpoint's
    restore = framework.get_variables_to_restore(exclude=["net/logits"])
    assert sorted(v.op.name for v in restore) == ["net/conv/biases", "net/conv/weights"]
    (weights,) = [v for v in restore if v.op.name == "net/conv/weights"]
    init_fn = framework.assign_from_checkpoint_fn(prefix, restore)
    op, feed = framework.assign_from_checkpoint(prefix, restore)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        init_fn(sess)
        np.testing.assert_array_equal(sess.run(weights), saved["net/conv/weights"])
        sess.run(tf.global_variables_initializer())
        sess.run(op, feed)
        np.testing.assert_array_equal(sess.run(weights), saved["net/conv/weights"])
    (head,) = [v for v in tf.global_variables() if v.op.name == "net/logits/weights"]
    with pytest.raises(ValueError, match="Tensor net/head/weights is not found"):
        framework.assign_from_checkpoint(prefix, {"net/head/weights": head})
    with pytest.raises(ValueError, match=r"net/logits/weights has shape \(144, 3\), its value \(144, 10\)"):
        framework.assign_from_checkpoint(prefix, [head])


def test_assign_from_values_feeds_the_values() -> None:
    w = tf.get_variable("w", [2, 2])
    fn = framework.assign_from_values_fn({"w": np.eye(2)})
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        fn(sess)
        np.testing.assert_array_equal(sess.run(w), np.eye(2))
    assert not any(n.op_type == "Constant" and np.asarray(n.attrs.get("value")).shape == (2, 2)
                   for n in tf.get_default_graph().get_operations())  # fed, not baked into the graph
    with pytest.raises(ValueError, match=r"Variables \['v'\] were not found"):
        framework.assign_from_values({"v": 1.0})


def test_filter_variables_includes_then_excludes() -> None:
    _net(3)
    names = lambda vs: sorted(v.op.name for v in vs)  # noqa: E731
    everything = tf.global_variables()
    assert names(framework.filter_variables(everything, include_patterns=["weights"])) == [
        "net/conv/weights", "net/logits/weights"]
    assert names(framework.filter_variables(everything, exclude_patterns=["logits", "biases"])) == ["net/conv/weights"]
    assert framework.filter_variables(everything, include_patterns=["weights"], reg_search=False) == []


def test_global_step_helpers() -> None:
    step = framework.create_global_step()
    with pytest.raises(ValueError, match="global_step already exists"):
        framework.create_global_step()
    assert framework.assert_or_get_global_step() is step
    assert framework.assert_or_get_global_step(global_step_tensor=step) is step
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(tf.assign_add(step, 5))
        sess.run(framework.zero_initializer(step))
        assert sess.run(step) == 0


def test_tensor_checks() -> None:
    assert framework.assert_scalar(tf.constant(1.0)).shape.as_list() == []
    with pytest.raises(ValueError, match="Expected scalar shape"):
        framework.assert_scalar(tf.constant([1.0]))
    with pytest.raises(ValueError, match="Expected integer type"):
        framework.assert_scalar_int(tf.constant(1.0))
    assert framework.assert_same_float_dtype([tf.constant([1.0]), tf.constant(2.0)]) == np.float32
    with pytest.raises(ValueError, match="Expected one float dtype"):
        framework.assert_same_float_dtype([tf.constant([1.0]), tf.constant(np.float64(2.0))])
    assert framework.is_numeric_tensor(tf.constant(1)) and not framework.is_numeric_tensor(tf.constant(True))
    sparse = framework.convert_to_tensor_or_sparse_tensor(tf.SparseTensorValue([[0, 1]], [2.0], [2, 2]))
    assert isinstance(sparse, tf.SparseTensor)
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(1.0)
    with pytest.raises(ValueError, match="must be from the same graph"):
        framework.get_graph_from_inputs([tf.constant(1.0), foreign])
    total = framework.reduce_sum_n([tf.constant([1.0, 2.0]), tf.constant([[3.0]])])
    predictions, labels = framework.remove_squeezable_dimensions(tf.zeros([4, 1]), tf.zeros([4]))
    with tf.Session() as sess:
        assert sess.run(total) == 6.0
    assert predictions.shape.as_list() == [4] and labels.shape.as_list() == [4]


def test_with_shape_checks_when_built_and_when_run() -> None:
    with pytest.raises(ValueError, match="Invalid shape"):
        framework.with_shape([2, 3], tf.zeros([3, 2]))
    x = tf.placeholder(tf.float32, [None, 3])
    checked = framework.with_shape([2, 3], x)
    same = framework.with_same_shape(tf.zeros([2, 3]), tf.zeros([2, 3]))
    with tf.Session() as sess:
        assert sess.run(checked, {x: np.ones((2, 3))}).shape == (2, 3)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Wrong shape"):
            sess.run(checked, {x: np.ones((4, 3))})
        assert sess.run(same).shape == (2, 3)


def test_deprecation_decorators_log_once(tf_log) -> None:
    @framework.deprecated("2017-01-01", "Use g instead.")
    def f(x):
        return x + 1

    @framework.deprecated_args(None, "Drop keep_dims.", "keep_dims")
    def reduce(x, keep_dims=None):
        return x

    assert f(1) == 2
    assert "f (from" in tf_log.text and "Use g instead." in tf_log.text
    tf_log.clear()
    assert f(2) == 3
    assert "deprecated" not in tf_log.text  # said once
    reduce(1)
    assert "keep_dims" not in tf_log.text
    reduce(1, keep_dims=True)
    assert "Calling reduce" in tf_log.text and "with keep_dims is deprecated" in tf_log.text


def test_name_scope_helpers_and_the_device_chooser() -> None:
    assert framework.strip_name_scope("tower_0/conv/weights", "tower_0") == "conv/weights"
    assert framework.strip_name_scope("^tower_0/init", "tower_0") == "^init"
    assert framework.prepend_name_scope("conv/weights", "imported") == "imported/conv/weights"
    assert framework.prepend_name_scope("loc:@conv/weights", "imported") == "loc:@imported/conv/weights"
    with tf.name_scope("outer"), tf.name_scope("inner"):
        assert framework.get_name_scope() == "outer/inner"
    chooser = framework.VariableDeviceChooser(num_tasks=2)
    with tf.device(chooser):
        a, b, c = (tf.Variable(1.0, name=n) for n in "abc")
        d = tf.identity(a)
    tasks = [tf.DeviceSpec.from_string(v.op.device) for v in (a, b, c)]
    assert [(t.job, t.task, t.device_type) for t in tasks] == [("ps", 0, "CPU"), ("ps", 1, "CPU"), ("ps", 0, "CPU")]
    assert "ps" not in (d.op.device or "")
