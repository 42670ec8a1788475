"""MonitoredTrainingSession runs TF 1.x session hooks: extra fetches ride in the step's own run."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T
from tests.trainer.plan_compiles import count_compiles


class RecordingHook(T.train.SessionRunHook):
    def __init__(self, tensor):
        self.tensor, self.seen, self.calls = tensor, [], []

    def begin(self):
        self.calls.append("begin")

    def after_create_session(self, session, coord):
        self.calls.append("after_create_session")

    def before_run(self, run_context):
        return T.train.SessionRunArgs({"w": self.tensor})

    def after_run(self, run_context, run_values):
        self.seen.append(float(run_values.results["w"]))

    def end(self, session):
        self.calls.append("end")


def test_hooks_see_each_step_and_stop_it(monkeypatch):
    compiles = count_compiles(monkeypatch)
    g = T.Graph()
    with g.as_default():
        w = T.Variable(np.float32(0.0), name="w")
        step = T.train.get_or_create_global_step()
        with g.control_dependencies([w.assign_add(np.float32(1.0))]):
            train = step.assign_add(np.int64(1))
    recorder = RecordingHook(w)
    hooks = [recorder, T.train.StopAtStepHook(num_steps=3)]
    with T.train.MonitoredTrainingSession(graph=g, hooks=hooks) as sess:
        results = []
        while not sess.should_stop():
            results.append(sess.run([train, w]))
    assert recorder.seen == [1.0, 2.0, 3.0]  # fetched in the step's run, after its update
    assert [int(r[0]) for r in results] == [1, 2, 3]
    assert recorder.calls == ["begin", "after_create_session", "end"]
    assert sess.step == 3
    # one plan per distinct fetch list (init, local init, global step, the step), not one per step
    assert len(compiles) <= 4


def test_one_hook_protocol_serves_every_loop():
    from trainer.estimator import hooks as estimator_hooks
    from trainer.sync_replicas import SyncReplicasHook

    for name in ("SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues", "StopAtStepHook",
                 "NanTensorHook", "LoggingTensorHook", "FinalOpsHook", "StepCounterHook"):
        assert getattr(T.estimator, name) is getattr(T.train, name) is getattr(estimator_hooks, name), name
    assert issubclass(SyncReplicasHook, T.train.SessionRunHook)


def test_the_standard_hooks_run_under_a_monitored_session():
    g = T.Graph()
    with g.as_default():
        step = T.train.get_or_create_global_step()
        loss = T.placeholder(np.float32, (), name="loss")
        train = step.assign_add(np.int64(1))
        final = T.train.FinalOpsHook(step * 10)
        counter = T.train.StepCounterHook(every_n_steps=1)
        hooks = [T.train.NanTensorHook(loss), counter, final]
    losses = [1.0, 0.5, float("nan"), 0.1]
    with pytest.raises(T.train.NanLossDuringTrainingError, match="nan"):
        with T.train.MonitoredTrainingSession(graph=g, hooks=hooks) as sess:
            for value in losses:
                sess.run(train, {loss: np.float32(value)})
    assert counter.steps_per_sec is not None and int(final.final_ops_values) == 30
