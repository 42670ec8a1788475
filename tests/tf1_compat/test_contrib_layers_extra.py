"""tf.contrib.layers' optimize_loss, N-D convolutions and pools, group/instance norm, maxout,
dense_to_sparse, l1_l2_regularizer and summaries, against NumPy references, as TF 1.x scripts
(and tf.contrib.slim, which re-exports them) use them."""

from __future__ import annotations

import numpy as np
import pytest
from tensorboard.compat.proto.summary_pb2 import Summary

import trainer as tf

layers = tf.contrib.layers


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _regression(w0=(0.5, -1.0), b0=0.25):
    """loss = mean((x @ w + b - y)^2) on fixed data; the NumPy gradient at (w0, b0)."""
    x = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.5]], np.float32)
    y = np.array([1.0, -2.0, 0.5], np.float32)
    w = tf.get_variable("w", initializer=np.array(w0, np.float32))
    b = tf.get_variable("b", initializer=np.float32(b0))
    loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) + b - y))
    residual = x @ np.array(w0, np.float32) + b0 - y
    grad_w, grad_b = 2 * x.T @ residual / len(y), 2 * residual.mean()
    return w, b, loss, float(np.mean(residual ** 2)), grad_w, grad_b


def _run(train, *fetch, steps=1):
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        values = [sess.run(train) for _ in range(steps)]
        return values, sess.run(list(fetch))


def test_optimize_loss_takes_one_sgd_step_and_counts_it() -> None:
    w, b, loss, loss0, grad_w, grad_b = _regression()
    step = tf.train.get_or_create_global_step()
    train = layers.optimize_loss(loss, step, learning_rate=0.1, optimizer="SGD")
    (value,), (w1, b1, s) = _run(train, w, b, step)
    assert value == pytest.approx(loss0, rel=1e-6)  # the loss the gradients were taken of
    np.testing.assert_allclose(w1, np.array([0.5, -1.0]) - 0.1 * grad_w, rtol=1e-5)
    assert b1 == pytest.approx(0.25 - 0.1 * grad_b, rel=1e-5)
    assert s == 1
    assert tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)[-1].op.name.startswith("OptimizeLoss")


@pytest.mark.parametrize("make", [
    lambda: tf.train.GradientDescentOptimizer,
    lambda: tf.train.GradientDescentOptimizer(0.1),
    lambda: (lambda lr: tf.train.GradientDescentOptimizer(lr)),
], ids=["class", "instance", "factory"])
def test_optimize_loss_takes_the_optimizer_as_class_instance_or_factory(make) -> None:
    w, _, loss, _, grad_w, _ = _regression()
    train = layers.optimize_loss(loss, None, learning_rate=0.1, optimizer=make())
    _, (w1,) = _run(train, w)
    np.testing.assert_allclose(w1, np.array([0.5, -1.0]) - 0.1 * grad_w, rtol=1e-5)


def test_optimize_loss_without_a_rate_calls_the_factory_with_nothing() -> None:
    w, _, loss, _, grad_w, _ = _regression()
    train = layers.optimize_loss(loss, None, learning_rate=None, optimizer=lambda: tf.train.GradientDescentOptimizer(0.2))
    _, (w1,) = _run(train, w)
    np.testing.assert_allclose(w1, np.array([0.5, -1.0]) - 0.2 * grad_w, rtol=1e-5)


def test_optimize_loss_clips_by_global_norm() -> None:
    w, b, loss, _, grad_w, grad_b = _regression()
    norm = np.sqrt((grad_w ** 2).sum() + grad_b ** 2)
    assert norm > 0.5  # so the clip below bites
    train = layers.optimize_loss(loss, None, learning_rate=1.0, optimizer="SGD", clip_gradients=0.5)
    _, (w1, b1) = _run(train, w, b)
    np.testing.assert_allclose(w1, np.array([0.5, -1.0]) - grad_w * 0.5 / norm, rtol=1e-5)
    assert b1 == pytest.approx(0.25 - grad_b * 0.5 / norm, rel=1e-5)


