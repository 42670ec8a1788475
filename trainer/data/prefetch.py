"""``prefetch``: a background thread keeps a bounded buffer of elements ready."""

from __future__ import annotations

import queue
import threading

from trainer.data.dataset import AUTOTUNE, Dataset, positive_int

__all__ = ["PrefetchDataset"]

_END = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class PrefetchDataset(Dataset):
    """A background thread keeps up to ``buffer_size`` elements ready, so input overlaps training."""

    def __init__(self, input: Dataset, buffer_size):
        self.input = input
        self.size = 2 if buffer_size in (None, AUTOTUNE) else positive_int(buffer_size, "buffer_size")
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _iterate(self, ctx):
        ready: queue.Queue = queue.Queue(self.size)
        stop = threading.Event()
        source = self.input._iterate(ctx)

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce():
            try:
                for comps in source:
                    if not put(comps):
                        return
                put(_END)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised at its get_next
                put(_Failure(e))
            finally:
                source.close()

        thread = threading.Thread(target=produce, name="flowstack-data-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            stop.set()
