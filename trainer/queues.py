"""Queues and queue runners: input pipelines that run concurrently with training.

A queue is session state (a ``QueueBuffer``, created on first use by its handle op's kernel in
``trainer/kernels/training.py``) shared by every step that
touches it: a reader subgraph enqueues on QueueRunner threads while the training subgraph
dequeues batches. Closing a queue lets consumers drain it, then dequeue raises OutOfRangeError,
the normal end of an epoch loop.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np

from schemas.registry import TensorType
from trainer.errors import OutOfRangeError
from trainer.graph import TRAINER_DOMAIN, GraphKeys, get_default_graph
from trainer.ops import constant, convert_to_tensor

__all__ = ["Coordinator", "FIFOQueue", "PaddingFIFOQueue", "PriorityQueue", "QueueBase", "QueueRunner",
           "RandomShuffleQueue", "start_queue_runners"]


class QueueBase:
    """What every queue does, given its handle (``queue_ref``): enqueue, dequeue, close, size.

    ``QueueBase.from_list(index, queues)`` is the queue among ``queues`` that ``index`` picks when
    the step runs (a handle is the queue's shared name, so picking one is a gather).
    """

    def __init__(self, dtypes, shapes, names, queue_ref):
        if names is not None:
            raise ValueError("QueueBase: named components (names=) are not supported; pass tuples of tensors")
        self.dtypes = [np.dtype(d) for d in dtypes]
        self.shapes = [tuple(s) for s in shapes] if shapes is not None else None
        self.names = None
        self.handle = queue_ref
        self.node = queue_ref.node
        self.graph = queue_ref.graph

    @property
    def queue_ref(self):
        return self.handle

    @property
    def name(self) -> str:
        return self.node.name

    @staticmethod
    def from_list(index, queues) -> QueueBase:
        """The queue of ``queues`` (same dtypes) at ``index``, chosen when the step runs."""
        from trainer.array_ops import stack
        from trainer.ops import gather

        queues = list(queues)
        if not queues or not all(isinstance(q, QueueBase) for q in queues):
            raise TypeError("QueueBase.from_list: queues must be a non-empty list of queues")
        for i, q in enumerate(queues[1:], start=1):
            if q.dtypes != queues[0].dtypes:
                raise TypeError(f"QueueBase.from_list: queue {i} has dtypes {[d.name for d in q.dtypes]}, queue 0 "
                                f"has {[d.name for d in queues[0].dtypes]}")
        shapes = queues[0].shapes if all(q.shapes == queues[0].shapes for q in queues) else None
        with queues[0].graph.as_default():
            handle = gather(stack([q.handle for q in queues]), convert_to_tensor(index))
        return QueueBase(queues[0].dtypes, shapes, None, handle)

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

    def _typed(self, node, outer: tuple):
        """Type the outputs: ``outer`` dims (``()`` for one element, ``(n,)`` for a batch) + each shape."""
        for i, t in enumerate(node.outputs):
            shape = self.shapes[i] if self.shapes else None
            t.type = TensorType(self.dtypes[i], None if shape is None else tuple(outer) + shape)
        outs = node.outputs
        return outs if len(outs) > 1 else outs[0]

    def dequeue(self, name=None, timeout: float | None = None):
        """One element; with ``timeout`` (seconds) a wait past it raises DeadlineExceededError."""
        attrs = {"component_types": [d.name for d in self.dtypes]}
        if timeout is not None:
            attrs["timeout_ms"] = max(0, int(timeout * 1000))
        node = self._op("QueueDequeue", [], n_out=len(self.dtypes), name=name, attrs=attrs)
        return self._typed(node, ())

    def dequeue_many(self, n, name=None):
        with self.graph.as_default():
            n_t = constant(np.asarray(n, np.int64))
        g = self.graph
        node = g.create_op("QueueDequeueMany", [self.handle, n_t], {"component_types": [d.name for d in self.dtypes]},
                           domain=TRAINER_DOMAIN, num_outputs=len(self.dtypes), name=name or f"{self.node.name}/DequeueMany")
        # A batch size known when the graph is built is the batch's static first dimension, as in
        # TensorFlow (the CIFAR-10 tutorial reshapes to [images.get_shape()[0], -1]).
        return self._typed(node, (int(n) if isinstance(n, (int, np.integer)) else None,))

    def close(self, cancel_pending_enqueues: bool = False, name=None):
        """Close the queue: later enqueues fail, dequeues drain what is left then raise
        OutOfRangeError. Enqueues already blocked on a full queue still complete unless
        ``cancel_pending_enqueues``."""
        return self._op("QueueClose", [], name=name,
                        attrs={"cancel_pending_enqueues": int(bool(cancel_pending_enqueues))})

    def size(self, name=None):
        return self._op("QueueSize", [], name=name).outputs[0]


class FIFOQueue(QueueBase):
    """A first-in first-out queue of tuples of tensors with the given dtypes (and optional shapes)."""

    op_type = "FIFOQueue"

    def __init__(self, capacity: int, dtypes, shapes=None, name: str = "fifo_queue", **extra):
        g = get_default_graph()
        if not isinstance(dtypes, (list, tuple)):  # FIFOQueue(10, tf.float32): one component, as in TF
            dtypes = [dtypes]
        if shapes is not None and all(d is None or isinstance(d, (int, np.integer)) for d in shapes):
            shapes = [shapes]  # one shape given bare ([2], not [[2]])
        dtypes = [np.dtype(d) for d in dtypes]
        shapes = [tuple(s) for s in shapes] if shapes is not None else None
        attrs = {"component_types": [d.name for d in dtypes], "capacity": capacity,
                 "shapes": [json.dumps(list(s)) for s in shapes] if shapes else [], **extra}
        node = g.create_op(self.op_type, [], attrs, domain=TRAINER_DOMAIN, name=name)
        node.attrs["shared_name"] = node.name
        super().__init__(dtypes, shapes, None, node.outputs[0])


class PaddingFIFOQueue(FIFOQueue):
    """A FIFO queue whose ``shapes`` may leave dimensions unknown (None): ``dequeue_many`` pads
    each component to the batch's largest size along them, with zeros (empty strings)."""

    op_type = "PaddingFIFOQueue"

    def __init__(self, capacity: int, dtypes, shapes, names=None, shared_name=None,
                 name: str = "padding_fifo_queue"):
        if shapes is None or len(shapes) != len(dtypes):
            raise ValueError(f"PaddingFIFOQueue: shapes must give one shape per dtype ({len(dtypes)}), got {shapes}")
        if names is not None:
            raise ValueError("PaddingFIFOQueue: named components (names=) are not supported")
        super().__init__(capacity, dtypes, [tuple(None if d is None or d == -1 else int(d) for d in _dims(s))
                                            for s in shapes], name=name)


class PriorityQueue(FIFOQueue):
    """Elements leave smallest priority first: each element is ``(priority, *components)`` with an
    int64 scalar priority (dequeues give it back as component 0); equal priorities leave in
    arrival order."""

    op_type = "PriorityQueue"

    def __init__(self, capacity: int, types, shapes=None, names=None, shared_name=None,
                 name: str = "priority_queue"):
        if names is not None:
            raise ValueError("PriorityQueue: named components (names=) are not supported")
        if shapes is not None and len(shapes) != len(types):
            raise ValueError(f"PriorityQueue: shapes must give one shape per type ({len(types)}), got {shapes}")
        super().__init__(capacity, [np.int64, *types], None if shapes is None else [(), *shapes], name=name)


def _dims(shape) -> list:
    dims = getattr(shape, "dims", shape)
    return [getattr(d, "value", d) for d in dims]


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

    @classmethod
    def from_graph(cls, graph, queue: str, enqueue_ops, close_op: str, cancel_op: str) -> "QueueRunner":
        """The runner a meta graph describes, over ops already in ``graph`` (named as written), not
        added to QUEUE_RUNNERS: the meta graph's import files it where it was."""
        node = graph.node(queue)
        shapes = node.attrs.get("shapes") or []
        runner = cls.__new__(cls)
        runner.queue = QueueBase(node.attrs["component_types"], [json.loads(s) for s in shapes] or None, None,
                                 node.outputs[0])
        runner.enqueue_ops = [graph.node(name) for name in enqueue_ops]
        runner.feed_fn = None
        runner.close_op, runner.cancel_op = graph.node(close_op), graph.node(cancel_op)
        runner.threads, runner.errors = [], []
        return runner

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

    def wait_for_stop(self, timeout: float | None = None) -> bool:
        """Wait until a stop is requested (at most ``timeout`` seconds); whether one was."""
        return self._stop.wait(timeout)

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
