"""The runtime across real processes on 127.0.0.1: a worker session runs nodes placed on a PS task."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import trainer as T
from trainer.distributed.errors import StaleIncarnationError, UnavailableError, UnknownTaskError
from trainer.distributed.peers import PeerClient
from trainer.distributed.master import TaskPlacementError

from .conftest import make_cluster, wait_exit, wait_listening


def build_regression(ps_device: str | None):
    """A linear model trained by SGD; with ps_device its variables live on that task."""
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 4), name="x")
        y = T.placeholder(np.float32, (None, 1), name="y")
        with T.device(ps_device):
            w = T.Variable(np.linspace(-1, 1, 4, dtype=np.float32).reshape(4, 1), name="w")
            b = T.Variable(np.zeros((1,), np.float32), name="b")
            step = T.train.get_or_create_global_step()
        loss = T.reduce_mean(T.square(T.matmul(x, w) + b - y))
        train = T.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
        init = T.global_variables_initializer()
    return g, dict(x=x, y=y, w=w, b=b, loss=loss, train=train, init=init, step=step)


def data(n=32):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(n, 4)).astype(np.float32)
    ys = (xs @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.25).astype(np.float32)
    return xs, ys


@pytest.fixture
def worker_server():
    servers = []

    def start(cluster, **kw):
        kw.setdefault("timeout", 10.0)
        kw.setdefault("startup_timeout", 20.0)
        s = T.train.Server(cluster, "worker", 0, **kw)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop(grace=0.1)


@pytest.mark.slow
def test_variables_on_a_ps_process_train_as_in_one_process(processes, worker_server):
    cluster = make_cluster()
    ps = processes.start_ps(cluster)
    server = worker_server(cluster)
    xs, ys = data()

    g, m = build_regression("/job:ps/task:0")
    sess = T.Session(g, target=server.target)
    sess.run(m["init"])
    losses = [sess.run([m["train"], m["loss"]], {m["x"]: xs, m["y"]: ys})[1] for _ in range(15)]
    final = sess.run([m["w"], m["b"], m["step"]])
    assert server.service.state.variables == {}  # nothing lives on the worker

    g1, m1 = build_regression(None)
    local = T.Session(g1)
    local.run(m1["init"])
    expected = [local.run([m1["train"], m1["loss"]], {m1["x"]: xs, m1["y"]: ys})[1] for _ in range(15)]
    np.testing.assert_allclose(losses, expected, rtol=1e-6)
    for got, want in zip(final, local.run([m1["w"], m1["b"], m1["step"]])):
        np.testing.assert_allclose(got, want, rtol=1e-6)

    server.done()  # the only worker is done: the PS's join() returns and it exits 0 by itself
    code, out = wait_exit(ps, timeout=15)
    assert code == 0, out
    assert "job done" in out


@pytest.mark.slow
def test_monitored_sessions_of_a_chief_and_a_worker_share_the_ps(processes, tmp_path):
    cluster = make_cluster(ps=1, workers=2)
    ps = processes.start_ps(cluster)
    servers = [T.train.Server(cluster, "worker", i, timeout=10.0, startup_timeout=20.0) for i in range(2)]
    xs, ys = data()
    try:
        g, m = build_regression("/job:ps/task:0")
        results, errors = {}, []

        def work(i):
            try:
                train_on(i)
            except Exception as e:  # noqa: BLE001 - reported by the assertion below
                errors.append((i, e))

        def train_on(i):
            hooks = [T.train.StopAtStepHook(last_step=40)]
            with T.train.MonitoredTrainingSession(master=servers[i].target, is_chief=(i == 0), graph=g,
                                                  checkpoint_dir=str(tmp_path) if i == 0 else None,
                                                  hooks=hooks, ready_timeout=20.0) as sess:
                n = 0
                while not sess.should_stop():
                    sess.run(m["train"], {m["x"]: xs, m["y"]: ys})
                    n += 1
                results[i] = (n, sess.step)

        threads = [threading.Thread(target=work, args=(i,)) for i in (1, 0)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors
        assert set(results) == {0, 1}, results
        assert all(step >= 40 for _, step in results.values())
        assert results[0][0] + results[1][0] >= 40  # both advanced one shared global step
        assert T.latest_checkpoint(str(tmp_path)) is not None
        code, out = wait_exit(ps, timeout=15)
        assert code == 0, out
    finally:
        for s in servers:
            s.stop(grace=0.1)


def test_an_unreachable_peer_fails_clearly_and_in_bounded_time(worker_server):
    cluster = make_cluster()  # nothing listens on the PS port
    server = worker_server(cluster, startup_timeout=1.0)
    g, m = build_regression("/job:ps/task:0")
    t0 = time.monotonic()
    with pytest.raises(UnavailableError, match=r"/job:ps/task:0 at 127\.0\.0\.1:\d+ did not answer within 1 s"):
        T.Session(g, target=server.target).run(m["init"])
    assert time.monotonic() - t0 < 5


def test_a_restarted_task_refuses_requests_meant_for_its_old_incarnation(worker_server):
    cluster = make_cluster()
    ps = T.train.Server(cluster, "ps", 0, timeout=5.0)
    server = worker_server(cluster)
    g, m = build_regression("/job:ps/task:0")
    sess = T.Session(g, target=server.target)
    sess.run(m["init"])
    ps.stop(grace=0.1)
    restarted = T.train.Server(cluster, "ps", 0, timeout=5.0)
    try:
        assert restarted.service.incarnation != ps.service.incarnation
        with pytest.raises(StaleIncarnationError, match="/job:ps/task:0 refused a request from /job:worker/task:0 "
                                                        "meant for its incarnation .*the task restarted"):
            sess.run(m["w"])
    finally:
        restarted.stop(grace=0.1)


def test_requests_from_outside_the_cluster_are_refused():
    cluster = make_cluster()
    ps = T.train.Server(cluster, "ps", 0, timeout=5.0)
    try:
        intruder = PeerClient("/job:evil/task:0", "/job:ps/task:0", cluster["ps"][0], timeout=5.0)
        with pytest.raises(UnknownTaskError, match=r"refused a request from '/job:evil/task:0', which is not a task"):
            intruder.health()
        intruder.close()
    finally:
        ps.stop(grace=0.1)


def test_a_failing_partition_aborts_the_step_everywhere_at_once(worker_server):
    cluster = make_cluster()
    ps = T.train.Server(cluster, "ps", 0, timeout=30.0)
    server = worker_server(cluster, timeout=30.0)
    try:
        g, m = build_regression("/job:ps/task:0")
        sess = T.Session(g, target=server.target)
        xs, ys = data()
        t0 = time.monotonic()
        # Nothing initialized: the PS partition fails reading w while the worker waits for it.
        with pytest.raises(T.FailedPreconditionError, match="/job:ps/task:0: .*variable 'w' is uninitialized"):
            sess.run(m["loss"], {m["x"]: xs, m["y"]: ys})
        assert time.monotonic() - t0 < 5  # not the 30 s Recv timeout
        assert ps.service.table.pending() == 0 and server.service.table.pending() == 0
    finally:
        ps.stop(grace=0.1)


def test_concurrent_steps_keep_their_values_apart(worker_server):
    cluster = make_cluster()
    ps = T.train.Server(cluster, "ps", 0, timeout=10.0)
    server = worker_server(cluster)
    try:
        g = T.Graph()
        with g.as_default():
            x = T.placeholder(np.float32, (3,))
            with T.device("/job:ps/task:0"):
                w = T.Variable(np.arange(3, dtype=np.float32), name="w")
                y = w * x  # computed on the PS from the worker's x
            init = T.global_variables_initializer()
        sess = T.Session(g, target=server.target)
        sess.run(init)
        errors = []

        def steps(k):
            for _ in range(30):
                got = sess.run(y, {x: np.full(3, k, np.float32)})
                if not np.array_equal(got, np.arange(3) * k):
                    errors.append((k, got))

        threads = [threading.Thread(target=steps, args=(k,)) for k in range(1, 5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert not errors
        assert ps.service.partition_count() == 2  # the initializer's plan and the step's, each registered once
        sess.close()
        assert ps.service.partition_count() == 0  # a closed session's partitions are dropped
    finally:
        ps.stop(grace=0.1)


def test_a_node_on_a_task_outside_the_cluster_is_named(worker_server):
    server = worker_server(make_cluster())
    g = T.Graph()
    with g.as_default(), T.device("/job:ps/task:3"):
        v = T.Variable(np.zeros(2, np.float32), name="v")
    with pytest.raises(TaskPlacementError, match=r"node 'v/initial_value' \(Constant\) is placed on /job:ps/task:3, which is not in the cluster"):
        T.Session(g, target=server.target).run(v.initializer)


@pytest.mark.slow
def test_a_256_mb_variable_crosses_tasks(worker_server):
    cluster = make_cluster()
    ps = T.train.Server(cluster, "ps", 0, timeout=60.0)
    server = worker_server(cluster, timeout=60.0)
    try:
        n = 64 << 20  # float32: 256 MB
        g = T.Graph()
        with g.as_default():
            with T.device("/job:ps/task:0"):
                big = T.Variable(np.zeros(n, np.float32), name="big")
            update = T.placeholder(np.float32, (n,))
            assign = big.assign(update)  # worker -> PS
            total = T.reduce_sum(big)    # PS -> worker: the sum runs on the worker
        sess = T.Session(g, target=server.target)
        values = np.ones(n, np.float32)
        values[::7] = 2.0
        sess.run(assign.node, {update: values})
        np.testing.assert_array_equal(ps.service.state.variables["big"], values)
        assert float(sess.run(total)) == pytest.approx(float(values.sum(dtype=np.float64)))
        assert sess.run(big)[7] == 2.0
    finally:
        ps.stop(grace=0.1)


@pytest.mark.slow
def test_a_ps_that_dies_mid_run_fails_the_next_step_quickly(processes, worker_server):
    cluster = make_cluster()
    ps = processes.start_ps(cluster)
    server = worker_server(cluster, timeout=30.0)
    g, m = build_regression("/job:ps/task:0")
    sess = T.Session(g, target=server.target)
    sess.run(m["init"])
    xs, ys = data()
    sess.run(m["train"], {m["x"]: xs, m["y"]: ys})
    ps.kill()
    ps.wait(10)
    t0 = time.monotonic()
    with pytest.raises(UnavailableError, match=r"/job:ps/task:0 at 127\.0\.0\.1:\d+ is unreachable"):
        sess.run(m["train"], {m["x"]: xs, m["y"]: ys})
    assert time.monotonic() - t0 < 10  # well within the 30 s RPC timeout


def test_a_device_function_spreads_variables_over_two_ps_tasks(worker_server):
    cluster = make_cluster(ps=2)
    ps = [T.train.Server(cluster, "ps", i, timeout=10.0) for i in range(2)]
    server = worker_server(cluster)
    try:
        counter = iter(range(100))

        def variables_round_robin(op):
            return f"/job:ps/task:{next(counter) % 2}" if op.op_type == "Variable" else ""

        xs, ys = data()
        g, m = build_regression(variables_round_robin)
        sess = T.Session(g, target=server.target)
        sess.run(m["init"])
        losses = [sess.run([m["train"], m["loss"]], {m["x"]: xs, m["y"]: ys})[1] for _ in range(5)]
        assert sorted(len(p.service.state.variables) for p in ps) == [1, 2]  # w, b and global_step, spread

        g1, m1 = build_regression(None)
        local = T.Session(g1)
        local.run(m1["init"])
        expected = [local.run([m1["train"], m1["loss"]], {m1["x"]: xs, m1["y"]: ys})[1] for _ in range(5)]
        np.testing.assert_allclose(losses, expected, rtol=1e-6)
    finally:
        for p in ps:
            p.stop(grace=0.1)


def test_a_while_loop_and_its_gradient_read_a_ps_variable(worker_server):
    cluster = make_cluster()
    ps = T.train.Server(cluster, "ps", 0, timeout=10.0)
    server = worker_server(cluster)
    try:
        g = T.Graph()
        with g.as_default():
            with T.device("/job:ps/task:0"):
                w = T.Variable(np.float32(2.0), name="w")
            x = T.placeholder(np.float32, ())
            three = T.constant(np.int64(3))
            _, power = T.while_loop(lambda i, v: T.less(i, three), lambda i, v: (i + T.constant(np.int64(1)), v * w),
                                    [T.constant(np.int64(0)), x])
            grad = T.gradients(power, [w])[0]
        sess = T.Session(g, target=server.target)
        sess.run(w.initializer)
        value, dw = sess.run([power, grad], {x: np.float32(1.5)})
        assert float(value) == 1.5 * 8 and float(dw) == 1.5 * 3 * 4  # x w^3 and 3 x w^2
    finally:
        ps.stop(grace=0.1)
