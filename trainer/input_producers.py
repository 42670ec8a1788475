"""``tf.train``'s queue-based input pipelines: producers and batchers over FIFO/shuffle queues.

``slice_input_producer`` hands out one example at a time from in-memory tensors (each epoch in a
fresh random order when ``shuffle``), ``batch`` and ``shuffle_batch`` group examples into batches;
each adds a QueueRunner, so ``start_queue_runners`` starts the threads that fill the queues, and
after ``num_epochs`` the queues close and the consumer sees ``OutOfRangeError``, as in TensorFlow.
``num_epochs`` is counted by a local variable (``limit_epochs``), so ``local_variables_initializer()``
must run first, as in TensorFlow. ``string_input_producer`` is the queue of file names a reader
(trainer/readers.py) reads; ``batch_join`` and ``shuffle_batch_join`` batch from several readers.
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import boolean_mask, expand_dims
from trainer.array_ops import range as range_op
from trainer.graph import GraphKeys, Tensor, get_default_graph
from trainer.io_ops import matching_files
from trainer.ops import cast, convert_to_tensor, gather, identity, reshape
from trainer.queues import FIFOQueue, PaddingFIFOQueue, QueueRunner, RandomShuffleQueue
from trainer.random_ops import random_shuffle
from trainer.variables import Variable

__all__ = ["add_queue_runner", "batch", "batch_join", "input_producer", "limit_epochs", "match_filenames_once",
           "maybe_batch", "maybe_shuffle_batch", "range_input_producer", "shuffle_batch", "shuffle_batch_join",
           "slice_input_producer", "string_input_producer"]


def limit_epochs(tensor, num_epochs: int | None = None, name: str | None = None) -> Tensor:
    """``tensor``, which raises OutOfRangeError once it has been computed ``num_epochs`` times.

    The count is a local variable (``<name>/epochs``): run ``local_variables_initializer()`` first.
    """
    t = convert_to_tensor(tensor)
    if num_epochs is None:
        return t
    if int(num_epochs) <= 0:
        raise ValueError(f"limit_epochs: num_epochs must be positive (or None for no limit), got {num_epochs}")
    g = t.graph
    with g.as_default(), g.name_scope(name or "limit_epochs"):
        epochs = Variable(np.zeros((), np.int64), trainable=False, name="epochs",
                          collections=[GraphKeys.LOCAL_VARIABLES])
        with g.control_dependencies([epochs.count_up_to(int(num_epochs))]):
            return identity(t)


def add_queue_runner(qr: QueueRunner, collection: str = GraphKeys.QUEUE_RUNNERS) -> None:
    """Add ``qr`` to the graph's queue runners (a QueueRunner adds itself when built; this is for
    another collection, or a runner removed from it)."""
    runners = get_default_graph().get_collection_ref(collection)
    if qr not in runners:
        runners.append(qr)


def input_producer(input_tensor, element_shape=None, num_epochs=None, shuffle: bool = True, seed=None,
                   capacity: int = 32, shared_name=None, summary_name=None, name=None, cancel_op=None) -> FIFOQueue:
    """A queue that holds the rows of ``input_tensor``, enqueued whole once per epoch."""
    x = convert_to_tensor(input_tensor)
    name = name or "input_producer"
    rows = limit_epochs(random_shuffle(x, seed=seed) if shuffle else x, num_epochs, name=f"{name}/limit_epochs")
    shape = tuple(element_shape) if element_shape is not None else tuple(x.shape[1:])
    queue = FIFOQueue(capacity, [x.dtype], [shape], name=name)
    QueueRunner(queue, [queue.enqueue_many([rows])])
    return queue


def string_input_producer(string_tensor, num_epochs=None, shuffle: bool = True, seed=None, capacity: int = 32,
                          shared_name=None, name=None, cancel_op=None) -> FIFOQueue:
    """A queue of the file names in ``string_tensor`` (each epoch in a fresh order when ``shuffle``),
    for a reader to ``read``; after ``num_epochs`` the queue closes."""
    names = convert_to_tensor(string_tensor if isinstance(string_tensor, Tensor)
                              else np.asarray(list(string_tensor), dtype=object))
    if names.shape is not None and len(names.shape) != 1:
        raise ValueError(f"string_input_producer: string_tensor must be a 1-D list of file names, got shape "
                         f"{names.shape}")
    if names.shape is not None and names.shape[0] == 0:
        raise ValueError("string_input_producer: string_tensor is empty; no file names to read")
    return input_producer(names, (), num_epochs, shuffle, seed, capacity, name=name or "input_producer")


def match_filenames_once(pattern, name=None) -> Tensor:
    """The names of the files matching ``pattern``, kept in a local variable that
    ``local_variables_initializer()`` sets (once), as TensorFlow does."""
    g = get_default_graph()
    with g.name_scope(name or "matching_filenames"):
        found = Variable(matching_files(pattern), trainable=False, name="matching_filenames",
                         collections=[GraphKeys.LOCAL_VARIABLES], validate_shape=False)
    return found.as_tensor()


def range_input_producer(limit, num_epochs=None, shuffle: bool = True, seed=None, capacity: int = 32,
                         shared_name=None, name=None) -> FIFOQueue:
    """A queue of the integers 0 .. limit-1 (int32), each epoch; ``limit`` may be a scalar tensor
    (the PTB tutorial's epoch size, computed from the data)."""
    if isinstance(limit, Tensor):
        values = range_op(cast(limit, np.int32), dtype=np.int32)
    else:
        values = np.arange(limit, dtype=np.int32)
    return input_producer(values, (), num_epochs, shuffle, seed, capacity, name=name or "range_input_producer")


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


def _kept(flat: list[Tensor], keep_input, enqueue_many: bool) -> list[Tensor]:
    """The rows of ``flat`` that ``keep_input`` (a scalar, or a vector over the rows) keeps."""
    keep = convert_to_tensor(keep_input)
    rows = flat if enqueue_many else [expand_dims(t, 0) for t in flat]
    mask = keep if enqueue_many else reshape(keep, [1])
    return [boolean_mask(t, mask) for t in rows]


def _batcher(queue_factory, tensors_list, batch_size, threads_per_input, enqueue_many, shapes,
             allow_smaller_final_batch, dynamic_pad=False, keep_input=None):
    """Batches from one queue that ``threads_per_input`` threads per entry of ``tensors_list`` fill
    (with only the examples ``keep_input`` keeps, when given)."""
    if allow_smaller_final_batch:
        raise ValueError("batch: allow_smaller_final_batch is not supported")
    flats = []
    for tensors in tensors_list:
        flat, rebuild = _structure(tensors)
        flats.append([convert_to_tensor(t) for t in flat])
    if not flats or any([t.dtype for t in f] != [t.dtype for t in flats[0]] for f in flats):
        raise ValueError(f"batch_join: every entry of tensors_list needs the same structure and dtypes, got "
                         f"{[[t.dtype for t in f] for f in flats]}")
    if shapes is None:
        shapes = [tuple(t.shape[1:]) if enqueue_many else tuple(t.shape) for t in flats[0]]
    if keep_input is not None:
        flats = [_kept(f, keep_input, enqueue_many) for f in flats]
        enqueue_many = True
    if any(s is None or (None in s and not dynamic_pad) for s in shapes):
        raise ValueError(f"batch: every example needs a static shape (pass shapes=, or dynamic_pad=True to pad "
                         f"unknown dimensions), got {shapes}")
    queue = queue_factory([t.dtype for t in flats[0]], [tuple(s) for s in shapes])
    enqueues = [queue.enqueue_many(f) if enqueue_many else queue.enqueue(f) for f in flats]
    QueueRunner(queue, enqueues * threads_per_input)
    outs = queue.dequeue_many(batch_size)
    return rebuild(outs if isinstance(outs, list) else [outs])


def _fifo(dynamic_pad: bool) -> type:
    """The queue a FIFO batcher uses: with ``dynamic_pad``, one that pads each batch to its
    longest example along the unknown dimensions (PaddingFIFOQueue), as TF's does."""
    return PaddingFIFOQueue if dynamic_pad else FIFOQueue


def batch(tensors, batch_size: int, num_threads: int = 1, capacity: int = 32, enqueue_many: bool = False,
          shapes=None, dynamic_pad: bool = False, allow_smaller_final_batch: bool = False, shared_name=None,
          name=None):
    """Batches of ``batch_size`` examples, in order, from a FIFO queue filled by ``num_threads`` threads."""
    return _batcher(lambda dtypes, shp: _fifo(dynamic_pad)(capacity, dtypes, shp, name=name or "batch/fifo_queue"),
                    [tensors], batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch, dynamic_pad)


def batch_join(tensors_list, batch_size: int, capacity: int = 32, enqueue_many: bool = False, shapes=None,
               dynamic_pad: bool = False, allow_smaller_final_batch: bool = False, shared_name=None, name=None):
    """Batches from a FIFO queue that one thread per entry of ``tensors_list`` (e.g. one reader each) fills."""
    return _batcher(lambda dtypes, shp: _fifo(dynamic_pad)(capacity, dtypes, shp, name=name or "batch_join/fifo_queue"),
                    list(tensors_list), batch_size, 1, enqueue_many, shapes, allow_smaller_final_batch, dynamic_pad)


def shuffle_batch(tensors, batch_size: int, capacity: int, min_after_dequeue: int, num_threads: int = 1, seed=None,
                  enqueue_many: bool = False, shapes=None, allow_smaller_final_batch: bool = False,
                  shared_name=None, name=None):
    """Batches drawn at random from a queue kept at least ``min_after_dequeue`` full."""
    return _batcher(lambda dtypes, shp: RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shp,
                                                           seed=seed or 0, name=name or "shuffle_batch/queue"),
                    [tensors], batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch)


