"""Give an unloaded model's memory back to the operating system.

Freeing a model's arrays returns their memory to glibc's malloc, which keeps it: the edge
runtime raises its trim threshold to 256 MiB (``edge_runtime.allocator``) so that a model's runs
reuse their pages, and glibc returns only the free memory at the top of each heap anyway. A server
replacing a 55 MB model every few seconds then held the freed copies as resident memory.
``malloc_trim(0)`` returns every free page of every arena; it walks the heaps, so it runs in a
thread of its own, once per burst of unloads, never in the event loop or a request's thread.

A large request leaves the same behind: a 200 MB gRPC request (its message, the parsed copy, the
tensor) kept ~600 MiB resident after it was answered. The core asks for a trim a moment after
answering one (``request(delay_s)``), once the front end has let go of its buffers.
"""

from __future__ import annotations

import ctypes
import logging
import platform
import threading
import time
from typing import Callable

log = logging.getLogger("flowstack.serving")


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    return trim


class FreedMemoryReturner:
    """A daemon thread that calls ``malloc_trim(0)`` after ``request()`` (from any thread, cheap:
    it sets an event), coalescing the requests that arrive while a trim runs. Does nothing where
    the C library is not glibc."""

    def __init__(self) -> None:
        self._trim = _glibc_malloc_trim()
        self._wanted = threading.Event()
        self._not_before = 0.0  # time.monotonic() before which the next trim waits
        self._stop = threading.Event()
        self._stopping = False
        self.trims = 0  # completed trims, for tests and logs
        self._thread: threading.Thread | None = None  # started by the first request
        self._start_lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._trim is not None

    def request(self, delay_s: float = 0.0) -> None:
        """Ask for a trim soon (after an unload), or in ``delay_s`` (after a large request, whose
        buffers are freed once it is answered)."""
        if self._trim is None or self._stopping:
            return
        self._not_before = max(self._not_before, time.monotonic() + delay_s)
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="malloc-trim", daemon=True)
                    self._thread.start()
        self._wanted.set()

    def close(self, timeout: float | None = 5.0) -> None:
        self._stopping = True
        self._stop.set()
        self._wanted.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            while not self._stopping and (wait := self._not_before - time.monotonic()) > 0:
                self._stop.wait(wait)
            if self._stopping:
                return
            try:
                self._trim(0)  # type: ignore[misc]
            except Exception:  # never let a trim failure end the thread
                log.exception("malloc_trim failed")
            self.trims += 1
