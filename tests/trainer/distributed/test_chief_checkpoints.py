"""The chief's checkpoints on a cluster never lose work either (issue 23, item 4): a restarted chief
and PS resume from the newest intact checkpoint past a damaged newest one and a lost index, and
the PS then holds exactly that checkpoint's values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import trainer as T
from trainer.checkpoint_format import load_checkpoint
from trainer.checkpoint_index import step_of
from trainer.saver import CheckpointWarning

from .conftest import make_cluster, wait_exit

WIDTH = 10_000


def _build():
    """Variables on the PS; ``progress`` counts the steps trained."""
    g = T.Graph()
    with g.as_default():
        with T.device("/job:ps/task:0"):
            v = T.Variable(np.zeros(WIDTH, np.float32), name="progress")
            step = T.train.get_or_create_global_step()
        with T.control_dependencies([v.assign_add(np.ones(WIDTH, np.float32))]):
            train = step.assign_add(np.int64(1))
    return g, v, train


def _chief_run(processes, folder: str, last_step: int):
    """A fresh PS and chief train to ``last_step``: (restored step, progress then, final step)."""
    cluster = make_cluster(ps=1, workers=1)
    ps = processes.start_ps(cluster)
    server = T.train.Server(cluster, "worker", 0, timeout=10.0, startup_timeout=20.0)
    try:
        g, v, train = _build()
        with T.train.MonitoredTrainingSession(master=server.target, is_chief=True, graph=g, checkpoint_dir=folder,
                                              save_steps=2, save_secs=None, max_steps=last_step,
                                              ready_timeout=20.0) as sess:
            start, restored = sess.step, sess.session.run(v)
            while not sess.should_stop():
                sess.run(train)
            end = sess.step
        code, out = wait_exit(ps, timeout=15)
        assert code == 0, out
    finally:
        server.stop(grace=0.1)
    assert np.all(restored == restored[0])
    return start, float(restored[0]), end


@pytest.mark.slow
def test_a_restarted_chief_skips_a_damaged_newest_checkpoint_and_a_lost_index(processes, tmp_path):
    folder = tmp_path / "run"
    assert _chief_run(processes, str(folder), 10) == (0, 0.0, 10)
    # On a PS the step a run fetches may predate its update, so saves fall where they fall; each
    # checkpoint's name is the step its values hold.
    steps = sorted(step_of(p.name) for p in folder.glob("*.ckpt"))
    assert steps[-1] == 10 and len(steps) >= 3
    for step in steps:
        _, values = load_checkpoint(str(folder / f"model-{step}.ckpt"))
        assert values["global_step"] == step and values["progress"][0] == step
    newest = folder / "model-10.ckpt"
    newest.write_bytes(newest.read_bytes()[:-100])  # truncated
    (folder / "checkpoint").unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start, progress, end = _chief_run(processes, str(folder), 12)
    assert (start, progress, end) == (steps[-2], steps[-2], 12)  # the PS holds exactly that checkpoint's values
    messages = " | ".join(str(w.message) for w in caught)
    assert all(issubclass(w.category, CheckpointWarning) for w in caught), messages
    assert f"rebuilt it from the {len(steps)} " in messages and "'model-10.ckpt'" in messages
    assert _chief_run(processes, str(folder), 12) == (12, 12.0, 12)  # finished: no step taken
