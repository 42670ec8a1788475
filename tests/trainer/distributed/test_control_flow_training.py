"""An RNN trained by two workers on a PS's variables, every task a process on 127.0.0.1.

The most common TF 1.x distributed pattern with control flow: ``replica_device_setter`` puts the
variables on the PS and the RNN's loop (a ``while_loop`` with a ``tf.cond`` in its body, or
``dynamic_rnn``) on each worker, whose body and gradient loop read the PS's variables. It used
to fail with a PlacementError for any loop left with control flow after loop fusion. One case
applies the gradients in a ``tf.cond`` (only when finite): the PS's updates then sit in a cond
branch, and values of the branch cross tasks (dead ones when it is not taken).
"""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import trainer as T

from .conftest import make_cluster, wait_exit
from .test_partitions_control_flow import XS, _conditional_updates

RNN_TASK = os.path.join(os.path.dirname(__file__), "rnn_task.py")


def _test_metrics(out: str, when: str) -> tuple[float, float]:
    found = re.search(rf"{when}: test loss ([\d.]+) accuracy ([\d.]+)", out)
    assert found, out
    return float(found.group(1)), float(found.group(2))


@pytest.mark.slow
@pytest.mark.parametrize("model,mode", [("cond", "async"), ("cond", "sync"), ("dynamic_rnn", "skip-nonfinite")],
                         ids=["cond-async", "cond-sync", "dynamic_rnn-async-skip-nonfinite"])
def test_an_rnn_reading_ps_variables_in_its_loop_trains_on_two_workers(processes, model, mode):
    cluster = make_cluster(ps=1, workers=2)
    ps = processes.start_ps(cluster, 0, max_seconds=150)
    args = [RNN_TASK, "--model", model, "--last-step", "150"] + {"async": [], "sync": ["--sync"],
                                                                 "skip-nonfinite": ["--skip-nonfinite"]}[mode]
    workers = [processes.start(args, cluster, "worker", i) for i in range(2)]
    outs = []
    for w in workers:
        code, out = wait_exit(w, timeout=150)
        assert code == 0, out
        outs.append(out)
    before_loss, before_acc = _test_metrics(outs[0], "before")
    after_loss, after_acc = _test_metrics(outs[0], "after")
    # (one process: 2.33 -> 0.23, 92% after 150 steps; here 0.13-0.39, 86-95%)
    assert after_loss < 0.3 * before_loss and after_acc > 0.8, (before_loss, before_acc, after_loss, after_acc)
    ran = [int(re.search(r"ran (\d+) steps", out).group(1)) for out in outs]
    assert all(n > 0 for n in ran), ran  # both workers trained
    code, out = wait_exit(ps, timeout=20)
    assert code == 0, out


@pytest.mark.slow
def test_values_of_an_untaken_branch_cross_grpc_as_dead(processes):
    cluster = make_cluster(ps=1, workers=1)
    ps = processes.start_ps(cluster, 0)
    server = T.train.Server(cluster, "worker", 0, timeout=10.0, startup_timeout=20.0)
    try:
        g, x, fetches, init = _conditional_updates()
        sess = T.Session(g, target=server.target)
        sess.run(init)
        got = [[float(v) for v in sess.run(fetches, {x: np.asarray(xv, np.float32)})] for xv in XS]
        assert server.service.state.variables == {}  # the updates ran on the PS

        g1, x1, fetches1, init1 = _conditional_updates()
        local = T.Session(g1, config=T.ConfigProto(allow_soft_placement=True))
        local.run(init1)
        want = [[float(v) for v in local.run(fetches1, {x1: np.asarray(xv, np.float32)})] for xv in XS]
        np.testing.assert_array_equal(got, want)  # the NaN step applied nothing; x < 0 added nothing
        server.done()
        code, out = wait_exit(ps, timeout=15)
        assert code == 0, out
    finally:
        server.stop(grace=0.1)
