"""``tf.print`` and TF 1.15's top-level graph helpers (switch_case, init_scope, is_numeric_tensor,
add_check_numerics_ops, timestamp, py_function)."""

from __future__ import annotations

import sys
import time

import numpy as np
import pytest

import trainer as tf


def test_print_writes_summarized_tensors_to_stderr_by_default(capfd):
    x = tf.constant(np.arange(10))
    op = tf.print("x:", x, tf.constant([[1.5, 2.0], [0.25, -3.0]]))
    assert tf.Session().run(op) is None
    err = capfd.readouterr().err
    # TensorFlow's layout: three entries at each end of a long dim, rows on their own lines
    assert err == "x: [0 1 2 ... 7 8 9] [[1.5 2]\n [0.25 -3]]\n"


def test_print_options_and_python_structures(capfd):
    x = tf.constant(np.arange(6).reshape(2, 3))
    op = tf.print({"a": x}, [1, "two"], tf.constant("text"), output_stream=sys.stdout, summarize=1, sep="|",
                  end="<\n")
    tf.Session().run(op)
    assert capfd.readouterr().out == "{'a': [[0 ... 2]\n [3 ... 5]]}|[1, two]|text<\n"
    every = tf.print(tf.constant(np.arange(8)), summarize=-1)
    tf.Session().run(every)
    assert capfd.readouterr().err == "[0 1 2 3 4 5 6 7]\n"


def test_print_to_a_file_and_in_control_dependencies(tmp_path):
    path = tmp_path / "log.txt"
    x = tf.placeholder(tf.float32, (3,))
    with tf.control_dependencies([tf.print("step", x, output_stream=f"file://{path}")]):
        y = tf.identity(x * 2)
    sess = tf.Session()
    for k in range(2):
        sess.run(y, {x: [k, k, k]})
    assert path.read_text() == "step [0 0 0]\nstep [1 1 1]\n"


def test_print_rejects_bad_arguments():
    with pytest.raises(ValueError, match="output_stream must be"):
        tf.print(tf.constant(1), output_stream="somewhere")
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        tf.print(tf.constant(1), message="x")
    with pytest.raises(ValueError, match="summarize must be"):
        tf.print(tf.constant(1), summarize=-5)


def test_print_to_tf_logging(tf_log):
    tf.Session().run(tf.print("loss", tf.constant(0.5), output_stream=tf.logging.warning))
    assert "loss 0.5" in tf_log.text


def test_switch_case_runs_only_the_chosen_branch():
    i = tf.placeholder(tf.int32, ())
    calls = []

    def branch(k):
        def fn():
            calls.append(k)
            return tf.py_func(lambda: np.int64(k * 10), [], tf.int64)
        return fn

    out = tf.switch_case(i, [branch(0), branch(1), branch(2)])
    with_default = tf.switch_case(i, {0: lambda: tf.constant(1.0), 1: lambda: tf.constant(2.0)},
                                  default=lambda: tf.constant(-1.0))
    sess = tf.Session()
    assert [int(sess.run(out, {i: k})) for k in (0, 1, 2)] == [0, 10, 20]
    assert int(sess.run(out, {i: 7})) == 20  # out of range: the last branch
    assert [float(sess.run(with_default, {i: k})) for k in (0, 1, 2, -3)] == [1.0, 2.0, -1.0, -1.0]
    with pytest.raises(ValueError, match="branch indices must be 0..1"):
        tf.switch_case(i, {0: lambda: 1, 2: lambda: 2})
    with pytest.raises(TypeError, match="int32 scalar"):
        tf.switch_case(tf.constant(1.0), [lambda: tf.constant(1)])


def test_init_scope_clears_control_dependencies():
    g = tf.get_default_graph()
    gate = tf.no_op(name="gate")
    with tf.control_dependencies([gate]):
        inside = tf.constant(1.0, name="inside")
        with tf.init_scope():
            lifted = tf.constant(2.0, name="lifted")
    assert gate in inside.node.control_inputs
    assert lifted.node.control_inputs == []
    assert g is tf.get_default_graph()


def test_is_numeric_tensor():
    assert tf.is_numeric_tensor(tf.constant(1.0)) and tf.is_numeric_tensor(tf.constant([1], tf.int32))
    assert tf.is_numeric_tensor(tf.complex(tf.constant(1.0), tf.constant(2.0)))
    assert not tf.is_numeric_tensor(tf.constant("a")) and not tf.is_numeric_tensor(tf.constant(True))
    assert not tf.is_numeric_tensor(np.float32(1.0))


def test_add_check_numerics_ops_catches_nan_and_names_the_op():
    x = tf.placeholder(tf.float32, (2,))
    y = tf.sqrt(x, name="root")
    check = tf.add_check_numerics_ops()
    sess = tf.Session()
    np.testing.assert_allclose(sess.run([y, check], {x: [4.0, 9.0]})[0], [2.0, 3.0])
    with np.errstate(invalid="ignore"), pytest.raises(tf.errors.InvalidArgumentError, match="root:0"):
        sess.run(check, {x: [4.0, -1.0]})


def test_timestamp_is_the_clock_at_run_time():
    ts = tf.timestamp()
    assert ts.dtype == np.float64 and ts.shape == ()
    before = time.time()
    value = tf.Session().run(ts)
    assert before - 1.0 <= value <= time.time() + 1.0


def test_py_function_passes_values_with_numpy_and_takes_a_tout_list():
    x = tf.placeholder(tf.float32, (3,))
    doubled, total = tf.py_function(lambda a: (a.numpy() * 2, np.sum(a)), [x], [tf.float32, tf.float32])
    single = tf.py_function(lambda a: a + 1, [x], tf.float32)
    out = tf.Session().run([doubled, total, single], {x: [1, 2, 3]})
    np.testing.assert_allclose(out[0], [2, 4, 6])
    assert out[1] == pytest.approx(6.0)
    np.testing.assert_allclose(out[2], [2, 3, 4])
    with pytest.raises(TypeError, match="func must be callable"):
        tf.py_function(3, [x], tf.float32)


def test_tf1_script_logs_progress_with_tf_print(capfd):
    """A TF1 training loop printing its loss each step through a control dependency."""
    tf.set_random_seed(3)
    x = tf.constant(np.linspace(-1, 1, 8, dtype=np.float32).reshape(8, 1))
    target = 3.0 * x + 1.0
    pred = tf.layers.dense(x, 1)
    loss = tf.reduce_mean(tf.square(pred - target))
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.3).minimize(loss, global_step=step)
    with tf.control_dependencies([train]):
        report = tf.print("step", step, "loss", loss, output_stream=sys.stdout)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(30):
            sess.run(report)
        final = sess.run(loss)
    lines = capfd.readouterr().out.strip().split("\n")
    assert len(lines) == 30 and all(line.startswith("step ") and " loss " in line for line in lines)
    assert final < 0.05  # from about 10 at the start; 0.0003 measured
