"""TF 1.15's gradient registry as scripts use it: RegisterGradient with gradient_override_map
(straight-through estimators, py_func gradients), NotDifferentiable, tf.gradients' TF1 arguments,
tf.AggregationMethod, tf.hessians (against hand-derived second derivatives and finite differences),
tf.Operation / tf.OpError and tf.DeviceSpec's parsing and merging."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import trainer as tf

_names = itertools.count()


def _fresh(prefix: str) -> str:
    """Registered names are process-wide (as in TF): each test registers its own."""
    return f"{prefix}{next(_names)}"


def test_straight_through_sign_with_an_override_map():
    name = _fresh("StraightThrough")

    @tf.RegisterGradient(name)
    def _ste(op, grad):
        x = op.inputs[0]
        return grad * tf.cast(tf.less_equal(tf.abs(x), 1.0), grad.dtype)  # clipped identity, as in binarized nets

    x = tf.placeholder(tf.float32, [4])
    g = tf.get_default_graph()
    with g.gradient_override_map({"Sign": name}):
        y = tf.sign(x)
    plain = tf.sign(x)  # built outside the map: the ordinary (zero) gradient
    w = tf.constant([1.0, 2.0, 3.0, 4.0])
    gy = tf.gradients(tf.reduce_sum(y * w), x)[0]
    gp = tf.gradients(tf.reduce_sum(plain * w), x, unconnected_gradients="zero")[0]
    with tf.Session() as sess:
        out_y, out_p = sess.run([gy, gp], {x: [0.5, -2.0, -0.3, 1.5]})
    np.testing.assert_allclose(out_y, [1.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(out_p, np.zeros(4))


def test_override_to_a_builtin_gradient_name_and_nested_maps():
    x = tf.constant([0.2, 0.7])
    g = tf.get_default_graph()
    with g.gradient_override_map({"Round": "Identity", "Floor": "Identity"}):
        with g.gradient_override_map({"Floor": "Neg"}):
            f = tf.floor(x)
        r = tf.round(x)
    grads = tf.gradients(tf.reduce_sum(r * 3.0) + tf.reduce_sum(f * 5.0), x)[0]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(grads), [3.0 - 5.0, 3.0 - 5.0])


def test_py_func_gets_a_gradient_through_the_override_map():
    name = _fresh("PyCube")

    @tf.RegisterGradient(name)
    def _cube_grad(op, grad):
        return 3.0 * tf.square(op.inputs[0]) * grad

    x = tf.placeholder(tf.float64, [3])
    with tf.get_default_graph().gradient_override_map({"PyFunc": name, "PyFuncStateless": name}):
        y = tf.py_func(lambda a: a ** 3, [x], tf.float64)
    y.set_shape([3])
    dx = tf.gradients(tf.reduce_sum(y), x)[0]
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(dx, {x: [1.0, -2.0, 0.5]}), [3.0, 12.0, 0.75])


def test_multi_input_gradient_function_and_wrong_count():
    good, bad = _fresh("MulSwap"), _fresh("MulBad")

    @tf.RegisterGradient(good)
    def _swap(op, grad):
        a, b = op.inputs
        return [grad * a, grad * b]  # deliberately swapped: proves the function is used

    @tf.RegisterGradient(bad)
    def _wrong(op, grad):
        return grad

    a, b = tf.constant(2.0), tf.constant(5.0)
    g = tf.get_default_graph()
    with g.gradient_override_map({"Mul": good}):
        y = a * b
    with tf.Session() as sess:
        assert sess.run(tf.gradients(y, [a, b])) == [2.0, 5.0]
    with g.gradient_override_map({"Mul": bad}):
        z = a * b
    with pytest.raises(ValueError, match=r"returned 1 gradients for 2 inputs"):
        tf.gradients(z, a)


def test_registry_errors():
    name = _fresh("Twice")
    tf.RegisterGradient(name)(lambda op, g: g)
    with pytest.raises(KeyError, match=name):
        tf.RegisterGradient(name)
    with pytest.raises(KeyError, match="MatMul"):
        tf.RegisterGradient("MatMul")  # it has a gradient already
    with pytest.raises(TypeError, match="non-empty string"):
        tf.RegisterGradient("")
    with pytest.raises(TypeError, match="expected a function"):
        tf.RegisterGradient(_fresh("NotCallable"))(3)
    with pytest.raises(TypeError, match="dict of op type strings"):
        with tf.get_default_graph().gradient_override_map(["Sign"]):
            pass
    x = tf.constant(1.0)
    with tf.get_default_graph().gradient_override_map({"Identity": "NoSuchGradientName"}):
        y = tf.identity(x)
    with pytest.raises(LookupError, match="NoSuchGradientName"):
        tf.gradients(y, x)


def test_not_differentiable_stops_the_gradient_of_a_mapped_op():
    name = _fresh("Blocked")
    tf.NotDifferentiable(name)
    assert tf.no_gradient is tf.NoGradient is tf.NotDifferentiable
    with pytest.raises(KeyError):
        tf.no_gradient(name)
    x = tf.constant([1.0, 2.0])
    with tf.get_default_graph().gradient_override_map({"Exp": name}):
        y = tf.exp(x)
    assert tf.gradients(tf.reduce_sum(y), x) == [None]


def test_tf1_gradients_arguments():
    x = tf.placeholder(tf.float32, [2])
    unused = tf.placeholder(tf.float32, [3])
    y = x * x
    for method in (None, tf.AggregationMethod.ADD_N, tf.AggregationMethod.DEFAULT,
                   tf.AggregationMethod.EXPERIMENTAL_TREE, tf.AggregationMethod.EXPERIMENTAL_ACCUMULATE_N):
        grads = tf.gradients(y + 3.0 * x, [x, unused], None, "my_grads", True, True, method,
                             unconnected_gradients="zero")
        assert grads[0].name.startswith("my_grads")
        with tf.Session() as sess:
            gx, gu = sess.run(grads, {x: [1.0, -2.0], unused: np.zeros(3)})
        np.testing.assert_allclose(gx, [5.0, -1.0])
        np.testing.assert_array_equal(gu, np.zeros(3))
    assert tf.gradients(y, [x, unused])[1] is None
    np.testing.assert_allclose(
        tf.Session().run(tf.gradients(x * tf.stop_gradient(x), x, stop_gradients=[x])[0], {x: [1.0, 2.0]}),
        [1.0, 2.0])
    with pytest.raises(ValueError, match="invalid aggregation_method"):
        tf.gradients(y, x, aggregation_method=7)
    with pytest.raises(ValueError, match="unconnected_gradients"):
        tf.gradients(y, x, unconnected_gradients="ones")


def test_optimizer_accepts_tf1_gradient_arguments():
    w = tf.Variable([1.0, -1.0])
    loss = tf.reduce_sum(tf.square(w))
    opt = tf.train.GradientDescentOptimizer(0.25)
    train = opt.minimize(loss, None, [w], tf.train.Optimizer.GATE_GRAPH,
                         tf.AggregationMethod.EXPERIMENTAL_TREE, True, "sgd", None)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(train)
        np.testing.assert_allclose(sess.run(w), [0.5, -0.5])
    with pytest.raises(ValueError, match="GradientDescentOptimizer.compute_gradients: invalid aggregation_method"):
        opt.compute_gradients(loss, aggregation_method="tree")
    with pytest.raises(ValueError, match="gate_gradients"):
        opt.compute_gradients(loss, gate_gradients=5)
    scaled = opt.compute_gradients(loss, [w], grad_loss=tf.constant(3.0))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(scaled[0][0]), [6.0, -6.0])


def test_hessians_match_hand_derivations():
    # f(x) = sum(x^3) + x0 x1: H = diag(6 x) + [[0, 1], [1, 0]]
    x = tf.placeholder(tf.float32, [2])
    h = tf.hessians(tf.reduce_sum(x * x * x) + x[0] * x[1], x)[0]
    assert h.shape == (2, 2)
    # quadratic form over a matrix variable: f(W) = sum((W v)^2), H[(i,j),(k,l)] = 2 d_ik v_j v_l
    v = np.array([1.0, -2.0, 0.5])
    w = tf.placeholder(tf.float64, [2, 3])
    hw = tf.hessians(tf.reduce_sum(tf.square(tf.matmul(w, v.reshape(3, 1)))), w)[0]
    assert hw.shape == (2, 3, 2, 3)
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(h, {x: [1.0, -2.0]}), [[6.0, 1.0], [1.0, -12.0]])
        expect = 2.0 * np.einsum("ik,j,l->ijkl", np.eye(2), v, v)
        np.testing.assert_allclose(sess.run(hw, {w: np.ones((2, 3))}), expect)


def test_hessian_of_a_softmax_loss_matches_finite_differences():
    """Second derivatives through tanh, softmax cross-entropy and a mean (TF's extra xent term)."""
    rng = np.random.default_rng(3)
    feats = rng.standard_normal((4, 3))
    labels = np.eye(2)[[0, 1, 1, 0]]
    w = tf.placeholder(tf.float64, [3, 2])
    logits = tf.tanh(tf.matmul(tf.constant(feats), w))
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits))
    hess = tf.hessians(loss, w)[0]
    grad = tf.gradients(loss, w)[0]
    w0 = rng.standard_normal((3, 2))
    with tf.Session() as sess:
        analytic = sess.run(hess, {w: w0}).reshape(6, 6)
        eps = 1e-5
        numeric = np.zeros((6, 6))
        for k in range(6):
            d = np.zeros(6)
            d[k] = eps
            up = sess.run(grad, {w: w0 + d.reshape(3, 2)}).reshape(-1)
            down = sess.run(grad, {w: w0 - d.reshape(3, 2)}).reshape(-1)
            numeric[:, k] = (up - down) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(analytic, analytic.T, atol=1e-12)


