"""``tf.train``'s queue-based input pipelines: producers and batchers over FIFO/shuffle queues.

``slice_input_producer`` hands out one example at a time from in-memory tensors (each epoch in a
fresh random order when ``shuffle``), ``batch`` and ``shuffle_batch`` group examples into batches;
each adds a QueueRunner, so ``start_queue_runners`` starts the threads that fill the queues, and
after ``num_epochs`` the queues close and the consumer sees ``OutOfRangeError``, as in TensorFlow.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from trainer.graph import Tensor
from trainer.ops import convert_to_tensor, gather
from trainer.queues import FIFOQueue, QueueRunner, RandomShuffleQueue
from trainer.random_ops import random_shuffle

__all__ = ["batch", "input_producer", "range_input_producer", "shuffle_batch", "slice_input_producer"]


def _epoch_counter(num_epochs: int | None):
    """A QueueRunner feed_fn: None feeds, and StopIteration after ``num_epochs`` runs of the enqueue."""
    if num_epochs is None:
        return None
    counter = itertools.count()
    lock = threading.Lock()

    def next_epoch():
        with lock:
            if next(counter) >= num_epochs:
                raise StopIteration
        return None

    return next_epoch


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle: bool = True, seed=None,
                   capacity: int = 32, shared_name=None, summary_name=None, name=None, cancel_op=None) -> FIFOQueue:
    """A queue that holds the rows of ``input_tensor``, enqueued whole once per epoch."""
    x = convert_to_tensor(input_tensor)
    rows = random_shuffle(x, seed=seed) if shuffle else x
    queue = FIFOQueue(capacity, [x.dtype], [tuple(x.shape[1:])], name=name or "input_producer")
    QueueRunner(queue, [queue.enqueue_many([rows])], feed_fn=_epoch_counter(num_epochs))
    return queue


def range_input_producer(limit: int, num_epochs=None, shuffle: bool = True, seed=None, capacity: int = 32,
                         shared_name=None, name=None) -> FIFOQueue:
    """A queue of the integers 0 .. limit-1 (int32), each epoch."""
    return input_producer(np.arange(limit, dtype=np.int32), None, num_epochs, shuffle, seed, capacity,
                          name=name or "range_input_producer")


def slice_input_producer(tensor_list, num_epochs=None, shuffle: bool = True, seed=None, capacity: int = 32,
                         shared_name=None, name=None) -> list[Tensor]:
    """One row of every tensor in ``tensor_list`` per dequeue (the same row index for each)."""
    tensors = [convert_to_tensor(t) for t in tensor_list]
    n = tensors[0].shape[0]
    if n is None or any(t.shape[0] != n for t in tensors):
        raise ValueError(f"slice_input_producer: tensors need the same static first dimension, got "
                         f"{[t.shape for t in tensors]}")
    queue = range_input_producer(n, num_epochs, shuffle, seed, capacity, name=name or "slice_input_producer")
    index = queue.dequeue()
    return [gather(t, index, axis=0) for t in tensors]


def _structure(tensors):
    if isinstance(tensors, dict):
        keys = list(tensors)
        return [tensors[k] for k in keys], lambda outs: dict(zip(keys, outs))
    if isinstance(tensors, (list, tuple)):
        return list(tensors), lambda outs: list(outs)
    return [tensors], lambda outs: outs[0]


def _batcher(queue_factory, tensors, batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch,
             dynamic_pad=False):
    if allow_smaller_final_batch or dynamic_pad:
        raise ValueError("batch: allow_smaller_final_batch and dynamic_pad are not supported")
    flat, rebuild = _structure(tensors)
    flat = [convert_to_tensor(t) for t in flat]
    if shapes is None:
        shapes = [tuple(t.shape[1:]) if enqueue_many else tuple(t.shape) for t in flat]
    if any(s is None or None in s for s in shapes):
        raise ValueError(f"batch: every example needs a static shape (pass shapes=), got {shapes}")
    queue = queue_factory([t.dtype for t in flat], [tuple(s) for s in shapes])
    enqueue = queue.enqueue_many(flat) if enqueue_many else queue.enqueue(flat)
    QueueRunner(queue, [enqueue] * num_threads)
    outs = queue.dequeue_many(batch_size)
    return rebuild(outs if isinstance(outs, list) else [outs])


def batch(tensors, batch_size: int, num_threads: int = 1, capacity: int = 32, enqueue_many: bool = False,
          shapes=None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False, shared_name=None,
          name=None):
    """Batches of ``batch_size`` examples, in order, from a FIFO queue filled by ``num_threads`` threads."""
    return _batcher(lambda dtypes, shp: FIFOQueue(capacity, dtypes, shp, name=name or "batch/fifo_queue"),
                    tensors, batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch, dynamic_pad)


def shuffle_batch(tensors, batch_size: int, capacity: int, min_after_dequeue: int, num_threads: int = 1, seed=None,
                  enqueue_many: bool = False, shapes=None, allow_smaller_final_batch: bool = False,
                  shared_name=None, name=None):
    """Batches drawn at random from a queue kept at least ``min_after_dequeue`` full."""
    return _batcher(lambda dtypes, shp: RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shp,
                                                           seed=seed or 0, name=name or "shuffle_batch/queue"),
                    tensors, batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch)
