"""The TF1 API surface itself: dtypes, seeds, variable scopes and their errors, legacy keywords,
the unsupported-symbol error, and the compatibility table being up to date."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import trainer as tf
from trainer import compat


def test_dtypes_work_wherever_a_dtype_is_accepted():
    x = tf.placeholder(tf.float32, [None, 2])
    assert x.dtype == tf.float32 and tf.float32 == np.float32 and tf.as_dtype("float") == tf.float32
    assert tf.as_dtype(np.int64) is tf.int64 and tf.int32.as_numpy_dtype is np.int32 and tf.float64.name == "float64"
    v = tf.Variable(tf.zeros([2], dtype=tf.int64))
    c = tf.cast(tf.constant([1.7, -2.2]), tf.int32)
    s = tf.InteractiveSession()
    try:
        s.run(tf.global_variables_initializer())
        assert v.eval().dtype == np.int64 and c.eval().tolist() == [1, -2]
        assert np.zeros(2, tf.float16).dtype == np.float16
    finally:
        s.close()
    with pytest.raises(TypeError, match="cannot convert 'floaty' to a dtype"):
        tf.as_dtype("floaty")


def _draws(graph_seed, op_seed):
    tf.reset_default_graph()
    tf.set_random_seed(graph_seed)
    a = tf.random_normal([3], seed=op_seed)
    b = tf.random_uniform([3])
    sess = tf.Session()
    return [sess.run([a, b]) for _ in range(2)]


def test_graph_and_op_seeds_reproduce_across_fresh_graphs_and_redraw_each_run():
    first, again = _draws(1, 2), _draws(1, 2)
    for (a1, b1), (a2, b2) in zip(first, again):
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(b1, b2)
    assert not np.array_equal(first[0][0], first[1][0])  # an op, not a constant: new values every run
    assert not np.array_equal(_draws(3, 2)[0][0], first[0][0])
    tf.reset_default_graph()
    t = tf.truncated_normal([20000], mean=1.0, stddev=0.5, seed=1)
    v = tf.Session().run(t)
    assert v.min() >= 0.0 and v.max() <= 2.0 and abs(v.mean() - 1.0) < 0.01


def test_variable_scope_reuse_and_its_errors():
    with tf.variable_scope("layer1"):
        w = tf.get_variable("weights", [4, 2], initializer=tf.random_normal_initializer(stddev=0.1),
                            regularizer=tf.contrib.layers.l2_regularizer(0.1))
    with tf.variable_scope("layer1", reuse=True):
        assert tf.get_variable("weights") is w
    with tf.variable_scope("layer1") as scope:
        scope.reuse_variables()
        assert tf.get_variable("weights", [4, 2]) is w
    with pytest.raises(ValueError, match="Variable layer1/weights already exists, disallowed. Did you mean to set "
                                         "reuse=True"):
        with tf.variable_scope("layer1"):
            tf.get_variable("weights", [4, 2])
    with pytest.raises(ValueError, match="Variable layer1/bias does not exist"):
        with tf.variable_scope("layer1", reuse=True):
            tf.get_variable("bias", [2])
    with pytest.raises(ValueError, match="specified shape \\(3, 2\\) and found shape \\(4, 2\\)"):
        with tf.variable_scope("layer1", reuse=tf.AUTO_REUSE):
            tf.get_variable("weights", [3, 2])
    reg = tf.losses.get_regularization_loss()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(reg), 0.05 * (sess.run(w) ** 2).sum(), rtol=1e-5)


def test_get_variable_hands_a_partitioner_to_partitioned_variables(monkeypatch):
    def partitioner(shape, dtype):
        return [2, 1]

    # Without trainer.partitioned_variables (this branch), partitioner= says what is missing.
    monkeypatch.setitem(sys.modules, "trainer.partitioned_variables", None)
    with pytest.raises(NotImplementedError, match="partitioned variables"):
        tf.get_variable("sharded", [10, 2], partitioner=partitioner)
    # With it (the dist-model branch), get_variable delegates with the scope's full name.
    calls = []
    module = types.ModuleType("trainer.partitioned_variables")
    module.partitioned_variable = lambda name, shape, **kw: calls.append((name, shape, kw)) or "the variable"
    monkeypatch.setitem(sys.modules, "trainer.partitioned_variables", module)
    with tf.variable_scope("emb"):
        assert tf.get_variable("table", [10, 2], partitioner=partitioner) == "the variable"
    (name, shape, kw), = calls
    assert name == "emb/table" and shape == [10, 2] and kw["partitioner"] is partitioner and kw["trainable"]

def test_legacy_keywords_and_core_ops():
    x = tf.constant([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    ops = [tf.reduce_sum(x, reduction_indices=[1], keep_dims=True), tf.argmax(x, dimension=1), tf.argmin(x, 1),
           tf.expand_dims(x, dim=0), tf.nn.softmax(x, dim=-1), tf.nn.l2_normalize(x, dim=1),
           tf.one_hot(tf.argmax(x, 1), 3), tf.stack(tf.unstack(x), axis=1), tf.split(x, 3, axis=1)[1],
           tf.tile(x[:1], [2, 1]), tf.clip_by_value(x, 2.0, 4.0), tf.gather_nd(x, [[1, 2]]), tf.range(3)]
    vals = tf.Session().run(ops)
    assert vals[0].tolist() == [[9.0], [12.0]] and vals[1].tolist() == [1, 2] and vals[2].tolist() == [0, 1]
    assert vals[3].shape == (1, 2, 3) and np.allclose(vals[4].sum(1), 1) and np.allclose((vals[5] ** 2).sum(1), 1)
    assert vals[6].tolist() == [[0, 1, 0], [0, 0, 1]] and vals[7].tolist() == [[1, 4], [5, 2], [3, 6]]
    assert vals[8].tolist() == [[5.0], [2.0]] and vals[9].tolist() == [[1, 5, 3]] * 2
    assert vals[10].tolist() == [[2, 4, 3], [4, 2, 4]] and vals[11].tolist() == [6.0] and vals[12].tolist() == [0, 1, 2]


def test_unsupported_symbol_names_itself_and_the_nearest_alternative():
    with pytest.raises(AttributeError, match="tf.nn.quantized_conv2d is a TensorFlow 1.x symbol that flowstack "
                                             "does not support.*nearest supported: .*tf.nn.conv2d"):
        tf.nn.quantized_conv2d  # noqa: B018
    with pytest.raises(AttributeError, match="nearest supported: tf.random_normal"):
        tf.random_norml  # noqa: B018
    with pytest.raises(AttributeError, match="tf.contrib.rnn.GridLSTMCell is a TensorFlow 1.x symbol"):
        tf.contrib.rnn.GridLSTMCell  # noqa: B018
    assert hasattr(tf.train, "SyncReplicasOptimizer") and not hasattr(tf.train, "sdca_optimizer")


def test_compatibility_doc_is_generated_from_the_code():
    assert compat.DOC_PATH.read_text() == compat.markdown(), "run python -m trainer.compat --markdown"
    table = dict(compat.compatibility_table()["tf.nn"])
    assert table["dynamic_rnn"] and table["nce_loss"] and not table["quantized_conv2d"]


def test_linear_algebra_and_selection_ops_with_their_gradients():
    a_value = np.array([[2.0, 1.0], [1.0, 3.0]], np.float32)
    a = tf.constant(a_value)
    x = tf.constant([3.0, 1.0, 2.0, 1.0])
    vals = tf.Session().run([tf.matrix_inverse(a), tf.matrix_determinant(a), tf.tensordot(a, a, [[0], [1]]),
                             tf.trace(a), tf.boolean_mask(x, x > 1.5), tf.sort(x), tf.argsort(x, direction="DESCENDING"),
                             tf.unsorted_segment_sum(tf.constant([[1.0], [3.0], [5.0]]), [0, 2, 0], 3),
                             tf.where(x > 1.5), tf.floormod(tf.constant([-3.0, 5.0]), 2.0), a[None, ..., 0]])
    np.testing.assert_allclose(vals[0], np.linalg.inv(a_value), rtol=1e-6)
    assert np.isclose(vals[1], 5.0) and vals[2].tolist() == (a_value.T @ a_value.T).tolist() and vals[3] == 5.0
    assert vals[4].tolist() == [3.0, 2.0] and vals[5].tolist() == [1, 1, 2, 3] and vals[6].tolist() == [0, 2, 1, 3]
    assert vals[7].tolist() == [[6.0], [0.0], [3.0]] and vals[8].tolist() == [[0], [2]]
    assert vals[9].tolist() == [1.0, 1.0] and vals[10].tolist() == [[2.0, 1.0]]
    loss = tf.reduce_sum(tf.matrix_inverse(a)) + tf.trace(a) + tf.reduce_sum(tf.boolean_mask(a, tf.constant([True, False])))
    inv = np.linalg.inv(a_value)
    expected = -(inv.T @ np.ones((2, 2)) @ inv.T) + np.eye(2) + np.array([[1.0, 1.0], [0.0, 0.0]])
    np.testing.assert_allclose(tf.Session().run(tf.gradients(loss, [a])[0]), expected, rtol=1e-5)


def test_learning_rate_schedules_and_checkpoint_utilities(tmp_path):
    step = tf.Variable(np.int64(50), name="global_step")
    rates = [tf.train.inverse_time_decay(1.0, step, 100, 1.0), tf.train.natural_exp_decay(1.0, step, 100, 1.0),
             tf.train.polynomial_decay(1.0, step, 100, 0.0, power=2.0), tf.train.cosine_decay(1.0, step, 100)]
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    np.testing.assert_allclose(sess.run(rates), [1 / 1.5, np.exp(-0.5), 0.25, 0.5], rtol=1e-6)
    path = tf.train.Saver().save(sess, str(tmp_path / "model"), global_step=50)
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert state.model_checkpoint_path == path and state.all_model_checkpoint_paths == [path]
    assert tf.train.list_variables(str(tmp_path)) == [("global_step", [])]
    assert tf.train.load_variable(str(tmp_path), "global_step") == 50
    assert tf.train.get_checkpoint_state(str(tmp_path / "empty")) is None


def test_tf_layers_take_tf1_keywords_and_a_training_placeholder():
    x = tf.placeholder(tf.float32, [None, 400])
    is_training = tf.placeholder(tf.bool, [])
    h = tf.layers.dense(inputs=x, units=400, activation=tf.nn.relu,
                        kernel_initializer=tf.constant_initializer(0.0025),
                        kernel_regularizer=tf.contrib.layers.l2_regularizer(1.0))
    out = tf.layers.dropout(inputs=h, rate=0.5, training=is_training)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    ones = np.ones((2, 400), np.float32)
    train_out, eval_out = (sess.run(out, {x: ones, is_training: flag}) for flag in (True, False))
    np.testing.assert_allclose(eval_out, 1.0, rtol=1e-5)
    assert 0.4 < (train_out == 0).mean() < 0.6 and np.allclose(train_out[train_out != 0], 2.0, rtol=1e-5)
    np.testing.assert_allclose(sess.run(tf.losses.get_regularization_loss()), 0.5 * 400 * 400 * 0.0025 ** 2, rtol=1e-5)


def test_map_fn_scan_and_folds_over_a_batch_of_unknown_size_with_gradients():
    x = tf.placeholder(tf.float32, [None, 3])
    w = tf.Variable(np.array([1.0, 2.0, 3.0], np.float32))
    mapped = tf.map_fn(lambda row: tf.reduce_sum(row * w), x)
    scanned = tf.scan(lambda acc, row: acc + row * w, x, initializer=tf.zeros([3]))
    product = tf.foldl(lambda acc, row: acc * row, x)
    backwards = tf.foldr(lambda acc, v: acc - v, tf.constant([1.0, 2.0, 3.0]), initializer=tf.constant(0.0))
    grad = tf.gradients(tf.reduce_sum(mapped) + tf.reduce_sum(scanned), [w])[0]
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    m, s, p, b, gw = sess.run([mapped, scanned, product, backwards, grad], {x: xv})
    assert m.tolist() == (xv @ [1, 2, 3]).tolist() and s.tolist() == np.cumsum(xv * [1, 2, 3], 0).tolist()
    assert p.tolist() == xv.prod(0).tolist() and b == -6.0
    assert gw.tolist() == (xv.sum(0) + np.cumsum(xv, 0).sum(0)).tolist()


def test_exponential_moving_average_tracks_variables_from_their_initial_value():
    tf.set_random_seed(0)
    w = tf.Variable(tf.random_normal([3]))
    step = tf.train.get_or_create_global_step()
    ema = tf.train.ExponentialMovingAverage(0.9, num_updates=step)
    update = ema.apply([w])
    shadow = ema.average(w)
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    w0 = sess.run(w)
    np.testing.assert_array_equal(sess.run(shadow), w0)  # the same draw, not a second one
    sess.run(w.assign(w0 + 1.0))
    sess.run(update)  # decay min(0.9, (1 + 0) / (10 + 0)) = 0.1: the shadow moves 90% of the way
    np.testing.assert_allclose(sess.run(shadow) - w0, 0.9, rtol=1e-5)
    assert shadow.name == "Variable/ExponentialMovingAverage:0" and not shadow.trainable
    assert tf.get_collection(tf.GraphKeys.MOVING_AVERAGE_VARIABLES) == [shadow]


def test_print_assert_and_check_numerics(capfd):
    x = tf.placeholder(tf.float32, [2])
    printed = tf.Print(x, [x, tf.reduce_sum(x)], message="x is: ")
    with tf.control_dependencies([tf.assert_equal(tf.reduce_sum(x), 3.0, message="sum")]):
        doubled = tf.identity(printed) * 2.0
    checked = tf.check_numerics(x, "x")
    grad = tf.gradients(tf.reduce_sum(printed * printed), [x])[0]
    sess = tf.Session()
    out, g = sess.run([doubled, grad], {x: [1.0, 2.0]})
    assert out.tolist() == [2.0, 4.0] and g.tolist() == [2.0, 4.0]
    assert "x is: [1 2][3]" in capfd.readouterr().err  # TensorFlow's Print format
    with pytest.raises(tf.GraphError, match="assertion failed: sum: x == y did not hold 2.0 3.0"):
        sess.run(doubled, {x: [1.0, 1.0]})
    with pytest.raises(tf.GraphError, match="x: tensor had NaN or Inf values"):
        sess.run(checked, {x: [np.inf, 1.0]})
    with pytest.raises(tf.GraphError, match="x > 0 did not hold"):
        sess.run(tf.assert_positive(x), {x: [0.0, 1.0]})


def test_script_scaffolding_config_logging_flags_gfile_and_app_run(tmp_path, capsys):
    config = tf.ConfigProto(allow_soft_placement=True, inter_op_parallelism_threads=2)
    config.gpu_options.allow_growth = True
    with tf.Session(config=config) as sess:
        assert sess.run(tf.constant(2.0) * 3.0) == 6.0 and sess.config is config
    with pytest.raises(RuntimeError, match="no trainer.train.Server with target 'grpc://localhost:2222' runs in this"):
        tf.Session("grpc://localhost:2222")
    with pytest.raises(TypeError, match="ConfigProto has no field"):
        tf.ConfigProto(allow_growth=True)
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.logging.info("step %d", 3)
    assert "INFO:tensorflow:step 3" in capsys.readouterr().err
    flags = tf.flags.FlagValues()
    tf.app.flags.DEFINE_string("data_dir", "/tmp/data", "where", flag_values=flags)
    tf.app.flags.DEFINE_boolean("fake", True, "", flag_values=flags)
    assert flags(["train.py", "--data_dir", str(tmp_path), "--nofake", "rest"]) == ["train.py", "rest"]
    assert flags.data_dir == str(tmp_path) and flags.fake is False
    with pytest.raises(tf.flags.FlagsError, match="--steps: invalid literal"):
        tf.flags.DEFINE_integer("steps", 1, "", flag_values=flags)
        flags(["train.py", "--steps=ten"])
    tf.gfile.MakeDirs(str(tmp_path / "a" / "b"))
    with tf.gfile.GFile(str(tmp_path / "a" / "f.txt"), "w") as f:
        f.write("hi")
    with tf.gfile.GFile(str(tmp_path / "a" / "f.txt")) as f:
        assert f.size() == 2 and f.read() == "hi"
    assert tf.gfile.Exists(str(tmp_path / "a" / "f.txt"))
    assert tf.gfile.Glob(str(tmp_path / "a" / "*")) == [str(tmp_path / "a" / "b"), str(tmp_path / "a" / "f.txt")]
    with pytest.raises(SystemExit) as exit_info:
        tf.app.run(main=lambda argv: len(argv), argv=["prog", "x", "y"])
    assert exit_info.value.code == 3


def test_interactive_session_runs_ops_and_evaluates_tensors_without_a_session_argument():
    sess = tf.InteractiveSession()
    try:
        x = tf.placeholder(tf.float32, [None, 2])
        w = tf.Variable(tf.ones([2, 1]))
        y = tf.matmul(x, w)
        step = tf.train.GradientDescentOptimizer(0.1).minimize(tf.reduce_sum(y))
        tf.global_variables_initializer().run()
        step.run(feed_dict={x: [[1.0, 2.0]]})
        np.testing.assert_allclose(w.eval().ravel(), [0.9, 0.8], rtol=1e-6)
        np.testing.assert_allclose(y.eval(feed_dict={x: [[1.0, 1.0]]}), [[1.7]], rtol=1e-6)
        w.load(np.array([[3.0], [4.0]], np.float32))
        assert w.eval().ravel().tolist() == [3.0, 4.0] and w.initialized_value().eval().ravel().tolist() == [1.0, 1.0]
        assert w.eval().ravel().tolist() == [3.0, 4.0]
    finally:
        sess.close()
    with pytest.raises(ValueError, match="no default session"):
        tf.constant(1.0).eval()


def test_a_session_on_a_new_empty_graph_runs_that_graph():
    tf.placeholder(tf.float32, [None, 3], name="x")  # the default graph has an "x"
    g = tf.Graph()
    with tf.Session(graph=g) as sess:
        assert sess.graph is g
        with g.as_default():
            x = tf.placeholder(tf.float32, [None, 3], name="x")
            y = x * 2.0
        np.testing.assert_array_equal(sess.run(y, {x: np.ones((1, 3), np.float32)}), [[2.0, 2.0, 2.0]])


def test_set_shape_refines_a_shape_and_refuses_a_contradiction():
    x = tf.placeholder(tf.float32, [None, None])
    x.set_shape([None, 3])
    x.set_shape(tf.TensorShape([4, None]))
    assert x.shape == (4, 3) and x.get_shape().as_list() == [4, 3]
    with pytest.raises(ValueError, match=r"Shapes \(4, 3\) and \(4, 5\) are not compatible"):
        x.set_shape([4, 5])
    y = tf.placeholder(tf.float32)
    y.set_shape(tf.TensorShape(None))
    assert y.shape is None


def test_integer_operands_of_different_widths_meet():
    n = tf.placeholder(tf.int32, [])
    i = tf.constant(0)  # a Python int: int64 here, int32 in TensorFlow
    with tf.Session() as sess:
        assert sess.run([i < n, n - 1, 2 * n, i + tf.shape(tf.zeros([3]))[0]], {n: 5}) == [True, 4, 10, 3]


def test_the_math_random_linalg_and_compat_v1_namespaces():
    v1 = tf.compat.v1  # "import tensorflow.compat.v1 as tf" scripts
    v1.disable_eager_execution()
    v1.disable_v2_behavior()
    x = v1.placeholder(tf.float32, [None, 2])
    noise = tf.random.normal([2, 2], seed=1) * 0.0 + tf.random.uniform([2, 2], seed=2) * 0.0
    m = tf.linalg.matmul(x, tf.linalg.inv(tf.constant([[2.0, 0.0], [0.0, 4.0]])) + noise)
    total = tf.math.reduce_sum(m, axis=1)
    safe = tf.math.divide_no_nan(total, tf.constant([0.0, 2.0]))
    with v1.Session() as sess:
        got_total, got_safe = sess.run([total, safe], {x: [[2.0, 4.0], [4.0, 8.0]]})
    np.testing.assert_allclose(got_total, [2.0, 4.0])
    np.testing.assert_allclose(got_safe, [0.0, 2.0])
    assert tf.compat.as_bytes("a") == b"a" and tf.compat.as_text(b"a") == "a"
    with pytest.raises(AttributeError, match="tf.linalg.LinearOperator is a TensorFlow 1.x symbol that flowstack does not support"):
        tf.linalg.LinearOperator
    with pytest.raises(AttributeError, match="tf.random.uniformly does not exist"):
        tf.random.uniformly


def test_text_constants_are_tf_strings():
    c = tf.constant(["a b", "c"])
    assert c.dtype == tf.string
    with tf.Session() as sess:
        assert sess.run(c).dtype == object
