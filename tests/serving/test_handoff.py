"""The event loop's side of the batcher: results relayed back, cancellation, one wake per burst."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from serving import batcher as batcher_module
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


class ThreadRecorder:
    """A backend that doubles ``x`` after ``delay_s`` and records the thread each call ran in."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s
        self.threads: list[int] = []

    def __call__(self, requests):
        if self.delay_s:
            threading.Event().wait(self.delay_s)
        self.threads.append(threading.get_ident())
        return [{"y": r["x"] * 2} for r in requests]


def test_a_lone_request_runs_in_the_loop_and_company_goes_to_the_worker(monkeypatch):
    # A call of the backend preempted on a loaded machine must not count as a slow model here.
    monkeypatch.setattr(batcher_module, "RUN_ALONE_MAX_COMPUTE_S", 1.0)
    backend = ThreadRecorder()
    batcher = DynamicBatcher(backend, max_batch_size=8)

    async def main():
        for _ in range(3):  # the first goes to the worker, which times the model
            while batcher.in_flight:  # the worker counts its last request done just after answering it
                await asyncio.sleep(0.001)
            assert float((await handoff.submit(batcher, {"x": np.ones(1)}, 1))["y"][0]) == 2.0
        alone = list(backend.threads)
        backend.threads.clear()
        results = await asyncio.gather(*[handoff.submit(batcher, {"x": np.full(1, i)}, 1) for i in range(4)])
        assert [float(r["y"][0]) for r in results] == [0.0, 2.0, 4.0, 6.0]
        return threading.get_ident(), alone

    loop_thread, alone = asyncio.run(main())
    batcher.close()
    assert alone[0] != loop_thread and alone[1:] == [loop_thread, loop_thread]
    assert backend.threads and loop_thread not in backend.threads  # four at once: batched by the worker


def test_a_request_alone_runs_at_once_unless_the_loop_awaits_another(monkeypatch):
    monkeypatch.setattr(batcher_module, "RUN_ALONE_MAX_COMPUTE_S", 1.0)  # however slow the loaded host
    backend = Doubler()
    batcher = DynamicBatcher(backend, max_batch_size=8)

    async def main():
        await handoff.submit(batcher, {"x": np.ones(1)}, 1, alone=True)  # to the worker, which times the model
        while batcher.in_flight:
            await asyncio.sleep(0.001)
        now = handoff.submit(batcher, {"x": np.full(1, 3.0)}, 1, alone=True)
        assert now.done() and float(now.result()["y"][0]) == 6.0  # run in submit: no loop iteration waited
        failed = handoff.submit(batcher, {"x": -np.ones(1)}, 1, alone=True)
        assert failed.done()
        with pytest.raises(ValueError, match="negative"):
            await failed
        backend.batches.clear()
        # Another awaited (submitted without ``alone``): both wait for the wake-up, and batch.
        first = handoff.submit(batcher, {"x": np.ones(1)}, 1)
        second = handoff.submit(batcher, {"x": np.full(1, 2.0)}, 1, alone=True)
        assert not second.done()
        return [float(r["y"][0]) for r in await asyncio.gather(first, second)]

    assert asyncio.run(main()) == [2.0, 4.0]
    batcher.close()
    assert backend.batches == [2]


@pytest.mark.parametrize("delay_s, max_queue_delay_us", [(0.005, 0), (0.0, 1000)])
def test_a_slow_model_or_a_batching_window_never_runs_in_the_loop(delay_s, max_queue_delay_us):
    backend = ThreadRecorder(delay_s=delay_s)
    batcher = DynamicBatcher(backend, max_batch_size=8, max_queue_delay_us=max_queue_delay_us)

    async def main():
        for _ in range(3):
            await handoff.submit(batcher, {"x": np.ones(1)}, 1)
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    batcher.close()
    assert len(backend.threads) == 3 and loop_thread not in backend.threads


def test_lone_http_requests_run_in_the_loop_and_grpc_ones_on_the_worker(repo, monkeypatch):
    """grpc.aio hands the loop one call a turn: under load each call came alone and the loop, its
    bottleneck, ran the model too. So only HTTP's lone requests run there."""
    import grpc
    import httpx

    from schemas.proto import grpc_service_pb2 as pb
    from schemas.proto import grpc_service_pb2_grpc as pb_grpc
    from serving.backends import EdgeRuntimeBackend
    from tests.serving.conftest import running_server

    monkeypatch.setattr(batcher_module, "RUN_ALONE_MAX_COMPUTE_S", 1.0)  # however slow the loaded host
    threads: list[int] = []

    class Recording(EdgeRuntimeBackend):
        def infer_batch(self, requests):
            threads.append(threading.get_ident())
            return super().infer_batch(requests)

    (repo / "mlp" / "config.json").write_text('{"max_batch_size": 16}')  # no batching window
    x = np.ones((1, 4), np.float32)
    with running_server(repo, backend_factory=Recording) as server:
        loop_thread = server._thread.ident
        with httpx.Client(base_url=server.http_url, timeout=10) as http:
            for _ in range(4):
                http.post("/v2/models/mlp/infer", json={"inputs": [
                    {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": x.ravel().tolist()}]}).raise_for_status()
        over_http, threads[:] = list(threads), []
        with grpc.insecure_channel(server.grpc_address) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            for _ in range(4):
                request = pb.ModelInferRequest(model_name="mlp")
                request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
                request.raw_input_contents.append(x.tobytes())
                stub.ModelInfer(request, timeout=10)
    assert loop_thread in over_http[-3:]  # the first of the warm ones may still find the worker counting
    assert len(threads) == 4 and loop_thread not in threads


def test_a_lone_http_request_runs_at_once_with_no_loop_iteration_waited(repo, monkeypatch):
    """The HTTP front end knows when a request is the only one its server holds (uvicorn's task
    set): such a request runs in ``submit``, not after a loop iteration spent waiting for company."""
    import httpx

    from tests.serving.conftest import running_server

    monkeypatch.setattr(batcher_module, "RUN_ALONE_MAX_COMPUTE_S", 1.0)  # however slow the loaded host
    wakes: list[int] = []
    wake = handoff.LoopHandoff._wake

    def counted(self):
        wakes.append(self._outstanding)
        wake(self)

    monkeypatch.setattr(handoff.LoopHandoff, "_wake", counted)
    (repo / "mlp" / "config.json").write_text('{"max_batch_size": 16}')  # no batching window
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}]}
    with running_server(repo) as server:
        with httpx.Client(base_url=server.http_url, timeout=10) as http:
            http.post("/v2/models/mlp/infer", json=body).raise_for_status()  # the worker times the model
            while server.repository.get("mlp").batcher.in_flight:
                threading.Event().wait(0.001)
            wakes.clear()
            for _ in range(3):
                http.post("/v2/models/mlp/infer", json=body).raise_for_status()
    assert wakes == []
