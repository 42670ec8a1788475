"""The buffer behind a queue handle: session state that queue kernels share across steps.

Elements leave in arrival order (FIFOQueue, PaddingFIFOQueue), at random (RandomShuffleQueue), or
smallest priority first (PriorityQueue: component 0 is the int64 priority, ties in arrival order).
A padding queue's shapes may leave dimensions unknown; ``batch`` pads each component of a
dequeued batch to the batch's largest size along them (zeros, empty strings), as TF's does.
"""

from __future__ import annotations

import heapq
import itertools
import json
import threading
import time
from collections import deque

import numpy as np

from trainer.errors import DeadlineExceededError, OutOfRangeError

__all__ = ["QueueBuffer"]


class QueueBuffer:
    """The buffer behind a queue handle: bounded, blocking, closable; optionally shuffling."""

    def __init__(self, name, capacity, dtypes, shapes, shuffle=False, min_after_dequeue=0, seed=0, padding=False,
                 priority=False):
        self.name = name
        self.capacity = capacity if capacity > 0 else None
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.shapes = [tuple(json.loads(sh)) for sh in shapes] if shapes else None
        self.items: deque = deque()
        self.cv = threading.Condition()
        self.closed = False
        self.cancelled = False
        self.waiting_puts = 0  # enqueues blocked on a full queue; a close lets them finish
        self.shuffle = shuffle
        self.min_after_dequeue = min_after_dequeue
        self.rng = np.random.default_rng(seed or None)
        self.padding = padding
        self.priority = priority
        self.heap: list = []  # a priority queue's elements: (priority, arrival, element)
        self.arrivals = itertools.count()

    def check(self, components, batched: bool) -> None:
        """Reject an element whose arity, dtype or shape the queue was not built for, naming the
        component, before anything is enqueued (a wrong element would only fail, or silently
        change dtype, when a later dequeue_many stacks it)."""
        if len(components) != len(self.dtypes):
            raise ValueError(f"queue {self.name!r} holds {len(self.dtypes)} components, got {len(components)}")
        for i, c in enumerate(components):
            shape = c.shape[1:] if batched else c.shape
            if c.dtype != self.dtypes[i]:
                raise ValueError(f"queue {self.name!r} component {i}: expected {self.dtypes[i].name}, "
                                 f"got {c.dtype.name}")
            if batched and (c.ndim == 0 or c.shape[0] != components[0].shape[0]):
                raise ValueError(f"queue {self.name!r} enqueue_many: component {i} has shape {c.shape}; every "
                                 f"component needs the same leading (batch) dimension {components[0].shape[:1]}")
            if self.priority and i == 0 and c.ndim != (1 if batched else 0):
                raise ValueError(f"priority queue {self.name!r}: the priority (component 0) must be an int64 "
                                 f"scalar per element, got shape {c.shape}")
            if self.shapes is not None and not _fits(tuple(shape), self.shapes[i]):
                raise ValueError(f"queue {self.name!r} component {i}: expected shape {self.shapes[i]}, "
                                 f"got {tuple(shape)}")

    def __len__(self) -> int:
        return len(self.heap) if self.priority else len(self.items)

    def _append(self, item) -> None:
        if self.priority:
            heapq.heappush(self.heap, (int(item[0]), next(self.arrivals), item))
        else:
            self.items.append(item)

    def _pop(self):
        if self.priority:
            return heapq.heappop(self.heap)[2]
        if self.shuffle:
            i = int(self.rng.integers(len(self.items)))
            self.items.rotate(-i)
            item = self.items.popleft()
            self.items.rotate(i)
            return item
        return self.items.popleft()

    def _give_back(self, taken: list) -> None:
        """Return a partial batch to the front (a priority queue re-sorts it)."""
        for item in reversed(taken):
            if self.priority:
                heapq.heappush(self.heap, (int(item[0]), -1, item))
            else:
                self.items.appendleft(item)

    def batch(self, items: list) -> tuple:
        """Dequeued elements stacked per component; a padding queue pads each to the batch's largest shape."""
        out = []
        for i, dtype in enumerate(self.dtypes):
            parts = [np.asarray(item[i]) for item in items]
            if not parts:
                shape = tuple(0 if d is None else d for d in self.shapes[i]) if self.shapes else ()
                out.append(np.empty((0,) + shape, dtype))
                continue
            if self.padding:
                largest = tuple(max(p.shape[k] for p in parts) for k in range(parts[0].ndim))
                fill = b"" if dtype == np.dtype(object) else 0
                parts = [np.pad(p, [(0, m - n) for n, m in zip(p.shape, largest)], constant_values=fill)
                         if p.shape != largest else p for p in parts]
            out.append(np.stack(parts))
        return tuple(out)

    def put(self, item):
        with self.cv:
            if self.closed:
                raise RuntimeError(f"queue {self.name!r} is closed; cannot enqueue")
            # An enqueue already waiting when the queue closes still completes once there is room
            # (as in TensorFlow), unless the close cancelled pending enqueues.
            self.waiting_puts += 1
            try:
                while self.capacity is not None and len(self) >= self.capacity and not self.cancelled:
                    self.cv.wait(0.1)
            finally:
                self.waiting_puts -= 1
            if self.cancelled:
                raise RuntimeError(f"queue {self.name!r} was closed with cancel_pending_enqueues; enqueue cancelled")
            self._append(item)
            self.cv.notify_all()

    def take(self, n, timeout: float | None = None):
        """``n`` elements, waiting for them; past ``timeout`` seconds (None: no limit) the partial
        batch goes back and DeadlineExceededError names the queue."""
        out = []
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cv:
            while len(out) < n:
                floor = 0 if self.closed else self.min_after_dequeue
                if len(self) > floor:
                    out.append(self._pop())
                    self.cv.notify_all()
                    continue
                if self.closed and not self.waiting_puts:  # a pending enqueue may still fill it
                    self._give_back(out)  # a partial batch: not enough left
                    raise OutOfRangeError(
                        f"queue {self.name!r} is closed and has {len(self)} elements (needed {n})"
                    )
                if deadline is not None and time.monotonic() >= deadline:
                    self._give_back(out)
                    raise DeadlineExceededError(f"queue {self.name!r}: no element within {timeout:g}s "
                                                f"(has {len(self)}, needed {n})")
                self.cv.wait(0.1 if deadline is None else max(0.0, min(0.1, deadline - time.monotonic())))
        return out

    def close(self, cancel_pending_enqueues: bool = False):
        with self.cv:
            self.closed = True
            self.cancelled = self.cancelled or cancel_pending_enqueues
            self.cv.notify_all()


def _fits(shape: tuple, declared: tuple) -> bool:
    """Whether ``shape`` matches ``declared``, whose unknown (None) dimensions match any size."""
    return len(shape) == len(declared) and all(d is None or d == n for n, d in zip(shape, declared))
