"""The graph-side pieces and the runtime together, across real processes on 127.0.0.1.

replica_device_setter over several PS processes, sharded embeddings read by embedding_lookup and
updated sparsely, SyncReplicasOptimizer with a worker SIGKILLed, checkpoints re-sharded between
clusters, and examples/wide_and_deep.py under ``flowstack cluster launch``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from typing import Callable

import numpy as np
import pytest

import trainer as T
from trainer.devices import DeviceSpec
from trainer.saver import latest_checkpoint, load_checkpoint

from . import sparse_model as S
from .conftest import ROOT, make_cluster, wait_exit
from .test_launcher import launch

SYNC_TASK = os.path.join(os.path.dirname(__file__), "sync_task.py")


def worker_servers(cluster: dict, n: int) -> list:
    return [T.train.Server(cluster, "worker", i, timeout=10.0, startup_timeout=20.0) for i in range(n)]


def setter(cluster: dict, worker: int):
    return T.train.replica_device_setter(cluster=cluster, worker_device=f"/job:worker/task:{worker}")


def stop_all(servers) -> None:
    for s in servers:
        s.stop(grace=0.1)


def ps_of(var) -> tuple:
    spec = DeviceSpec.parse(var.node.device)
    return spec.job, spec.task


@pytest.mark.slow
def test_sharded_embeddings_on_two_ps_train_as_in_one_process(processes):
    cluster = make_cluster(ps=2, workers=1)
    pss = [processes.start_ps(cluster, i) for i in range(2)]
    (server,) = worker_servers(cluster, 1)
    try:
        g, m = S.build(setter(cluster, 0))
        assert {ps_of(v) for v in m["emb_a"]} == {("ps", 0), ("ps", 1)}  # one shard per PS
        sess = T.Session(g, target=server.target)
        sess.run(m["init"])
        losses = [sess.run([m["train"], m["loss"]], S.feed(m, ids))[1] for ids in S.batches(20, seed=0)]
        got = S.values(sess, m)
        assert server.service.state.variables == {}  # every table shard, slot and step lives on a PS

        g1, m1 = S.build(None)
        local = T.Session(g1)
        local.run(m1["init"])
        expected = [local.run([m1["train"], m1["loss"]], S.feed(m1, ids))[1] for ids in S.batches(20, seed=0)]
        np.testing.assert_allclose(losses, expected, rtol=1e-5)
        for name, want in S.values(local, m1).items():
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-6, err_msg=name)
        # rows no batch asked for are exactly their initial values, on both shards
        np.testing.assert_array_equal(got["emb_a"][S.TOUCHED:], S.initial_table(1)[S.TOUCHED:])
        np.testing.assert_array_equal(got["emb_l"][S.TOUCHED:], S.initial_table(2)[S.TOUCHED:])
        assert not np.allclose(got["emb_a"][:S.TOUCHED], S.initial_table(1)[:S.TOUCHED])
        server.done()
        for ps in pss:
            code, out = wait_exit(ps, timeout=15)
            assert code == 0, out
    finally:
        stop_all([server])


@pytest.mark.slow
def test_two_async_workers_converge_on_sharded_embeddings(processes):
    cluster = make_cluster(ps=2, workers=2)
    pss = [processes.start_ps(cluster, i) for i in range(2)]
    servers = worker_servers(cluster, 2)
    losses: dict[int, list[float]] = {}
    errors: list = []
    try:
        models = [S.build(setter(cluster, i)) for i in range(2)]
        sessions = [T.Session(g, target=s.target) for (g, _), s in zip(models, servers)]
        sessions[0].run(models[0][1]["init"])

        def train(i):
            try:
                m = models[i][1]
                losses[i] = [float(sessions[i].run([m["train"], m["loss"]], S.feed(m, ids))[1])
                             for ids in S.batches(40, seed=10 + i)]
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append((i, e))

        threads = [threading.Thread(target=train, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors, errors
        m0 = models[0][1]
        ids = np.arange(S.TOUCHED)
        final = float(sessions[0].run(m0["loss"], S.feed(m0, ids)))
        assert final < 0.2 * losses[0][0], (losses[0][0], final)
        assert int(sessions[0].run(m0["step"])) == 80  # both workers advanced one global step
        got = S.values(sessions[0], m0)
        np.testing.assert_array_equal(got["emb_a"][S.TOUCHED:], S.initial_table(1)[S.TOUCHED:])
        for s in servers:
            s.done()
        for ps in pss:
            code, out = wait_exit(ps, timeout=15)
            assert code == 0, out
    finally:
        stop_all(servers)


def read_until(proc: subprocess.Popen, wanted: Callable[[str], bool], what: str, timeout: float) -> list[str]:
    """Lines of ``proc``'s output up to the first that is ``wanted`` (bounded by ``timeout``)."""
    lines: list[str] = []
    found = threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if wanted(line):
                found.set()
                return

    threading.Thread(target=read, daemon=True).start()
    assert found.wait(timeout), f"no {what} within {timeout} s:\n{''.join(lines)}"
    return lines


