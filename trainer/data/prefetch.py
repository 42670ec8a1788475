"""``prefetch``: a background thread keeps a bounded buffer of elements ready, when that pays.

Handing an element from one thread to another costs a lock, a wake-up and a GIL switch: 50-100 us
on a loaded 2-core machine, more than making a batch of sliced arrays (~10 us). A prefetch that
always used its thread made such pipelines slower than no prefetch (issue 21: 0.74 of preloaded
feeding against 0.92 inline). So the pass measures what making an element costs, in windows of
``WINDOW`` elements, and runs wherever is cheaper: in the consumer's thread while the window's
median is under ``THREAD_WORTH_S``, on the background thread once it is over (slow maps, files,
generators that wait on I/O: their time then overlaps training), and back inline if the producer
becomes cheap again. The elements and their order are the same either way.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from typing import Iterator

from trainer.data.dataset import AUTOTUNE, Dataset, positive_int

__all__ = ["THREAD_WORTH_S", "WINDOW", "PrefetchDataset"]

THREAD_WORTH_S = 250e-6  # median cost per element above which the background thread pays for its hand-offs
WINDOW = 8  # elements per cost measurement

_END = object()
_INLINE = object()  # from the producer thread: it stopped, the consumer makes the elements from here on


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class _CostWindow:
    """Median seconds per element over the last ``WINDOW`` elements made."""

    def __init__(self):
        self.times: list[float] = []

    def add(self, seconds: float) -> float | None:
        """Records one element; returns the window's median when the window is full, else None."""
        self.times.append(seconds)
        if len(self.times) < WINDOW:
            return None
        median = statistics.median(self.times)
        self.times.clear()
        return median


class PrefetchDataset(Dataset):
    """Up to ``buffer_size`` elements made ahead on a background thread, when making one costs more than
    handing it over; made in the consumer's thread otherwise (see the module docstring)."""

    def __init__(self, input: Dataset, buffer_size):
        self.input = input
        self.size = 2 if buffer_size in (None, AUTOTUNE) else positive_int(buffer_size, "buffer_size")
        self.element_spec = input.element_spec

    def cardinality(self) -> int:
        return self.input.cardinality()

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        return _PrefetchPass(self.input.elements(ctx), self.size).elements()


class _PrefetchPass:
    """One pass: the source's elements, made inline or on a thread as their cost says.

    Whoever holds the source last closes it: this pass, or the producer thread when the consumer
    leaves while the thread is still making an element (closing it from here would race its ``next``).
    """

    def __init__(self, source: Iterator, size: int):
        self.source = source
        self.size = size
        self.thread_closes_source = False

    def elements(self) -> Iterator:
        try:
            while (yield from self.inline()) and (yield from self.threaded()):
                pass
        finally:
            if not self.thread_closes_source:
                self.source.close()

    def inline(self):
        """Elements made here; returns True when they became costly enough for the thread, False at the end."""
        window = _CostWindow()
        while True:
            start = time.perf_counter()
            try:
                comps = next(self.source)
            except StopIteration:
                return False
            median = window.add(time.perf_counter() - start)
            yield comps
            if median is not None and median > THREAD_WORTH_S:
                return True

    def threaded(self):
        """Elements made on a background thread; returns True when they became cheap, False at the end."""
        ready: queue.Queue = queue.Queue(self.size)
        stop = threading.Event()
        lock = threading.Lock()
        producing = [True]

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce():
            window = _CostWindow()
            try:
                while True:
                    start = time.perf_counter()
                    try:
                        comps = next(self.source)
                    except StopIteration:
                        put(_END)
                        return
                    median = window.add(time.perf_counter() - start)
                    if not put(comps):
                        return
                    if median is not None and median < THREAD_WORTH_S / 4:  # hysteresis: no flapping at the edge
                        put(_INLINE)
                        return
            except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised at its get_next
                put(_Failure(e))
            finally:
                with lock:
                    producing[0] = False
                    if stop.is_set():  # the consumer left while this thread held the source
                        self.source.close()

        thread = threading.Thread(target=produce, name="flowstack-data-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return False
                if item is _INLINE:
                    thread.join()  # it has let go of the source
                    return True
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            with lock:
                stop.set()
                self.thread_closes_source = producing[0]
