"""prefetch runs its producer inline while elements are cheap and on its thread once they cost more
than a hand-off; either way the elements, their order and the pipeline's errors are the same."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import trainer as tf
from trainer.data.prefetch import THREAD_WORTH_S, WINDOW

PRODUCER = "flowstack-data-prefetch"


def drain(dataset):
    with tf.Graph().as_default() as g, tf.Session(g) as sess:
        nxt = dataset.make_one_shot_iterator().get_next()
        out = []
        for _ in range(1000):
            try:
                out.append(int(sess.run(nxt)))
            except tf.errors.OutOfRangeError:
                return out
    raise AssertionError("the iterator did not end")


def recording(n, cost_s):
    """A generator of range(n) that notes which thread made each element; ``cost_s(i)`` seconds each."""
    makers = []

    def gen():
        for i in range(n):
            makers.append(threading.current_thread().name)
            if cost_s(i):
                time.sleep(cost_s(i))
            yield i

    return gen, makers


def test_cheap_elements_are_made_in_the_consumers_thread():
    gen, makers = recording(40, lambda i: 0)
    assert drain(tf.data.Dataset.from_generator(gen, np.int64).prefetch(4)) == list(range(40))
    assert PRODUCER not in makers


def test_costly_elements_move_to_the_thread_and_back_when_cheap():
    slow = 8 * THREAD_WORTH_S
    gen, makers = recording(6 * WINDOW, lambda i: slow if i < 3 * WINDOW else 0)
    assert drain(tf.data.Dataset.from_generator(gen, np.int64).prefetch(2)) == list(range(6 * WINDOW))
    assert PRODUCER not in makers[:WINDOW]  # the first window measures, inline
    assert set(makers[WINDOW + 1:3 * WINDOW]) == {PRODUCER}
    assert PRODUCER not in makers[-WINDOW:]  # cheap again: a window on the thread, then inline


def test_leaving_while_the_thread_makes_an_element_closes_the_source():
    closed = threading.Event()

    def gen():
        try:
            for i in range(1000):
                time.sleep(8 * THREAD_WORTH_S)
                yield np.int64(i)
        finally:
            closed.set()

    elements = tf.data.Dataset.from_generator(gen, np.int64).prefetch(2).start({})
    got = [int(next(elements)[0]) for _ in range(3 * WINDOW)]
    elements.close()
    assert got == list(range(3 * WINDOW))
    assert closed.wait(5)


def test_the_producers_error_reaches_get_next_from_the_thread():
    def gen():
        for i in range(3 * WINDOW):
            time.sleep(8 * THREAD_WORTH_S)
            yield i
        raise RuntimeError("sensor unplugged")

    with pytest.raises(tf.errors.OpError, match="sensor unplugged"):
        drain(tf.data.Dataset.from_generator(gen, np.int64).prefetch(2))
