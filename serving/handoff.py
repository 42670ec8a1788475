"""Results of worker threads, handed to an event loop with one wake-up per burst.

``asyncio.wrap_future`` wakes the loop once per finished request. A batch finishes many requests
at once, and those wake-ups (a self-pipe write each) cost ~9% of the server's CPU under load:
here the first completion of a burst schedules one drain, and the rest join its list.

The worker side is a ``LoopCompletion``, which the batcher resolves as it would a
``concurrent.futures.Future``; it is not one, because a Future allocates a condition variable
and takes its lock several times per request, and nothing here waits on it from a thread.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from typing import Any


class CompletionRelay:
    """Resolves asyncio futures of ``loop`` from other threads, one loop wake-up per burst."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._ready: deque[tuple[asyncio.Future, Any, bool]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def completion(self) -> LoopCompletion:
        """A new waiter on this loop and the handle a worker thread resolves it through."""
        return LoopCompletion(self._loop.create_future(), self)

    def push(self, waiter: asyncio.Future, value: Any, failed: bool) -> None:
        """From any thread: resolve ``waiter`` with ``value`` (an exception when ``failed``)."""
        with self._lock:
            self._ready.append((waiter, value, failed))
            if self._scheduled:
                return
            self._scheduled = True
        self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            done = list(self._ready)
            self._ready.clear()
            self._scheduled = False
        for waiter, value, failed in done:
            if waiter.done():  # cancelled meanwhile
                continue
            if failed:
                waiter.set_exception(value)
            else:
                waiter.set_result(value)


class LoopCompletion:
    """The worker thread's end of one request: Future's resolving methods, relayed to ``waiter``."""

    __slots__ = ("waiter", "_relay")

    def __init__(self, waiter: asyncio.Future, relay: CompletionRelay):
        self.waiter = waiter
        self._relay = relay

    def set_running_or_notify_cancel(self) -> bool:
        # A plain read of the waiter's state; if it is cancelled just after, the drain skips it.
        return not self.waiter.cancelled()

    def set_result(self, result: Any) -> None:
        self._relay.push(self.waiter, result, False)

    def set_exception(self, exception: BaseException) -> None:
        self._relay.push(self.waiter, exception, True)


_relays: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CompletionRelay]" = weakref.WeakKeyDictionary()


def loop_completion() -> LoopCompletion:
    """A ``LoopCompletion`` for the running loop: pass it to ``DynamicBatcher.submit`` as the future
    and ``await`` its ``waiter``."""
    loop = asyncio.get_running_loop()
    relay = _relays.get(loop)
    if relay is None:
        relay = _relays[loop] = CompletionRelay(loop)
    return relay.completion()