def test_optimize_loss_multiplies_named_gradients_and_decays_the_rate() -> None:
    w, b, loss, _, grad_w, grad_b = _regression()
    step = tf.train.get_or_create_global_step()
    train = layers.optimize_loss(loss, step, learning_rate=0.1, optimizer="SGD", gradient_multipliers={w: 0.0},
                                 learning_rate_decay_fn=lambda lr, gs: lr * 0.5)
    _, (w1, b1) = _run(train, w, b)
    np.testing.assert_allclose(w1, [0.5, -1.0])
    assert b1 == pytest.approx(0.25 - 0.05 * grad_b, rel=1e-5)


def test_optimize_loss_runs_update_ops_first_and_can_leave_the_step_alone() -> None:
    _, _, loss, _, _, _ = _regression()
    counter = tf.get_variable("counter", initializer=np.int64(0), trainable=False)
    tf.add_to_collection(tf.GraphKeys.UPDATE_OPS, tf.assign_add(counter, 1))
    step = tf.train.get_or_create_global_step()
    train = layers.optimize_loss(loss, step, learning_rate=0.1, optimizer="Adam", increment_global_step=False)
    _, (count, s) = _run(train, counter, step, steps=3)
    assert (count, s) == (3, 0)


def test_optimize_loss_writes_the_summaries_asked_for() -> None:
    _, _, loss, loss0, _, _ = _regression()
    layers.optimize_loss(loss, None, learning_rate=0.1, optimizer="SGD", clip_gradients=0.5,
                         summaries=["loss", "learning_rate", "gradient_norm", "gradients"])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        merged = Summary.FromString(np.asarray(sess.run(tf.summary.merge_all()), dtype=object)[()])
    tags = {v.tag for v in merged.value}
    assert {"OptimizeLoss/loss", "OptimizeLoss/global_norm/gradient_norm",
            "OptimizeLoss/global_norm/clipped_gradient_norm", "OptimizeLoss/gradient_norm/w_0",
            "OptimizeLoss/gradients/w_0"} <= tags
    assert next(v.simple_value for v in merged.value if v.tag == "OptimizeLoss/loss") == pytest.approx(loss0, rel=1e-6)


@pytest.mark.parametrize("kwargs, words", [
    (dict(optimizer="Nadam"), "optimizer name must be one of"),
    (dict(optimizer="SGD", summaries=["weights"]), "summaries must be among"),
    (dict(optimizer="SGD", learning_rate=-0.1), "learning_rate must be >= 0"),
    (dict(optimizer="SGD", learning_rate=None), "needs a learning_rate"),
    (dict(optimizer=42), "optimizer must be a name"),
    (dict(optimizer="SGD", learning_rate_decay_fn=lambda lr, gs: lr), "needs a global_step"),
    (dict(optimizer="SGD", clip_gradients="big"), "clip_gradients must be a float or a callable"),
])
def test_optimize_loss_refuses_bad_arguments(kwargs, words) -> None:
    _, _, loss, _, _, _ = _regression()
    kwargs = {"learning_rate": 0.1, **kwargs}
    with pytest.raises(ValueError, match=words):
        layers.optimize_loss(loss, None, **kwargs)


def test_optimize_loss_refuses_a_loss_that_is_not_a_scalar() -> None:
    with pytest.raises(ValueError, match="loss must be a scalar"):
        layers.optimize_loss(tf.constant([1.0, 2.0]), None, 0.1, "SGD")


