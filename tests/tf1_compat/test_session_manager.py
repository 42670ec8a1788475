"""tf.train.SessionManager / WorkerSessionCreator (locally and on an in-process cluster: a chief
initializes variables on a PS task while a worker waits), tf.report_uninitialized_variables,
LooperThread, basic_train_loop and the Scaffold's ready checks, as TF 1.15 scripts use them."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

import trainer as tf


def _model():
    w = tf.Variable([1.0, 2.0], name="w")
    counter = tf.Variable(0, name="counter", collections=[tf.GraphKeys.LOCAL_VARIABLES], trainable=False)
    return w, counter


def test_report_uninitialized_variables_and_is_variable_initialized():
    w, counter = _model()
    b = tf.Variable(3.0, name="b")
    report = tf.report_uninitialized_variables()
    some = tf.report_uninitialized_variables([b])
    none = tf.report_uninitialized_variables([])
    flag = tf.is_variable_initialized(w)
    assert flag.dtype == np.bool_ and flag.shape == ()
    with tf.Session() as sess:
        names, only_b, empty, ok = sess.run([report, some, none, flag])
        assert [n.decode() for n in names] == ["w", "b", "counter"]
        assert [n.decode() for n in only_b] == ["b"] and empty.size == 0 and not ok
        sess.run(w.initializer)
        assert [n.decode() for n in sess.run(report)] == ["b", "counter"] and sess.run(flag)
    with pytest.raises(TypeError, match="expected a tf.Variable"):
        tf.is_variable_initialized(tf.constant(1.0))


def test_prepare_session_initializes_then_restores(tmp_path):
    w, counter = _model()
    saver = tf.train.Saver([w])
    init = tf.global_variables_initializer()
    sm = tf.train.SessionManager(local_init_op=tf.local_variables_initializer(),
                                 ready_op=tf.report_uninitialized_variables())
    sess = sm.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
    np.testing.assert_allclose(sess.run(w), [1.0, 2.0])
    assert sess.run(counter) == 0
    sess.run(w.assign([5.0, 6.0]))
    saver.save(sess, str(tmp_path / "model"))
    # a new session: the checkpoint wins over init_op, which is not run
    again = sm.prepare_session("", init_op=init, saver=saver, checkpoint_dir=str(tmp_path))
    np.testing.assert_allclose(again.run(w), [5.0, 6.0])
    fn_called = []
    by_fn = sm.prepare_session("", init_fn=lambda s: (fn_called.append(1), s.run(init)))
    assert fn_called == [1] and by_fn.run(counter) == 0
    path = sm.prepare_session("", saver=saver, checkpoint_filename_with_path=str(tmp_path / "model"))
    np.testing.assert_allclose(path.run(w), [5.0, 6.0])


def test_prepare_session_errors():
    w, _ = _model()
    ready = tf.report_uninitialized_variables()
    with pytest.raises(RuntimeError, match="no init_op or init_fn or local_init_op"):
        tf.train.SessionManager(ready_op=ready).prepare_session("")
    with pytest.raises(RuntimeError, match=r"did not make model ready.*Variables not initialized: w, counter"):
        tf.train.SessionManager(ready_op=ready).prepare_session("", init_op=tf.no_op(name="nothing"))
    with pytest.raises(ValueError, match="Can not provide both"):
        tf.train.SessionManager().prepare_session("", init_op=w.initializer, saver=tf.train.Saver([w]),
                                                  checkpoint_dir="a", checkpoint_filename_with_path="b")
    with pytest.raises(ValueError, match="must also pass a local_init_op"):
        tf.train.SessionManager(ready_for_local_init_op=ready)


def test_recover_session(tmp_path):
    w, counter = _model()
    saver = tf.train.Saver([w])
    sm = tf.train.SessionManager(local_init_op=tf.local_variables_initializer(),
                                 ready_op=tf.report_uninitialized_variables(), recovery_wait_secs=0.05)
    sess, recovered = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert not recovered and sess.run(counter) == 0  # the local init runs either way
    started = time.monotonic()
    sess, recovered = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path), wait_for_checkpoint=True,
                                         max_wait_secs=0.2)
    assert not recovered and time.monotonic() - started < 10
    sess.run(tf.global_variables_initializer())
    saver.save(sess, str(tmp_path / "ckpt"))
    restored, recovered = sm.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert recovered
    np.testing.assert_allclose(restored.run(w), [1.0, 2.0])
    # a checkpoint that leaves a variable out does not make the model ready
    tf.Variable(7.0, name="extra")
    partial = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables())
    _, recovered = partial.recover_session("", saver=saver, checkpoint_dir=str(tmp_path))
    assert not recovered


def test_wait_for_session_times_out_naming_what_is_missing():
    _model()
    sm = tf.train.SessionManager(ready_op=tf.report_uninitialized_variables(), recovery_wait_secs=0.05)
    with pytest.raises(tf.errors.DeadlineExceededError, match=r"not ready after waiting 0.2 secs.*w, counter"):
        sm.wait_for_session("", max_wait_secs=0.2)


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@pytest.fixture
def cluster_servers():
    pytest.importorskip("grpc")
    ports = _free_ports(3)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{p}" for p in ports[1:]]}
    servers = [tf.train.Server(cluster, job, index, timeout=10.0, startup_timeout=20.0)
               for job, index in (("ps", 0), ("worker", 0), ("worker", 1))]
    yield servers
    for server in servers:
        server.stop(grace=0.1)


@pytest.mark.slow
def test_a_worker_waits_for_the_chief_on_a_cluster(cluster_servers):
    """The TF1 between-graph pattern: the chief prepares, the other worker waits until ready."""
    ps, chief, worker = cluster_servers
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable([1.0, 2.0], name="w")
            step = tf.train.get_or_create_global_step()
        ready = tf.report_uninitialized_variables()
        init = tf.global_variables_initializer()
        bump = tf.assign_add(step, 1)
    got = {}

    def wait():
        try:
            manager = tf.train.SessionManager(ready_op=ready, graph=graph, recovery_wait_secs=0.1)
            sess = manager.wait_for_session(worker.target, max_wait_secs=30)
            got["w"] = sess.run(w)
        except Exception as e:  # noqa: BLE001 - reported below
            got["error"] = e

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.5)  # the worker is polling a model nobody initialized yet
    assert "w" not in got
    chief_sess = tf.train.SessionManager(ready_op=ready, graph=graph).prepare_session(chief.target, init_op=init)
    chief_sess.run(bump)
    waiter.join(40)
    assert not waiter.is_alive() and "error" not in got, got.get("error")
    np.testing.assert_allclose(got["w"], [1.0, 2.0])
    assert chief_sess.run(step) == 1


@pytest.mark.slow
def test_worker_session_creator_in_a_monitored_session(cluster_servers):
    ps, chief, worker = cluster_servers
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(3.0, name="w")
            step = tf.train.get_or_create_global_step()
        train = tf.train.GradientDescentOptimizer(0.5).minimize(tf.square(w), global_step=step)
    results = {}

    def run_worker():
        try:
            with graph.as_default():
                creator = tf.train.WorkerSessionCreator(master=worker.target, max_wait_secs=30)
                with tf.train.MonitoredSession(session_creator=creator) as sess:
                    results["w"] = sess.run(w)
        except Exception as e:  # noqa: BLE001
            results["error"] = e

    with graph.as_default():
        chief_creator = tf.train.ChiefSessionCreator(master=chief.target)
        with tf.train.MonitoredSession(session_creator=chief_creator) as sess:
            thread = threading.Thread(target=run_worker)
            thread.start()
            thread.join(40)
            sess.run(train)
    assert "error" not in results, results.get("error")
    assert results["w"] == 3.0


def test_chief_session_creator_checks_the_model_is_ready():
    w = tf.Variable(1.0, name="w")
    scaffold = tf.train.Scaffold(init_op=tf.no_op(name="skip_init"))
    with pytest.raises(RuntimeError, match="did not make model ready.*Variables not initialized: w"):
        tf.train.MonitoredSession(tf.train.ChiefSessionCreator(scaffold=scaffold))
    assert w is not None


def test_looper_thread_runs_until_stopped_and_reports_errors():
    coord = tf.train.Coordinator()
    calls = []
    looper = tf.train.LooperThread.loop(coord, 0.01, target=calls.append, args=(1,))
    deadline = time.monotonic() + 10
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    coord.request_stop()
    coord.join([looper], timeout=10)
    assert len(calls) >= 3 and not looper.is_alive()

    class Failing(tf.train.LooperThread):
        def run_loop(self):
            raise ValueError("boom in the loop")

    coord = tf.train.Coordinator()
    Failing(coord, None).start()
    with pytest.raises(ValueError, match="boom in the loop"):
        coord.join(timeout=10)
    with pytest.raises(ValueError, match="must be a Coordinator"):
        tf.train.LooperThread(object(), 1.0)
    with pytest.raises(ValueError, match="require that you also pass 'target'"):
        tf.train.LooperThread(tf.train.Coordinator(), 1.0, args=(1,))


def test_basic_train_loop_with_a_supervisor(tmp_path):
    w = tf.Variable(4.0, name="w")
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.25).minimize(tf.square(w), global_step=step)
    sv = tf.train.Supervisor(logdir=str(tmp_path), save_model_secs=0, save_summaries_secs=0)
    seen = []

    def train_step(sess, scale):
        _, s = sess.run([train, step])
        seen.append(s * scale)
        if s >= 3:
            sv.request_stop()

    tf.train.basic_train_loop(sv, train_step, args=(10,))
    assert seen == [10, 20, 30]