def test_hessians_errors():
    x = tf.placeholder(tf.float32, [None])
    with pytest.raises(ValueError, match="fully known shape"):
        tf.hessians(tf.reduce_sum(x * x), x)
    y = tf.placeholder(tf.float32, [2])
    with pytest.raises(ValueError, match="hessians: invalid aggregation_method"):
        tf.hessians(tf.reduce_sum(y), y, aggregation_method="fast")


def test_operation_and_op_error():
    x = tf.constant(1.0, name="c")
    assert isinstance(x.op, tf.Operation) and x.op.name == "c"
    assert tf.get_default_graph().get_operation_by_name("c") is x.op
    q = tf.FIFOQueue(1, [tf.float32])
    close = q.close()
    deq = q.dequeue()
    with tf.Session() as sess:
        sess.run(close)
        with pytest.raises(tf.OpError):
            sess.run(deq)
        with pytest.raises(tf.errors.OpError):
            sess.run(deq)


@pytest.mark.parametrize("text, parts, printed", [
    ("/job:ps/replica:0/task:1/device:GPU:0", ("ps", 0, 1, "GPU", 0), "/job:ps/replica:0/task:1/device:GPU:0"),
    ("/job:worker/task:3", ("worker", None, 3, None, None), "/job:worker/task:3"),
    ("/gpu:1", (None, None, None, "GPU", 1), "/device:GPU:1"),
    ("CPU:0", (None, None, None, "CPU", 0), "/device:CPU:0"),
    ("/device:CPU:*", (None, None, None, "CPU", None), "/device:CPU:*"),
    ("", (None, None, None, None, None), ""),
])
def test_device_spec_parses_and_prints_as_tf(text, parts, printed):
    spec = tf.DeviceSpec.from_string(text)
    assert (spec.job, spec.replica, spec.task, spec.device_type, spec.device_index) == parts
    assert spec.to_string() == printed
    assert tf.DeviceSpec.from_string(printed) == spec


