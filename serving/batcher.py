"""``DynamicBatcher``: group concurrent requests into one backend call, off the event loop.

Requests wait in a bounded queue. Each of ``instances`` worker threads takes the oldest request
and keeps adding queued ones while they fit in ``max_batch_size`` rows, until the batch is full,
reaches a preferred size, or the oldest request has waited ``max_queue_delay_us``. The batch goes
to ``infer_batch(list of feeds) -> list of outputs`` (same length and order, Triton's contract)
and each request's future gets its own outputs. A full queue refuses at once (``Overloaded``)
instead of letting latency grow without bound.

The future is a ``concurrent.futures.Future`` unless the caller passes its own: anything with
Future's ``set_running_or_notify_cancel``, ``set_result`` and ``set_exception`` will do, which lets
an asyncio front end receive results without a thread-safe Future (and its locks) per request.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable

import numpy as np

from serving.errors import Overloaded, RequestTimeout, VersionRetired

log = logging.getLogger("flowstack.serving")

Feeds = dict[str, np.ndarray]
InferBatch = Callable[[list[Feeds]], list[Feeds]]
# on_batch(rows, queue waits in seconds one per request, compute seconds)
BatchObserver = Callable[[int, list[float], float], None]
# A request alone may run in its caller's thread (``run_alone``) while the model's calls take
# this long or less (a moving average): long enough for a small network, short enough that the
# event loop it holds meanwhile answers its other connections without a noticeable wait.
RUN_ALONE_MAX_COMPUTE_S = 0.002


class _Pending:
    __slots__ = ("feeds", "rows", "enqueued", "deadline", "future")

    def __init__(self, feeds: Feeds, rows: int, enqueued: float, deadline: float | None, future: Any):
        self.feeds, self.rows, self.enqueued, self.deadline, self.future = feeds, rows, enqueued, deadline, future


class DynamicBatcher:
    """A bounded queue and worker threads in front of one backend.

    >>> import numpy as np
    >>> b = DynamicBatcher(lambda reqs: [{"y": r["x"] * 2} for r in reqs], max_batch_size=8)
    >>> b.submit({"x": np.ones(1)}, rows=1).result()["y"]
    array([2.])
    >>> b.close()
    """

    def __init__(
        self,
        infer_batch: InferBatch,
        *,
        max_batch_size: int = 0,
        max_queue_delay_us: int = 0,
        preferred_batch_sizes: tuple[int, ...] = (),
        instances: int = 1,
        max_queue_size: int = 256,
        on_batch: BatchObserver | None = None,
        name: str = "model",
    ):
        self._infer_batch = infer_batch
        self.max_batch_size = max_batch_size
        self._delay_s = max_queue_delay_us / 1e6
        self._preferred = frozenset(preferred_batch_sizes)
        self.max_queue_size = max_queue_size
        self._on_batch = on_batch
        self._queue: collections.deque[_Pending] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self._in_flight = 0
        # Moving average of a model call's seconds; unknown (never run alone) until the first.
        self._compute_s = float("inf")
        self._workers = [
            threading.Thread(target=self._work, name=f"batcher-{name}-{i}", daemon=True) for i in range(instances)
        ]
        for worker in self._workers:
            worker.start()

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    @property
    def in_flight(self) -> int:
        """Requests accepted and not yet answered (queued or running)."""
        return self._in_flight

    def submit(
        self, feeds: Feeds, rows: int, timeout_s: float | None = None, future: Any = None, wake: bool = True
    ) -> Future:
        """Queue one request of ``rows`` batch rows; ``future`` (a new Future unless given) resolves
        to its outputs, and is returned. ``wake=False`` leaves an idle worker asleep until
        ``wake()``, so that a caller submitting a burst wakes it once, for the whole burst."""
        now = time.perf_counter()
        pending = _Pending(feeds, rows, now, None if timeout_s is None else now + timeout_s,
                           Future() if future is None else future)
        with self._cond:
            if self._closed:
                raise VersionRetired("this model version is being unloaded")
            if len(self._queue) >= self.max_queue_size:
                raise Overloaded(f"queue full ({self.max_queue_size} requests waiting); retry later")
            self._queue.append(pending)
            self._in_flight += 1
            if wake:
                self._cond.notify()
        return pending.future

    def wake(self) -> None:
        """Wake idle workers for what is queued (after submits with ``wake=False``)."""
        with self._cond:
            self._cond.notify(len(self._queue))

    def run_alone(self) -> bool:
        """Run the queued request in the calling thread if it is the only one the batcher holds
        (none queued beside it, none running), the model's calls are quick and no
        ``max_queue_delay_us`` asks requests to wait for company; False (nothing done) otherwise,
        leaving it to the workers.

        At concurrency 1 the trip to a worker thread and back (a wake-up, the GIL passed twice,
        the event loop woken from its poll) costs more than a quick model call itself
        (benchmarks/RESULTS.md, session 13). A request that has company gains from the workers
        (batches, and the loop decoding the next requests meanwhile), so only a lone one is taken."""
        with self._cond:
            if len(self._queue) != 1 or self._in_flight != 1 or not self._runs_alone():
                return False
            batch = [self._queue.popleft()]
        try:
            self._run(batch)
        finally:
            self._alone_done()
        return True

    def run_now(self, feeds: Feeds, rows: int) -> tuple[Feeds | None, Exception | None] | None:
        """Run a request in the calling thread, never queued, where ``run_alone`` would run it
        had it been queued: the batcher holds no other and the model is quick. Returns (outputs,
        None) or (None, the error), or None, having done nothing, where it must be ``submit``-ted.
        It spares the queue entry and the future that relays the result (benchmarks/RESULTS.md,
        session 14)."""
        with self._cond:
            if self._queue or self._in_flight or not self._runs_alone():
                return None
            self._in_flight = 1
        try:
            start = time.perf_counter()
            results, error = _attempt(self._infer_batch, [feeds])
            self._ran(rows, [0.0], time.perf_counter() - start)
        finally:
            self._alone_done()
        return (None, error) if error is not None else (results[0], None)

    def _runs_alone(self) -> bool:
        return not self._closed and self._delay_s <= 0 and self._compute_s <= RUN_ALONE_MAX_COMPUTE_S

    def _alone_done(self) -> None:
        with self._cond:
            self._in_flight -= 1
            if self._closed:
                self._cond.notify_all()  # ``close`` waits for it

    def close(self, timeout: float | None = None) -> None:
        """Stop accepting; requests already queued still run. Returns when the workers are done,
        having let go of the backend and the observer, so that nothing the batcher holds keeps an
        unloaded model's memory (the version object may outlive it in a request finishing)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for worker in self._workers:
            worker.join(timeout)
        with self._cond:  # a request running alone, in its caller's thread
            done = self._cond.wait_for(lambda: self._in_flight == 0, timeout)
        if done and not any(worker.is_alive() for worker in self._workers):
            self._infer_batch = _closed_backend
            self._on_batch = None

    def _next_batch(self) -> list[_Pending] | None:
        with self._cond:
            while not self._queue:
                if self._closed:
                    return None
                self._cond.wait()
            batch = [self._queue.popleft()]
            if self.max_batch_size <= 0:
                return batch
            rows = batch[0].rows
            flush_at = batch[0].enqueued + self._delay_s
            while True:
                while self._queue and rows + self._queue[0].rows <= self.max_batch_size:
                    pending = self._queue.popleft()
                    batch.append(pending)
                    rows += pending.rows
                full = rows >= self.max_batch_size or bool(self._queue)
                remaining = flush_at - time.perf_counter()
                if full or rows in self._preferred or remaining <= 0 or self._closed:
                    return batch
                self._cond.wait(remaining)

    def _work(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            try:
                self._run(batch)
            finally:
                with self._cond:
                    self._in_flight -= len(batch)

    def _run(self, batch: list[_Pending]) -> None:
        start = time.perf_counter()
        live = []
        for pending in batch:
            if pending.future.set_running_or_notify_cancel() is False:
                continue
            if pending.deadline is not None and start > pending.deadline:
                waited_us = (start - pending.enqueued) * 1e6
                pending.future.set_exception(RequestTimeout(f"request timed out after waiting {waited_us:.0f} us in the queue"))
                continue
            live.append(pending)
        if not live:
            return
        infer_batch = self._infer_batch
        results, error = _attempt(infer_batch, [p.feeds for p in live])
        if error is not None:
            if len(live) == 1:
                live[0].future.set_exception(error)
                return
            # One bad request must not fail its neighbours: run each alone to find it.
            log.warning("batch of %d failed (%s); retrying its requests one by one", len(live), error)
            results = []
            for pending in live:
                single, error = _attempt(infer_batch, [pending.feeds])
                results.extend(single if error is None else [error])
        compute_s = time.perf_counter() - start
        for pending, result in zip(live, results):
            if isinstance(result, Exception):
                pending.future.set_exception(result)
            else:
                pending.future.set_result(result)
        self._ran(sum(p.rows for p in live), [start - p.enqueued for p in live], compute_s)

    def _ran(self, rows: int, waits: list[float], compute_s: float) -> None:
        """Note a finished model call: its time in the moving average, and in ``on_batch``."""
        average = self._compute_s
        self._compute_s = compute_s if average == float("inf") else 0.8 * average + 0.2 * compute_s
        on_batch = self._on_batch
        if on_batch is not None:
            on_batch(rows, waits, compute_s)


def _attempt(infer_batch: InferBatch, requests: list[Feeds]) -> tuple[list[Feeds] | None, Exception | None]:
    """``infer_batch(requests)``, or the exception it raised. Caught here, the exception's traceback
    starts at this frame, which holds no request's future: caught in ``_run``, whose frame holds the
    batch, it made a cycle (future -> exception -> traceback -> frame -> future) that kept the
    batch, and through it the model version, alive until the cyclic garbage collector ran."""
    try:
        return infer_batch(requests), None
    except Exception as exc:
        return None, exc


def _closed_backend(requests: list[Feeds]) -> list[Feeds]:
    raise VersionRetired("this model version has been unloaded")