def step_at_least(n: int) -> Callable[[str], bool]:
    """Whether a worker's line reports a global step of ``n`` or more: a synchronous worker reports
    the global step its update reached, which skips the steps the others' updates reached."""
    return lambda line: line.startswith("step ") and int(line.split()[1]) >= n


@pytest.mark.slow
def test_sync_replicas_finishes_when_a_worker_is_sigkilled(processes):
    cluster = make_cluster(ps=1, workers=3)
    ps = processes.start_ps(cluster, 0, max_seconds=90)
    timeout = 5.0
    args = [SYNC_TASK, "--aggregate", "2", "--replicas", "3", "--last-step", "40", "--timeout", str(timeout)]
    workers = [processes.start(args, cluster, "worker", i) for i in range(3)]
    read_until(workers[2], step_at_least(3), "step 3 or later", timeout=60)
    workers[2].send_signal(signal.SIGKILL)  # dies holding whatever it held
    outs = {}
    for i in (0, 1):
        code, outs[i] = wait_exit(workers[i], timeout=60)
        assert code == 0, outs[i]
        assert "finished" in outs[i]
    durations = [float(line.split(" took ")[1].split()[0]) for i in (0, 1) for line in outs[i].splitlines()
                 if " took " in line]
    assert durations and max(durations) < timeout + 2.0, max(durations)  # no step waited past its timeout
    last = max(int(line.split()[1]) for line in outs[0].splitlines() if line.startswith("step "))
    assert last >= 40
    code, out = wait_exit(ps, timeout=20)  # the chief is done and the dead worker answers no more
    assert code == 0, out
    assert "job done" in out


def saved(directory: str) -> dict[str, np.ndarray]:
    _, values = load_checkpoint(latest_checkpoint(directory))
    return values


def assert_same_values(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


@pytest.mark.slow
def test_a_two_shard_checkpoint_restores_into_three_shards_and_one_process(processes, tmp_path):
    first, resaved, local_dir = (str(tmp_path / d) for d in ("two", "three", "one"))
    cluster = make_cluster(ps=2, workers=1)
    pss = [processes.start_ps(cluster, i) for i in range(2)]
    (server,) = worker_servers(cluster, 1)
    try:
        g, m = S.build(setter(cluster, 0), shards=2)
        with T.train.MonitoredTrainingSession(master=server.target, is_chief=True, graph=g, checkpoint_dir=first,
                                              save_secs=None) as sess:
            for ids in S.batches(10, seed=3):
                sess.run(m["train"], S.feed(m, ids))
            trained = S.values(sess.session, m)
    finally:
        stop_all([server])
    for ps in pss:
        assert wait_exit(ps, timeout=15)[0] == 0
    want = saved(first)
    assert {"emb_a", "emb_l", "w", "emb_l/Adam", "emb_l/Adam_1", "global_step"} <= set(want), sorted(want)
    assert any(name.startswith("emb_a/Adagrad") for name in want) and not any("part_" in n for n in want)
    np.testing.assert_array_equal(want["emb_a"], trained["emb_a"])

    cluster3 = make_cluster(ps=3, workers=1)
    pss = [processes.start_ps(cluster3, i) for i in range(3)]
    (server,) = worker_servers(cluster3, 1)
    try:
        g, m = S.build(setter(cluster3, 0), shards=3)
        assert {ps_of(v) for v in m["emb_a"]} == {("ps", 0), ("ps", 1), ("ps", 2)}
        with T.train.MonitoredTrainingSession(master=server.target, is_chief=True, graph=g, checkpoint_dir=first,
                                              save_secs=None) as sess:
            assert sess.restored_from is not None and sess.step == 10
            assert_same_values(S.values(sess.session, m), trained)
            sess.saver.save(sess.session, os.path.join(resaved, "model"), global_step=sess.step)
    finally:
        stop_all([server])
    assert_same_values(saved(resaved), want)  # every value and slot came back through three shards

    g, m = S.build(None, shards=1)
    with g.as_default():
        saver = T.Saver()
    local = T.Session(g)
    saver.restore(local, latest_checkpoint(first))
    assert_same_values(S.values(local, m), trained)
    saver.save(local, os.path.join(local_dir, "model"), global_step=10)
    assert_same_values(saved(local_dir), want)


@pytest.mark.slow
def test_wide_and_deep_runs_under_the_launcher_on_two_ps_and_two_workers(tmp_path):
    script = str(ROOT / "examples" / "wide_and_deep.py")
    code, out, _ = launch("--ps", "2", "--workers", "2", "--timeout", "150", "--", sys.executable, script,
                          "--steps", "60", "--logdir", str(tmp_path), timeout=180)
    assert code == 0, out
    assert "[worker:0] held-out accuracy" in out and "[worker:1] held-out accuracy" in out, out
    assert "[launcher] job finished" in out
    values = saved(str(tmp_path))  # the chief saved the tables by logical name, whole
    assert values["deep/user_embedding"].shape == (2000, 8) and int(values["global_step"]) >= 60
