"""Between an event loop and the batcher threads: requests go over with one worker wake-up per
loop iteration, results come back with one loop wake-up per burst.

Waking the worker on every submit would start a batch with a burst's first request while the
loop still decodes the rest (small batches, and the threads trading the GIL at each wake-up), so
the first submit of a loop iteration schedules one wake-up for the next. A batch finishes many
requests at once, so the first completion of a burst schedules one drain of the loop and the
rest join it, rather than one loop wake-up (a self-pipe write) per request as
``asyncio.wrap_future`` does; the worker resolves a ``LoopCompletion``, not a
``concurrent.futures.Future``, whose condition variable no thread waits on. Figures:
benchmarks/RESULTS.md, "Figures behind the code's choices".

The only request the loop awaits, finding its batcher idle, for a model whose calls are quick,
skips the threads altogether and runs in the loop (``DynamicBatcher.run_alone``) where its caller
allows it (the core allows it for HTTP, not gRPC): what a lone request gains from a worker is less
than the trip there and back costs. It runs at the next loop iteration, once every request that
arrived with it has been submitted too; or at once, in ``submit``, when its caller knows that none
arrived with it (``alone``), which spares the two loop iterations of that wait and of its result's
way back.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from typing import Any

from serving.batcher import DynamicBatcher, Feeds


class LoopHandoff:
    """Submits to batchers from ``loop`` and resolves the loop's futures from their threads."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop  # whose thread calls ``submit``
        self._to_wake: set[DynamicBatcher] = set()  # touched by the loop's thread only
        self._ready: deque[tuple[asyncio.Future, Any, bool]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._thread_id = threading.get_ident()  # made in the loop's thread, by ``submit``
        self._outstanding = 0  # submitted requests whose waiter is not done (loop's thread only)
        self._last_may_run_alone = True

    def submit(self, batcher: DynamicBatcher, feeds: Feeds, rows: int, timeout_s: float | None,
               may_run_alone: bool = True, alone: bool = False) -> asyncio.Future:
        """Queue a request (raising what ``batcher.submit`` raises); await the result for its
        outputs. ``may_run_alone``: whether it may run in the loop when it comes alone. ``alone``:
        the caller holds no other request, received or under way, so that if the loop awaits none
        either, it runs here and now (``DynamicBatcher.run_now``; the future comes back done)."""
        if alone and may_run_alone and not self._outstanding:
            ran = batcher.run_now(feeds, rows)
            if ran is not None:
                waiter = self.loop.create_future()
                outputs, error = ran
                if error is None:
                    waiter.set_result(outputs)
                else:
                    waiter.set_exception(error)
                return waiter
        completion = LoopCompletion(self.loop.create_future(), self)
        batcher.submit(feeds, rows, timeout_s, completion, wake=False)
        self._outstanding += 1
        self._last_may_run_alone = may_run_alone  # the one that counts when it is the only one
        completion.waiter.add_done_callback(self._done)
        if not self._to_wake:
            self.loop.call_soon(self._wake)
        self._to_wake.add(batcher)
        return completion.waiter

    def _wake(self) -> None:
        batchers = list(self._to_wake)
        self._to_wake.clear()
        # The only request the loop awaits, its batcher idle: run it here, in the loop's thread
        # (see ``DynamicBatcher.run_alone``); its result comes back through ``push`` directly.
        # With others awaited, the loop has their answers to write while a worker computes.
        alone = self._outstanding == 1 and self._last_may_run_alone
        for batcher in batchers:
            if not (alone and batcher.run_alone()):
                batcher.wake()

    def _done(self, waiter: asyncio.Future) -> None:
        self._outstanding -= 1

    def push(self, waiter: asyncio.Future, value: Any, failed: bool) -> None:
        """From any thread: resolve ``waiter`` with ``value`` (an exception when ``failed``)."""
        if threading.get_ident() == self._thread_id:  # run alone, in the loop's own thread
            _resolve(waiter, value, failed)
            return
        with self._lock:
            self._ready.append((waiter, value, failed))
            if self._scheduled:
                return
            self._scheduled = True
        self.loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            done = list(self._ready)
            self._ready.clear()
            self._scheduled = False
        for waiter, value, failed in done:
            _resolve(waiter, value, failed)


def _resolve(waiter: asyncio.Future, value: Any, failed: bool) -> None:
    if waiter.done():  # cancelled meanwhile
        return
    if failed:
        waiter.set_exception(value)
    else:
        waiter.set_result(value)


class LoopCompletion:
    """The worker thread's end of one request: Future's resolving methods, relayed to ``waiter``."""

    __slots__ = ("waiter", "_handoff")

    def __init__(self, waiter: asyncio.Future, handoff: LoopHandoff):
        self.waiter = waiter
        self._handoff = handoff

    def set_running_or_notify_cancel(self) -> bool:
        # A plain read of the waiter's state; if it is cancelled just after, the drain skips it.
        return not self.waiter.cancelled()

    def set_result(self, result: Any) -> None:
        self._handoff.push(self.waiter, result, False)

    def set_exception(self, exception: BaseException) -> None:
        self._handoff.push(self.waiter, exception, True)


_handoffs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopHandoff]" = weakref.WeakKeyDictionary()
_last: LoopHandoff | None = None  # the last one used: a server's loop finds its own without a weak-key lookup


def submit(batcher: DynamicBatcher, feeds: Feeds, rows: int, timeout_s: float | None = None,
           may_run_alone: bool = True, alone: bool = False) -> asyncio.Future:
    """``batcher.submit`` from the running loop, as an asyncio future (see the module docstring)."""
    global _last
    loop = asyncio.get_running_loop()
    handoff = _last
    if handoff is None or handoff.loop is not loop:
        handoff = _handoffs.get(loop)
        if handoff is None:
            handoff = _handoffs[loop] = LoopHandoff(loop)
        _last = handoff
    return handoff.submit(batcher, feeds, rows, timeout_s, may_run_alone, alone)
