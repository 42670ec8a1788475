"""DynamicBatcher alone: grouping, limits, overload, timeouts, failure isolation, draining."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from serving.batcher import DynamicBatcher
from serving.errors import Overloaded, RequestTimeout, VersionRetired


class Recorder:
    """A backend that doubles its input, records batch sizes, and can be held or made to fail."""

    def __init__(self, delay_s: float = 0.0):
        self.batches: list[int] = []
        self.delay_s = delay_s
        self.gate = threading.Event()
        self.gate.set()
        self.lock = threading.Lock()
        self.active = 0
        self.max_active = 0

    def __call__(self, requests):
        with self.lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            self.gate.wait(10)
            time.sleep(self.delay_s)
            if any(np.any(r["x"] < 0) for r in requests):
                raise ValueError("negative input")
            self.batches.append(sum(len(r["x"]) for r in requests))
            return [{"y": r["x"] * 2} for r in requests]
        finally:
            with self.lock:
                self.active -= 1


def test_concurrent_requests_are_grouped_and_split_back():
    backend = Recorder()
    backend.gate.clear()
    batcher = DynamicBatcher(backend, max_batch_size=8, max_queue_delay_us=100_000)
    futures = [batcher.submit({"x": np.full(1, i, np.float32)}, rows=1) for i in range(12)]
    backend.gate.set()
    results = [f.result(5)["y"][0] for f in futures]
    batcher.close()
    assert results == [2.0 * i for i in range(12)]
    assert max(backend.batches) <= 8 and sum(backend.batches) == 12
    assert len(backend.batches) < 12


def test_mixed_batch_sizes_never_exceed_the_limit():
    backend = Recorder()
    backend.gate.clear()
    batcher = DynamicBatcher(backend, max_batch_size=5, max_queue_delay_us=50_000)
    futures = [batcher.submit({"x": np.ones(rows)}, rows=rows) for rows in (3, 2, 4, 1, 5, 2)]
    backend.gate.set()
    assert [len(f.result(5)["y"]) for f in futures] == [3, 2, 4, 1, 5, 2]
    batcher.close()
    assert all(b <= 5 for b in backend.batches)


def test_batching_off_runs_each_request_alone():
    backend = Recorder()
    batcher = DynamicBatcher(backend, max_batch_size=0)
    futures = [batcher.submit({"x": np.ones(2)}, rows=2) for _ in range(5)]
    [f.result(5) for f in futures]
    batcher.close()
    assert backend.batches == [2] * 5


def test_full_queue_refuses_immediately():
    backend = Recorder()
    backend.gate.clear()
    batcher = DynamicBatcher(backend, max_batch_size=1, max_queue_size=3)
    accepted = [batcher.submit({"x": np.ones(1)}, rows=1)]
    time.sleep(0.05)  # the worker takes the first one and blocks in the backend
    accepted += [batcher.submit({"x": np.ones(1)}, rows=1) for _ in range(3)]
    with pytest.raises(Overloaded, match="queue full"):
        batcher.submit({"x": np.ones(1)}, rows=1)
    backend.gate.set()
    assert all(f.result(5)["y"][0] == 2 for f in accepted)
    batcher.close()


def test_request_timeout_rejects_requests_that_waited_too_long():
    backend = Recorder()
    backend.gate.clear()
    batcher = DynamicBatcher(backend, max_batch_size=1)
    first = batcher.submit({"x": np.ones(1)}, rows=1)
    time.sleep(0.02)
    late = batcher.submit({"x": np.ones(1)}, rows=1, timeout_s=0.01)
    time.sleep(0.05)
    backend.gate.set()
    assert first.result(5)["y"][0] == 2
    with pytest.raises(RequestTimeout, match="timed out"):
        late.result(5)
    batcher.close()


def test_one_failing_request_does_not_fail_its_batch():
    backend = Recorder()
    backend.gate.clear()
    batcher = DynamicBatcher(backend, max_batch_size=8, max_queue_delay_us=50_000)
    good = [batcher.submit({"x": np.ones(1)}, rows=1) for _ in range(3)]
    bad = batcher.submit({"x": -np.ones(1)}, rows=1)
    backend.gate.set()
    assert [f.result(5)["y"][0] for f in good] == [2, 2, 2]
    with pytest.raises(ValueError, match="negative"):
        bad.result(5)
    batcher.close()


def test_instances_run_in_parallel():
    backend = Recorder(delay_s=0.05)
    batcher = DynamicBatcher(backend, max_batch_size=1, instances=3)
    futures = [batcher.submit({"x": np.ones(1)}, rows=1) for _ in range(6)]
    [f.result(5) for f in futures]
    batcher.close()
    assert backend.max_active >= 2


def test_close_drains_queued_requests_then_refuses():
    backend = Recorder(delay_s=0.01)
    batcher = DynamicBatcher(backend, max_batch_size=2)
    futures = [batcher.submit({"x": np.ones(1)}, rows=1) for _ in range(10)]
    batcher.close()
    assert all(f.done() and f.result()["y"][0] == 2 for f in futures)
    with pytest.raises(VersionRetired):
        batcher.submit({"x": np.ones(1)}, rows=1)


def test_preferred_batch_size_dispatches_without_waiting():
    backend = Recorder()
    backend.gate.clear()
    batcher = DynamicBatcher(backend, max_batch_size=16, max_queue_delay_us=2_000_000, preferred_batch_sizes=(4,))
    start = time.perf_counter()
    futures = [batcher.submit({"x": np.ones(1)}, rows=1) for _ in range(4)]
    backend.gate.set()
    [f.result(5) for f in futures]
    batcher.close()
    assert time.perf_counter() - start < 1.0


def test_run_now_runs_only_an_idle_quick_batcher_and_reports_the_call(monkeypatch):
    from serving import batcher as batcher_module

    monkeypatch.setattr(batcher_module, "RUN_ALONE_MAX_COMPUTE_S", 1.0)  # however slow the loaded host
    backend = Recorder()
    calls = []
    batcher = DynamicBatcher(backend, max_batch_size=8, on_batch=lambda rows, waits, s: calls.append((rows, waits)))
    assert batcher.run_now({"x": np.ones(2)}, rows=2) is None  # the model not timed yet: to the worker
    batcher.submit({"x": np.ones(1)}, rows=1).result(5)
    while batcher.in_flight:
        time.sleep(0.001)
    outputs, error = batcher.run_now({"x": np.full(2, 3.0)}, rows=2)
    assert error is None and outputs["y"].tolist() == [6.0, 6.0] and calls[-1] == (2, [0.0])
    outputs, error = batcher.run_now({"x": -np.ones(1)}, rows=1)
    assert outputs is None and isinstance(error, ValueError)
    backend.gate.clear()
    held = batcher.submit({"x": np.ones(1)}, rows=1)  # the worker holds it
    assert batcher.run_now({"x": np.ones(1)}, rows=1) is None
    backend.gate.set()
    held.result(5)
    batcher.close()
    assert batcher.run_now({"x": np.ones(1)}, rows=1) is None  # closed: submit says why
