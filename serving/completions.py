"""Results of worker-thread futures, handed to an event loop with one wake-up per burst.

``asyncio.wrap_future`` wakes the loop once per finished request. A batch finishes many requests
at once, and those wake-ups (a self-pipe write each) cost ~9% of the server's CPU under load:
here the first completion of a burst schedules one drain, and the rest join its list.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import deque
from concurrent.futures import Future


class CompletionRelay:
    def __init__(self, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self._ready: deque[tuple[asyncio.Future, Future]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False

    def wrap(self, future: Future) -> asyncio.Future:
        """An asyncio future of this loop that follows ``future``; cancelling it cancels ``future``."""
        waiter = self._loop.create_future()
        waiter.add_done_callback(lambda w: future.cancel() if w.cancelled() else None)
        future.add_done_callback(lambda f: self._completed(waiter, f))
        return waiter

    def _completed(self, waiter: asyncio.Future, future: Future) -> None:
        with self._lock:
            self._ready.append((waiter, future))
            if self._scheduled:
                return
            self._scheduled = True
        self._loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        with self._lock:
            done = list(self._ready)
            self._ready.clear()
            self._scheduled = False
        for waiter, future in done:
            if waiter.done():
                continue
            if future.cancelled():
                waiter.cancel()
            elif future.exception() is not None:
                waiter.set_exception(future.exception())
            else:
                waiter.set_result(future.result())


_relays: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, CompletionRelay]" = weakref.WeakKeyDictionary()


def wrap_future(future: Future) -> asyncio.Future:
    """Like ``asyncio.wrap_future``, for the running loop, waking it once per burst of completions."""
    loop = asyncio.get_running_loop()
    relay = _relays.get(loop)
    if relay is None:
        relay = _relays[loop] = CompletionRelay(loop)
    return relay.wrap(future)
