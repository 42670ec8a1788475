"""``num_threads`` of the LiteRT API: the BLAS thread count, set around each call.

NumPy's BLAS (OpenBLAS in NumPy's wheels) keeps one thread pool per process, so a thread count is
a process-wide setting: ``BlasThreads(n).applied()`` sets it for the duration of a call, and the
last of the calls in flight puts back what was there before the first began (last-writer-wins
while several run at once with different counts). Setting it goes through threadpoolctl, an optional
dependency (the runtime itself needs only numpy and flatbuffers); without it a count cannot take
effect, and a ``RuntimeWarning`` says so when the interpreter is made.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from functools import lru_cache
from typing import Any, Iterator


def threads_wanted(num_threads: int | None) -> int | None:
    """LiteRT's meaning of ``num_threads``: None or -1 the runtime's default (None here), 0 the same
    as 1, otherwise that many threads; anything below -1 is an error."""
    if num_threads is None or num_threads == -1:
        return None
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < -1:
        raise ValueError(f"num_threads must be an integer >= -1, got {num_threads!r}")
    return max(num_threads, 1)


@lru_cache(maxsize=1)
def _blas_controllers() -> tuple[Any, ...] | None:
    """threadpoolctl's controllers of the BLAS libraries loaded in this process, found once; None
    without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return tuple(lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas")


def describe_blas() -> str:
    """NumPy's BLAS libraries as "openblas (2 threads, SkylakeX kernels)", for benchmark reports.

    The edge runtime's speed is mostly its BLAS's, and the kernel architecture matters as much as
    the thread count: ``OPENBLAS_CORETYPE=Haswell``, for one, keeps OpenBLAS on AVX2 kernels on a
    CPU with AVX-512, and its sgemm runs 1.6-1.8x slower on such a machine."""
    libs = _blas_controllers()
    if libs is None:
        return "unknown (threadpoolctl not installed)"
    described = []
    for lib in libs:
        count = lib.get_num_threads()
        described.append(f"{lib.internal_api} ({count} thread{'' if count == 1 else 's'}, "
                         f"{lib.info().get('architecture') or '?'} kernels)")
    return ", ".join(described) or "none found"


def forced_blas_kernels() -> str | None:
    """A warning when the environment pins OpenBLAS's kernels (``OPENBLAS_CORETYPE``), which it reads
    once at start-up, whatever the CPU: a benchmark against a peer should say so, or unset it."""
    forced = os.environ.get("OPENBLAS_CORETYPE")
    if not forced:
        return None
    return (f"OPENBLAS_CORETYPE={forced} pins OpenBLAS's kernels whatever this CPU offers; to compare against "
            "a peer, unset it in the command (env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ...)")


class BlasThreads:
    def __init__(self, num_threads: int | None):
        self.count = threads_wanted(num_threads)
        self._libs: tuple[Any, ...] = ()
        if self.count is not None:
            libs = _blas_controllers()
            if libs is None:
                warnings.warn(f"num_threads={num_threads} has no effect: setting NumPy's BLAS thread count "
                              "needs the threadpoolctl package (pip install threadpoolctl)", RuntimeWarning,
                              stacklevel=3)
            self._libs = libs or ()

    @contextlib.contextmanager
    def applied(self) -> Iterator[None]:
        if not self._libs:
            yield
            return
        found = _enter(self._libs, self.count)
        try:
            yield
        finally:
            _leave(found)


# Calls in flight under some BlasThreads, and the counts found when the first of them began. A call
# putting back only the count it found would leave the process at an overlapping call's count (two
# interpreters at num_threads=1 on two threads: the second finds 1, ends last and restores 1), so
# the last call to end puts back the first one's. Each call also puts back its own on ending: the
# OpenBLAS of NumPy's wheels (0.3.31 here) was seen to ignore a count set from any other thread than
# the first one to set it, while that one lives, so there only that thread's own restores count.
_lock = threading.Lock()
_in_flight = 0
_first_found: list[tuple[Any, int]] = []


def _enter(libs: tuple[Any, ...], count: int) -> list[tuple[Any, int]]:
    global _in_flight, _first_found
    with _lock:
        found = [(lib, lib.get_num_threads()) for lib in libs]
        if _in_flight == 0:
            _first_found = found
        _in_flight += 1
        for lib in libs:
            lib.set_num_threads(count)
    return found


def _leave(found: list[tuple[Any, int]]) -> None:
    global _in_flight
    with _lock:
        _in_flight -= 1
        for lib, count in found + (_first_found if _in_flight == 0 else []):
            lib.set_num_threads(count)
