"""The buffer behind a queue handle: session state that queue kernels share across steps."""

from __future__ import annotations

import json
import threading
from collections import deque

import numpy as np

from trainer.errors import OutOfRangeError

__all__ = ["QueueBuffer"]


class QueueBuffer:
    """The buffer behind a queue handle: bounded, blocking, closable; optionally shuffling."""

    def __init__(self, name, capacity, dtypes, shapes, shuffle=False, min_after_dequeue=0, seed=0):
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
            if self.shapes is not None and tuple(shape) != self.shapes[i]:
                raise ValueError(f"queue {self.name!r} component {i}: expected shape {self.shapes[i]}, "
                                 f"got {tuple(shape)}")

    def put(self, item):
        with self.cv:
            if self.closed:
                raise RuntimeError(f"queue {self.name!r} is closed; cannot enqueue")
            # An enqueue already waiting when the queue closes still completes once there is room
            # (as in TensorFlow), unless the close cancelled pending enqueues.
            self.waiting_puts += 1
            try:
                while self.capacity is not None and len(self.items) >= self.capacity and not self.cancelled:
                    self.cv.wait(0.1)
            finally:
                self.waiting_puts -= 1
            if self.cancelled:
                raise RuntimeError(f"queue {self.name!r} was closed with cancel_pending_enqueues; enqueue cancelled")
            self.items.append(item)
            self.cv.notify_all()

    def take(self, n):
        out = []
        with self.cv:
            while len(out) < n:
                floor = 0 if self.closed else self.min_after_dequeue
                if len(self.items) > floor:
                    if self.shuffle:
                        i = int(self.rng.integers(len(self.items)))
                        self.items.rotate(-i)
                        out.append(self.items.popleft())
                        self.items.rotate(i)
                    else:
                        out.append(self.items.popleft())
                    self.cv.notify_all()
                    continue
                if self.closed and not self.waiting_puts:  # a pending enqueue may still fill it
                    for item in reversed(out):  # give back a partial batch: not enough left
                        self.items.appendleft(item)
                    raise OutOfRangeError(
                        f"queue {self.name!r} is closed and has {len(self.items)} elements (needed {n})"
                    )
                self.cv.wait(0.1)
        return out

    def close(self, cancel_pending_enqueues: bool = False):
        with self.cv:
            self.closed = True
            self.cancelled = self.cancelled or cancel_pending_enqueues
            self.cv.notify_all()