def shuffle_batch_join(tensors_list, batch_size: int, capacity: int, min_after_dequeue: int, seed=None,
                       enqueue_many: bool = False, shapes=None, allow_smaller_final_batch: bool = False,
                       shared_name=None, name=None):
    """Random batches from a shuffling queue that one thread per entry of ``tensors_list`` fills."""
    return _batcher(lambda dtypes, shp: RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shp,
                                                           seed=seed or 0, name=name or "shuffle_batch_join/queue"),
                    list(tensors_list), batch_size, 1, enqueue_many, shapes, allow_smaller_final_batch)


def maybe_batch(tensors, keep_input, batch_size: int, num_threads: int = 1, capacity: int = 32,
                enqueue_many: bool = False, shapes=None, dynamic_pad: bool = False,
                allow_smaller_final_batch: bool = False, shared_name=None, name=None):
    """``batch`` of only the examples ``keep_input`` (a bool scalar, or vector with enqueue_many) keeps."""
    return _batcher(lambda dtypes, shp: _fifo(dynamic_pad)(capacity, dtypes, shp, name=name or "batch/fifo_queue"),
                    [tensors], batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch, dynamic_pad,
                    keep_input=keep_input)


def maybe_shuffle_batch(tensors, batch_size: int, capacity: int, min_after_dequeue: int, keep_input,
                        num_threads: int = 1, seed=None, enqueue_many: bool = False, shapes=None,
                        allow_smaller_final_batch: bool = False, shared_name=None, name=None):
    """``shuffle_batch`` of only the examples ``keep_input`` keeps."""
    return _batcher(lambda dtypes, shp: RandomShuffleQueue(capacity, min_after_dequeue, dtypes, shp,
                                                           seed=seed or 0, name=name or "shuffle_batch/queue"),
                    [tensors], batch_size, num_threads, enqueue_many, shapes, allow_smaller_final_batch,
                    keep_input=keep_input)