def test_device_spec_merges_and_places_ops():
    spec = tf.DeviceSpec(job="ps", task=0)
    spec.merge_from(tf.DeviceSpec.from_string("/task:2/device:CPU:0"))
    assert spec.to_string() == "/job:ps/task:2/device:CPU:0"
    other = tf.DeviceSpec(device_type="gpu").make_merged_spec(tf.DeviceSpec(device_index=1))
    assert other.to_string() == "/device:GPU:1" and spec.to_string() == "/job:ps/task:2/device:CPU:0"
    spec.parse_from_string("/job:worker")
    assert spec.job == "worker" and spec.task == 2
    assert spec.replace(task=5).task == 5 and spec.task == 2
    spec.task = "7"
    assert spec.task == 7 and hash(spec) == hash(tf.DeviceSpec.from_string(spec.to_string()))
    with tf.device(tf.DeviceSpec(job="ps", task=1, device_type="CPU", device_index=0)):
        v = tf.constant(1.0)
    assert v.op.device == "/job:ps/replica:0/task:1/device:CPU:0"


@pytest.mark.parametrize("bad, message", [
    ("/job:ps/bogus:1", "Unknown attribute: 'bogus'"),
    ("/gpu:0/cpu:0", "Cannot specify multiple device types"),
    ("/task:x", "task must be an integer"),
])
def test_device_spec_bad_names(bad, message):
    with pytest.raises(ValueError, match=message):
        tf.DeviceSpec.from_string(bad)
