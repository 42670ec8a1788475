"""Queues and queue runners: input pipelines that run concurrently with training.

A queue is session state (created on first use by its handle op) shared by every step that
touches it: a reader subgraph enqueues on QueueRunner threads while the training subgraph
dequeues batches. Closing a queue lets consumers drain it, then dequeue raises OutOfRangeError,
the normal end of an epoch loop.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque

import numpy as np

from trainer.graph import TRAINER_DOMAIN, GraphKeys, get_default_graph
from trainer.ops import constant, convert_to_tensor
from trainer.state import OutOfRangeError, stateful_kernel

__all__ = ["Coordinator", "FIFOQueue", "QueueRunner", "RandomShuffleQueue", "start_queue_runners"]


class _QueueState:
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


def _queue(rctx, handle) -> _QueueState:
    return rctx.state.resources[str(handle[()])]


def _create(rctx, name, factory):
    res = rctx.state.resources
    with rctx.state.lock:
        if name not in res:
            res[name] = factory()
    out = np.empty((), dtype=object)
    out[()] = name
    return out


@stateful_kernel("FIFOQueue")
def fifo_queue(rctx, *, xp, component_types, shapes, capacity, shared_name):
    return _create(rctx, shared_name, lambda: _QueueState(shared_name, capacity, component_types, shapes))


@stateful_kernel("RandomShuffleQueue")
def random_shuffle_queue(rctx, *, xp, component_types, shapes, capacity, shared_name, min_after_dequeue, seed):
    return _create(rctx, shared_name, lambda: _QueueState(shared_name, capacity, component_types, shapes,
                                                             True, min_after_dequeue, seed))


@stateful_kernel("QueueEnqueue")
def queue_enqueue(rctx, handle, *components, xp):
    q = _queue(rctx, handle)
    item = tuple(np.array(c, copy=True) for c in components)
    q.check(item, batched=False)
    q.put(item)


@stateful_kernel("QueueEnqueueMany")
def queue_enqueue_many(rctx, handle, *components, xp):
    q = _queue(rctx, handle)
    q.check([np.asarray(c) for c in components], batched=True)
    for row in zip(*components):
        q.put(tuple(np.array(c, copy=True) for c in row))


@stateful_kernel("QueueDequeue")
def queue_dequeue(rctx, handle, *, xp, component_types):
    item = _queue(rctx, handle).take(1)[0]
    return tuple(item) if len(item) > 1 else item[0]


@stateful_kernel("QueueDequeueMany")
def queue_dequeue_many(rctx, handle, n, *, xp, component_types):
    q = _queue(rctx, handle)
    items = q.take(int(n))
    if not items and q.shapes is not None:  # dequeue_many(0): an empty batch of the right shape
        out = tuple(np.empty((0,) + sh, d) for sh, d in zip(q.shapes, q.dtypes))
    else:
        out = tuple(np.stack([it[i] for it in items]) for i in range(len(component_types)))
    return out if len(out) > 1 else out[0]


@stateful_kernel("QueueClose")
def queue_close(rctx, handle, *, xp, cancel_pending_enqueues):
    _queue(rctx, handle).close(bool(cancel_pending_enqueues))


@stateful_kernel("QueueSize")
def queue_size(rctx, handle, *, xp):
    return np.asarray(len(_queue(rctx, handle).items), dtype=np.int64)


class FIFOQueue:
    """A first-in first-out queue of tuples of tensors with the given dtypes (and optional shapes)."""

    op_type = "FIFOQueue"

    def __init__(self, capacity: int, dtypes, shapes=None, name: str = "fifo_queue", **extra):
        g = get_default_graph()
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.shapes = [tuple(s) for s in shapes] if shapes is not None else None
        attrs = {"component_types": [d.name for d in self.dtypes], "capacity": capacity,
                 "shapes": [json.dumps(list(s)) for s in self.shapes] if self.shapes else [], **extra}
        self.node = g.create_op(self.op_type, [], attrs, domain=TRAINER_DOMAIN, name=name)
        self.node.attrs["shared_name"] = self.node.name
        self.handle = self.node.outputs[0]
        self.graph = g

    def _op(self, op_type, inputs, n_out=1, name=None, attrs=None):
        g = self.graph
        with g.as_default():
            ins = [self.handle] + [convert_to_tensor(x, dtype=d) for x, d in inputs]
            return g.create_op(op_type, ins, attrs or {}, domain=TRAINER_DOMAIN, num_outputs=n_out,
                               name=name or f"{self.node.name}/{op_type}")

    def enqueue(self, vals, name=None):
        vals = vals if isinstance(vals, (list, tuple)) else [vals]
        return self._op("QueueEnqueue", list(zip(vals, self.dtypes)), name=name)

    def enqueue_many(self, vals, name=None):
        vals = vals if isinstance(vals, (list, tuple)) else [vals]
        return self._op("QueueEnqueueMany", list(zip(vals, self.dtypes)), name=name)

    def _typed(self, node, batch):
        from schemas.registry import TensorType

        for i, t in enumerate(node.outputs):
            shape = self.shapes[i] if self.shapes else None
            if shape is not None and batch:
                shape = (None,) + shape
            t.type = TensorType(self.dtypes[i], shape)
        outs = node.outputs
        return outs if len(outs) > 1 else outs[0]

    def dequeue(self, name=None):
        node = self._op("QueueDequeue", [], n_out=len(self.dtypes), name=name,
                        attrs={"component_types": [d.name for d in self.dtypes]})
        return self._typed(node, False)

    def dequeue_many(self, n, name=None):
        with self.graph.as_default():
            n_t = constant(np.asarray(n, np.int64))
        g = self.graph
        node = g.create_op("QueueDequeueMany", [self.handle, n_t], {"component_types": [d.name for d in self.dtypes]},
                           domain=TRAINER_DOMAIN, num_outputs=len(self.dtypes), name=name or f"{self.node.name}/DequeueMany")
        return self._typed(node, True)

    def close(self, cancel_pending_enqueues: bool = False, name=None):
        """Close the queue: later enqueues fail, dequeues drain what is left then raise
        OutOfRangeError. Enqueues already blocked on a full queue still complete unless
        ``cancel_pending_enqueues``."""
        return self._op("QueueClose", [], name=name,
                        attrs={"cancel_pending_enqueues": int(bool(cancel_pending_enqueues))})

    def size(self, name=None):
        return self._op("QueueSize", [], name=name).outputs[0]


class RandomShuffleQueue(FIFOQueue):
    """Dequeues a uniformly random element, keeping at least ``min_after_dequeue`` until closed."""

    op_type = "RandomShuffleQueue"

    def __init__(self, capacity, min_after_dequeue, dtypes, shapes=None, seed=0, name="random_shuffle_queue"):
        super().__init__(capacity, dtypes, shapes, name=name, min_after_dequeue=min_after_dequeue, seed=seed)


class QueueRunner:
    """Threads that run ``enqueue_ops`` until the input runs out (then close the queue) or ``stop``."""

    def __init__(self, queue: FIFOQueue, enqueue_ops, feed_fn=None):
        self.queue = queue
        self.enqueue_ops = list(enqueue_ops)
        self.feed_fn = feed_fn  # optional: () -> feed_dict per run; raising StopIteration ends the input
        self.close_op = queue.close()
        self.cancel_op = queue.close(cancel_pending_enqueues=True)  # on stop: wake blocked enqueues
        self.threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        queue.graph.add_to_collection(GraphKeys.QUEUE_RUNNERS, self)

    def create_threads(self, sess, coord=None, start=True):
        coord = coord or Coordinator()
        remaining = [len(self.enqueue_ops)]
        lock = threading.Lock()

        def loop(op):
            try:
                while not coord.should_stop():
                    feed = self.feed_fn() if self.feed_fn else None
                    sess.run(op, feed)
            except (StopIteration, OutOfRangeError):
                pass
            except Exception as e:  # noqa: BLE001 - reported through the coordinator
                if not coord.should_stop():
                    self.errors.append(e)
                    coord.request_stop(e)
            finally:
                with lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    try:
                        sess.run(self.close_op)
                    except Exception:  # noqa: BLE001 - session already closed
                        pass

        self.threads = [threading.Thread(target=loop, args=(op,), daemon=True) for op in self.enqueue_ops]
        coord.on_stop(lambda: _quietly(sess.run, self.cancel_op))
        for t in self.threads:
            coord.register_thread(t)
            if start:
                t.start()
        return self.threads


def _quietly(fn, *args):
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - closing an already closed queue or session
        pass


class Coordinator:
    """Lets threads ask each other to stop, and joins them (closing their queues to wake them)."""

    def __init__(self):
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._on_stop: list = []
        self.exception: BaseException | None = None

    def on_stop(self, fn) -> None:
        self._on_stop.append(fn)

    def should_stop(self) -> bool:
        return self._stop.is_set()

    def request_stop(self, exception=None) -> None:
        """Ask every thread to stop; the first ``exception`` is re-raised by ``join``. An
        OutOfRangeError (input exhausted) is a clean stop, as in TensorFlow, not a failure."""
        if exception is not None and self.exception is None and not isinstance(exception, OutOfRangeError):
            self.exception = exception
        self._stop.set()

    def register_thread(self, t) -> None:
        self._threads.append(t)

    def join(self, threads=None, stop_grace_period_secs: float | None = None, timeout: float | None = None) -> None:
        """Stop, wait up to ``timeout`` seconds in all for the threads, then re-raise the first
        reported error; a thread still running after that raises RuntimeError naming it.

        TensorFlow 1.x's ``join(threads, stop_grace_period_secs)`` works too: the listed threads are
        waited for besides the registered ones; ``join(5)`` is ``join(timeout=5)``."""
        if isinstance(threads, (int, float)):
            threads, timeout = None, threads
        timeout = timeout if timeout is not None else (stop_grace_period_secs if stop_grace_period_secs is not None
                                                       else 10.0)
        self._stop.set()
        for fn in self._on_stop:
            fn()
        deadline = time.monotonic() + timeout
        waited = list(self._threads) + [t for t in threads or () if t not in self._threads]
        for t in waited:
            if t.ident is not None:  # created with start=False and never started: nothing to wait for
                t.join(max(0.0, deadline - time.monotonic()))
        if self.exception is not None:
            raise self.exception
        stuck = [t.name for t in waited if t.is_alive()]
        if stuck:
            raise RuntimeError(f"Coordinator stopped with threads still running after {timeout}s: {stuck}")


def start_queue_runners(sess, coord=None):
    """Start every QueueRunner of the session's graph. Returns the Coordinator to join when none was
    given; given one (TensorFlow 1.x's ``start_queue_runners(sess, coord)``), returns the threads
    started, as TensorFlow does."""
    given = coord is not None
    coord = coord or Coordinator()
    threads = []
    for qr in sess.graph.get_collection(GraphKeys.QUEUE_RUNNERS):
        threads.extend(qr.create_threads(sess, coord))
    return threads if given else coord
