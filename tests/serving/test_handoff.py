"""The event loop's side of the batcher: results relayed back, cancellation, one wake per burst."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from serving import handoff
from serving.batcher import DynamicBatcher


class Doubler:
    """A backend that doubles ``x``, records batch sizes, and fails on negative input."""

    def __init__(self):
        self.batches: list[int] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, requests):
        self.gate.wait(10)
        if any(np.any(r["x"] < 0) for r in requests):
            raise ValueError("negative input")
        self.batches.append(len(requests))
        return [{"y": r["x"] * 2} for r in requests]


def test_results_and_errors_reach_the_loop():
    backend = Doubler()
    batcher = DynamicBatcher(backend, max_batch_size=8)

    async def main():
        good = [handoff.submit(batcher, {"x": np.full(1, i, np.float32)}, 1) for i in range(5)]
        bad = handoff.submit(batcher, {"x": -np.ones(1)}, 1)
        values = [float((await w)["y"][0]) for w in good]
        with pytest.raises(ValueError, match="negative"):
            await bad
        return values

    assert asyncio.run(main()) == [0.0, 2.0, 4.0, 6.0, 8.0]
    batcher.close()


def test_a_burst_submitted_in_one_loop_step_wakes_the_worker_once_for_all_of_it():
    backend = Doubler()
    batcher = DynamicBatcher(backend, max_batch_size=16)

    async def main():
        # No await between the submits: the worker is woken after them, in the next loop step.
        waiters = [handoff.submit(batcher, {"x": np.ones(1)}, 1) for _ in range(10)]
        return await asyncio.gather(*waiters)

    assert len(asyncio.run(main())) == 10
    batcher.close()
    assert backend.batches == [10]


def test_a_cancelled_request_is_not_run():
    backend = Doubler()
    backend.gate.clear()
    batcher = DynamicBatcher(backend, max_batch_size=1)

    async def main():
        first = handoff.submit(batcher, {"x": np.ones(1)}, 1)
        await asyncio.sleep(0)  # let the wake-up run: the worker takes `first` and blocks in the backend
        second = handoff.submit(batcher, {"x": np.full(1, 5.0)}, 1)
        second.cancel()
        backend.gate.set()
        return await first

    assert float(asyncio.run(main())["y"][0]) == 2.0
    batcher.close()
    assert backend.batches == [1]


def test_submit_without_wake_waits_for_wake():
    backend = Doubler()
    batcher = DynamicBatcher(backend, max_batch_size=4)
    futures = [batcher.submit({"x": np.ones(1)}, rows=1, wake=False) for _ in range(3)]
    batcher.wake()
    assert [f.result(5)["y"][0] for f in futures] == [2, 2, 2]
    batcher.close()
