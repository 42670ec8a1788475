"""tf.train's ProximalAdagradOptimizer and AdagradDAOptimizer (dense and sparse, against NumPy
transcriptions of TF 1.15's ApplyProximalAdagrad / ApplyAdagradDA kernels), noisy_linear_cosine_decay,
assert_global_step, and event files read back with tf.train.summary_iterator (tf.summary.Event,
SessionLog) as TF1 scripts inspect their logs."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import trainer as tf


def proximal_adagrad_reference(var, accum, grad, lr, l1, l2):
    accum = accum + grad * grad
    rate = lr / np.sqrt(accum)
    prox = var - grad * rate
    if l1 > 0:
        var = np.sign(prox) * np.maximum(np.abs(prox) - rate * l1, 0) / (1 + rate * l2)
    else:
        var = prox / (1 + rate * l2)
    return var, accum


def adagrad_da_reference(var, g_acc, gg_acc, grad, lr, l1, l2, step):
    g_acc = g_acc + grad
    gg_acc = gg_acc + grad * grad
    denom = l2 * step * lr + np.sqrt(gg_acc)
    if l1 > 0:
        var = lr * np.sign(-g_acc) * np.maximum(np.abs(g_acc) - l1 * step, 0) / denom
    else:
        var = -g_acc * lr / denom
    return var, g_acc, gg_acc


W0 = np.array([[0.5, -1.0], [2.0, 0.1], [-0.3, 0.8]])
TARGET = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


@pytest.mark.parametrize("l1, l2", [(0.0, 0.0), (0.05, 0.1), (0.0, 0.3)])
def test_proximal_adagrad_matches_the_kernel_formula(l1, l2):
    w = tf.Variable(W0, name="w")
    loss = tf.reduce_sum(tf.square(w - TARGET)) * 0.5
    opt = tf.train.ProximalAdagradOptimizer(0.2, initial_accumulator_value=0.1, l1_regularization_strength=l1,
                                            l2_regularization_strength=l2)
    train = opt.minimize(loss)
    assert opt.get_slot(w, "accumulator").name == "w/ProximalAdagrad:0"
    var, acc = W0.copy(), np.full_like(W0, 0.1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(4):
            var, acc = proximal_adagrad_reference(var, acc, var - TARGET, 0.2, l1, l2)
            sess.run(train)
        np.testing.assert_allclose(sess.run(w), var, rtol=1e-10)
        np.testing.assert_allclose(sess.run(opt.get_slot(w, "accumulator")), acc, rtol=1e-10)


@pytest.mark.parametrize("l1, l2", [(0.0, 0.0), (0.02, 0.05)])
def test_adagrad_da_matches_the_kernel_formula(l1, l2):
    step = tf.train.get_or_create_global_step()
    w = tf.Variable(W0, name="w")
    loss = tf.reduce_sum(tf.square(w - TARGET)) * 0.5
    opt = tf.train.AdagradDAOptimizer(0.3, step, initial_gradient_squared_accumulator_value=0.1,
                                      l1_regularization_strength=l1, l2_regularization_strength=l2)
    train = opt.minimize(loss, global_step=step)
    assert [v.op.name for v in opt.variables()] == ["w/AdagradDA", "w/AdagradDA_1"]
    var, g_acc, gg_acc = W0.copy(), np.zeros_like(W0), np.full_like(W0, 0.1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for t in range(5):
            var, g_acc, gg_acc = adagrad_da_reference(var, g_acc, gg_acc, var - TARGET, 0.3, l1, l2, t + 1)
            sess.run(train)
        np.testing.assert_allclose(sess.run(w), var, rtol=1e-10)
        np.testing.assert_allclose(sess.run(opt.get_slot(w, "gradient_squared_accumulator")), gg_acc, rtol=1e-10)
        assert sess.run(step) == 5


def test_sparse_updates_touch_only_the_looked_up_rows_with_repeats_summed():
    table = np.arange(12, dtype=np.float64).reshape(4, 3) / 10.0
    ids = np.array([2, 0, 2])
    step = tf.train.get_or_create_global_step()
    emb = tf.Variable(table, name="emb")
    dense = tf.Variable(table, name="dense")
    loss_sparse = tf.reduce_sum(tf.nn.embedding_lookup(emb, ids))
    loss_dense = tf.reduce_sum(tf.matmul(tf.constant(np.eye(4)[ids]), dense))
    for make in (lambda: tf.train.ProximalAdagradOptimizer(0.1, l1_regularization_strength=0.01),
                 lambda: tf.train.AdagradDAOptimizer(0.1, step, l2_regularization_strength=0.01)):
        sparse_opt, dense_opt = make(), make()
        grads = sparse_opt.compute_gradients(loss_sparse, [emb])
        assert isinstance(grads[0][0], tf.IndexedSlices)
        train = tf.group(sparse_opt.apply_gradients(grads), dense_opt.minimize(loss_dense, var_list=[dense]))
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train)
            s, d = sess.run([emb, dense])
        np.testing.assert_array_equal(s[[1, 3]], table[[1, 3]])  # rows not looked up keep their values
        np.testing.assert_allclose(s[[0, 2]], d[[0, 2]], rtol=1e-12)  # rows looked up: as the dense update


def test_optimizer_argument_errors():
    with pytest.raises(ValueError, match="initial_accumulator_value must be positive"):
        tf.train.ProximalAdagradOptimizer(0.1, initial_accumulator_value=0.0)
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.AdagradDAOptimizer(0.1, None)
    with pytest.raises(ValueError, match="initial_gradient_squared_accumulator_value must be positive"):
        tf.train.AdagradDAOptimizer(0.1, tf.train.get_or_create_global_step(),
                                    initial_gradient_squared_accumulator_value=-1.0)


def test_a_tf1_linear_model_trains_with_adagrad_da():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 3)).astype(np.float32)
    ys = (xs @ np.array([[2.0], [-1.0], [0.5]], np.float32)).astype(np.float32)
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None, 1])
    w = tf.get_variable("w", [3, 1], initializer=tf.zeros_initializer())
    loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
    step = tf.train.get_or_create_global_step()
    train = tf.train.AdagradDAOptimizer(1.0, step).minimize(loss, global_step=step)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: xs, y: ys})
        for _ in range(200):
            sess.run(train, {x: xs, y: ys})
        last = sess.run(loss, {x: xs, y: ys})
    assert last < 0.05 * first  # measured 1e-14 of the first loss; a deterministic run


def test_noisy_linear_cosine_decay_follows_tf_formula():
    step = tf.placeholder(tf.int64, [])
    tf.set_random_seed(3)
    lr = tf.train.noisy_linear_cosine_decay(0.5, step, 100, initial_variance=0.0, num_periods=2.0, alpha=0.1,
                                            beta=0.01)
    noisy = tf.train.noisy_linear_cosine_decay(0.5, step, 100)
    with tf.Session() as sess:
        for t in (0, 30, 100, 250):
            c = min(t, 100)
            expected = 0.5 * ((0.1 + (100 - c) / 100) * 0.5 * (1 + np.cos(2 * np.pi * 2.0 * c / 100)) + 0.01)
            np.testing.assert_allclose(sess.run(lr, {step: t}), expected, rtol=1e-5, atol=1e-7)
        draws = np.array([sess.run(noisy, {step: 0}) for _ in range(400)])
    # at t = 0: 0.5 * ((1 + eps) * 1 + 0.001), eps ~ N(0, 1): mean 0.5005, std 0.5
    assert abs(draws.mean() - 0.5005) < 0.15 and 0.35 < draws.std() < 0.65  # measured 0.49 / 0.49 (seeded)
    with pytest.raises(ValueError, match="global_step is required"):
        tf.train.noisy_linear_cosine_decay(0.1, None, 10)


def test_assert_global_step():
    tf.train.assert_global_step(tf.train.get_or_create_global_step())
    tf.train.assert_global_step(tf.constant(3, tf.int32))
    with pytest.raises(TypeError, match="does not have integer type"):
        tf.train.assert_global_step(tf.Variable(1.0))
    with pytest.raises(TypeError, match="is not scalar"):
        tf.train.assert_global_step(tf.constant([1, 2], tf.int64))
    with pytest.raises(TypeError, match="must be a Variable or Tensor"):
        tf.train.assert_global_step(5)


def test_summary_iterator_reads_back_a_file_writer_log(tmp_path):
    pytest.importorskip("tensorboard")
    x = tf.placeholder(tf.float32, [])
    summary = tf.summary.scalar("loss", x)
    logdir = str(tmp_path)
    writer = tf.summary.FileWriter(logdir, tf.get_default_graph())
    writer.add_session_log(tf.summary.SessionLog(status=tf.summary.SessionLog.START), 0)
    with tf.Session() as sess:
        for step in range(3):
            writer.add_summary(sess.run(summary, {x: 1.5 * step}), step)
    event = tf.summary.Event(wall_time=12.5, step=9)
    event.summary.value.add(tag="hand", simple_value=-2.0)
    writer.add_event(event)
    writer.close()
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1
    events = list(tf.train.summary_iterator(files[0]))
    assert events[0].file_version.startswith("brain.Event:")
    assert any(e.HasField("graph_def") for e in events)
    logs = [e.session_log.status for e in events if e.HasField("session_log")]
    assert logs == [tf.summary.SessionLog.START]
    losses = [(e.step, v.simple_value) for e in events for v in e.summary.value if v.tag == "loss"]
    assert losses == [(0, 0.0), (1, 1.5), (2, 3.0)]
    hand = [e for e in events if e.step == 9]
    assert hand[0].wall_time == 12.5 and hand[0].summary.value[0].simple_value == -2.0
    assert tf.summary.TaggedRunMetadata(tag="step1").tag == "step1"
    assert tf.summary.SummaryDescription(type_hint="scalar").type_hint == "scalar"
    with pytest.raises(TypeError, match="expected a tf.summary.Event"):
        writer.add_event(b"bytes")
    with pytest.raises(TypeError, match="expected a tf.summary.SessionLog"):
        writer.add_session_log(event)


def test_summary_iterator_reports_a_corrupt_file(tmp_path):
    pytest.importorskip("tensorboard")
    path = tmp_path / "events.out.tfevents.bad"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00garbage-not-a-crc")
    with pytest.raises(Exception, match=str(path.name)):
        list(tf.train.summary_iterator(str(path)))