def _numpy_conv(x, w, strides):
    """VALID channels-last convolution of any rank: x (N, spatial..., C), w (kernel..., C, M)."""
    kernel = w.shape[:-2]
    out = [(s - k) // st + 1 for s, k, st in zip(x.shape[1:-1], kernel, strides)]
    y = np.zeros((x.shape[0], *out, w.shape[-1]), np.float64)
    for pos in np.ndindex(*out):
        window = x[(slice(None),) + tuple(slice(p * st, p * st + k) for p, st, k in zip(pos, strides, kernel))]
        y[(slice(None),) + pos] = np.tensordot(window, w, axes=(list(range(1, len(kernel) + 2)),
                                                                list(range(len(kernel) + 1))))
    return y


@pytest.mark.parametrize("layer, shape, kernel, stride", [
    ("conv1d", (2, 9, 3), 3, 2), ("convolution1d", (1, 7, 2), 2, 1),
    ("conv3d", (1, 5, 6, 4, 2), (2, 3, 2), (1, 2, 1)), ("convolution", (2, 6, 5, 3), (3, 2), 1),
])
def test_convolutions_of_any_rank_match_numpy(layer, shape, kernel, stride) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    y = getattr(layers, layer)(tf.constant(x), 4, kernel, stride=stride, padding="VALID", activation_fn=None,
                               biases_initializer=None)
    weights = [v for v in tf.global_variables() if v.op.name == "Conv/weights"]
    assert len(weights) == 1 and weights[0].shape.as_list()[-2:] == [shape[-1], 4]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, w = sess.run([y, weights[0]])
    rank = len(shape) - 2
    strides = [stride] * rank if isinstance(stride, int) else list(stride)
    np.testing.assert_allclose(got, _numpy_conv(x.astype(np.float64), w.astype(np.float64), strides),
                               rtol=1e-4, atol=1e-5)


def test_a_fixed_rank_convolution_refuses_another_rank() -> None:
    with pytest.raises(ValueError, match="must be 5-D"):
        layers.conv3d(tf.zeros([1, 4, 4, 2]), 3, 2)


def _numpy_pool(x, kernel, strides, reduce):
    out = [(s - k) // st + 1 for s, k, st in zip(x.shape[1:-1], kernel, strides)]
    y = np.zeros((x.shape[0], *out, x.shape[-1]), x.dtype)
    for pos in np.ndindex(*out):
        window = x[(slice(None),) + tuple(slice(p * st, p * st + k) for p, st, k in zip(pos, strides, kernel))]
        y[(slice(None),) + pos] = reduce(window.reshape(x.shape[0], -1, x.shape[-1]), axis=1)
    return y


def test_pools_of_any_rank_match_numpy() -> None:
    x = np.random.default_rng(4).standard_normal((2, 6, 5, 4, 3)).astype(np.float32)
    got = tf.Session().run([layers.max_pool3d(tf.constant(x), 2, stride=2),
                            layers.avg_pool3d(tf.constant(x), (2, 3, 2), stride=1),
                            layers.pool(tf.constant(x[:, :, :, 0]), (3, 2), "MAX", stride=(1, 2))])
    np.testing.assert_allclose(got[0], _numpy_pool(x, (2, 2, 2), (2, 2, 2), np.max), rtol=1e-6)
    np.testing.assert_allclose(got[1], _numpy_pool(x, (2, 3, 2), (1, 1, 1), np.mean), rtol=1e-5)
    np.testing.assert_allclose(got[2], _numpy_pool(x[:, :, :, 0], (3, 2), (1, 2), np.max), rtol=1e-6)
    with pytest.raises(ValueError, match="pooling_type must be 'MAX' or 'AVG'"):
        layers.pool(tf.constant(x), 2, "MIN")


def test_group_norm_normalizes_each_group_of_channels() -> None:
    x = np.random.default_rng(5).standard_normal((2, 4, 3, 8)).astype(np.float32) * 3 + 1
    y = layers.group_norm(tf.constant(x), groups=4, epsilon=1e-6,
                          param_initializers={"gamma": tf.constant_initializer(2.0), "beta": tf.constant_initializer(0.5)})
    names = sorted(v.op.name for v in tf.global_variables())
    assert names == ["GroupNorm/beta", "GroupNorm/gamma"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(y)
    g = x.astype(np.float64).reshape(2, 4, 3, 4, 2)
    want = (g - g.mean(axis=(1, 2, 4), keepdims=True)) / np.sqrt(g.var(axis=(1, 2, 4), keepdims=True) + 1e-6)
    np.testing.assert_allclose(got, want.reshape(x.shape) * 2 + 0.5, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="do not split into 3 groups"):
        layers.group_norm(tf.constant(x), groups=3)


@pytest.mark.parametrize("data_format, axis", [("NHWC", 3), ("NCHW", 1)])
def test_instance_norm_normalizes_each_example_and_channel(data_format, axis) -> None:
    x = np.random.default_rng(6).standard_normal((3, 4, 5, 6)).astype(np.float32) * 2 - 1
    y = layers.instance_norm(tf.constant(x), data_format=data_format, epsilon=1e-6)
    (gamma,) = [v for v in tf.global_variables() if v.op.name == "InstanceNorm/gamma"]
    assert gamma.shape.as_list() == [x.shape[axis]]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got = sess.run(y)
    spatial = tuple(a for a in (1, 2, 3) if a != axis)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(axis=spatial, keepdims=True)) / np.sqrt(x64.var(axis=spatial, keepdims=True) + 1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_maxout_takes_the_maximum_of_each_group() -> None:
    x = np.arange(12, dtype=np.float32).reshape(2, 6) * np.array([1, -1, 1, -1, 1, -1], np.float32)
    got = tf.Session().run(layers.maxout(tf.constant(x), 3))
    np.testing.assert_array_equal(got, x.reshape(2, 3, 2).max(axis=2))
    with pytest.raises(ValueError, match="not a multiple of num_units=4"):
        layers.maxout(tf.constant(x), 4)


def test_dense_to_sparse_keeps_what_differs_from_the_eos_token() -> None:
    x = np.array([[1, 0, 2], [0, 0, 3]], np.int32)
    sp = layers.dense_to_sparse(tf.constant(x))
    indices, values, shape = tf.Session().run([sp.indices, sp.values, sp.dense_shape])
    np.testing.assert_array_equal(indices, [[0, 0], [0, 2], [1, 2]])
    np.testing.assert_array_equal(values, [1, 2, 3])
    np.testing.assert_array_equal(shape, [2, 3])


def test_l1_l2_regularizer_adds_both_penalties() -> None:
    w = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)
    penalty = layers.l1_l2_regularizer(scale_l1=0.1, scale_l2=0.01)(tf.constant(w))
    assert tf.Session().run(penalty) == pytest.approx(0.1 * np.abs(w).sum() + 0.01 * (w ** 2).sum() / 2, rel=1e-6)
    assert layers.l1_l2_regularizer(0.0, 0.0)(tf.constant(w)) is None
    with pytest.raises(ValueError, match="scales must be >= 0"):
        layers.l1_l2_regularizer(-1.0)


def test_summaries_of_tensors_and_activations() -> None:
    h = tf.nn.relu(tf.constant([[-1.0, 2.0], [3.0, -4.0]]), name="hidden")
    tf.add_to_collection(tf.GraphKeys.ACTIVATIONS, h)
    layers.summarize_tensor(tf.constant(2.5, name="scalar"))
    layers.summarize_activations()
    with tf.Session() as sess:
        merged = Summary.FromString(np.asarray(sess.run(tf.summary.merge_all()), dtype=object)[()])
    kinds = {v.tag: v.WhichOneof("value") for v in merged.value}
    # the summary's scope is uniquified against the op of the same name, as in TensorFlow
    assert kinds == {"scalar_1": "simple_value", "hidden/activation": "histo", "hidden/zeros": "simple_value"}
    assert next(v.simple_value for v in merged.value if v.tag == "hidden/zeros") == pytest.approx(0.5)


def test_slim_re_exports_them() -> None:
    slim = tf.contrib.slim
    for name in ("optimize_loss", "group_norm", "instance_norm", "conv3d", "max_pool3d", "l1_l2_regularizer", "maxout"):
        assert getattr(slim, name) is getattr(layers, name)
