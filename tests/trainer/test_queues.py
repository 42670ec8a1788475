"""Queues and their runners as TensorFlow 1.x defines them: shapes checked on enqueue, close and
cancel, OutOfRange at the end, and a Coordinator that stops every thread.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import trainer as T


def _queue_graph(capacity=4, shapes=((2,), ())):
    g = T.Graph()
    with g.as_default():
        q = T.FIFOQueue(capacity, [np.float32, np.int64], shapes=list(shapes))
        xs = T.placeholder(np.float32, None, name="xs")
        ys = T.placeholder(np.int64, None, name="ys")
        ops = {"enq": q.enqueue([xs, ys]), "enq_many": q.enqueue_many([xs, ys]), "deq": q.dequeue(),
               "deq3": q.dequeue_many(3), "deq0": q.dequeue_many(0), "close": q.close(),
               "cancel": q.close(cancel_pending_enqueues=True), "size": q.size()}
    return T.Session(g), xs, ys, ops


def test_enqueue_of_wrong_shape_is_rejected_before_it_enters_the_queue():
    s, xs, ys, ops = _queue_graph()
    with pytest.raises(Exception, match=r"component 0: expected shape \(2,\), got \(3,\)"):
        s.run(ops["enq"], {xs: np.zeros(3, np.float32), ys: 1})
    with pytest.raises(Exception, match="same leading"):
        s.run(ops["enq_many"], {xs: np.zeros((2, 2), np.float32), ys: np.zeros(3, np.int64)})
    assert s.run(ops["size"]) == 0
    s.run(ops["enq_many"], {xs: np.ones((3, 2), np.float32), ys: np.arange(3)})
    out_x, out_y = s.run(ops["deq3"])
    assert out_x.shape == (3, 2) and out_y.tolist() == [0, 1, 2]


def test_dequeue_many_zero_gives_an_empty_batch():
    s, _, _, ops = _queue_graph()
    out_x, out_y = s.run(ops["deq0"])
    assert out_x.shape == (0, 2) and out_x.dtype == np.float32 and out_y.shape == (0,) and out_y.dtype == np.int64


def test_dequeue_many_on_closed_queue_with_fewer_elements_is_out_of_range():
    s, xs, ys, ops = _queue_graph()
    s.run(ops["enq_many"], {xs: np.ones((2, 2), np.float32), ys: np.arange(2)})
    s.run(ops["close"])
    with pytest.raises(T.OutOfRangeError, match="needed 3"):
        s.run(ops["deq3"])
    assert [int(s.run(ops["deq"])[1]) for _ in range(2)] == [0, 1]  # nothing was lost
    with pytest.raises(T.OutOfRangeError):
        s.run(ops["deq"])
    with pytest.raises(Exception, match="closed"):
        s.run(ops["enq"], {xs: np.zeros(2, np.float32), ys: 5})


def _blocked_enqueue(s, ops, xs, ys):
    s.run(ops["enq"], {xs: np.zeros(2, np.float32), ys: 0})  # fills the capacity-1 queue
    errors = []

    def producer():
        try:
            s.run(ops["enq"], {xs: np.ones(2, np.float32), ys: 1})
        except Exception as e:  # noqa: BLE001 - inspected by the test
            errors.append(e)

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    (queue,) = s.state.resources.values()
    deadline = time.monotonic() + 5
    while not queue.waiting_puts and time.monotonic() < deadline:  # until the producer waits for room
        time.sleep(0.01)
    assert queue.waiting_puts == 1
    return t, errors


def test_close_lets_pending_enqueues_finish():
    s, xs, ys, ops = _queue_graph(capacity=1)
    t, errors = _blocked_enqueue(s, ops, xs, ys)
    s.run(ops["close"])
    assert [int(s.run(ops["deq"])[1]) for _ in range(2)] == [0, 1]
    t.join(5)
    assert not t.is_alive() and not errors
    with pytest.raises(T.OutOfRangeError):
        s.run(ops["deq"])


def test_close_with_cancel_pending_enqueues_cancels_them():
    s, xs, ys, ops = _queue_graph(capacity=1)
    t, errors = _blocked_enqueue(s, ops, xs, ys)
    s.run(ops["cancel"])
    t.join(5)
    assert not t.is_alive() and len(errors) == 1 and "cancel" in str(errors[0])
    assert int(s.run(ops["deq"])[1]) == 0
    with pytest.raises(T.OutOfRangeError):
        s.run(ops["deq"])


def test_coordinator_join_wakes_runner_blocked_on_a_full_queue():
    g = T.Graph()
    with g.as_default():
        q = T.FIFOQueue(2, [np.float32], shapes=[()])
        runner = T.QueueRunner(q, [q.enqueue([T.constant(np.float32(1))])])
    s = T.Session(g)
    coord = T.Coordinator()
    threads = runner.create_threads(s, coord)
    time.sleep(0.2)
    start = time.monotonic()
    coord.join(5)
    assert time.monotonic() - start < 3 and not any(t.is_alive() for t in threads)


def test_coordinator_treats_out_of_range_as_a_clean_stop():
    coord = T.Coordinator()
    coord.request_stop(T.OutOfRangeError("input exhausted"))
    assert coord.should_stop()
    coord.join(1)  # no exception: running out of input is how an epoch ends


def test_coordinator_join_reports_threads_that_do_not_stop():
    coord = T.Coordinator()
    release = threading.Event()
    t = threading.Thread(target=release.wait, args=(5,), name="stuck-reader", daemon=True)
    coord.register_thread(t)
    t.start()
    try:
        with pytest.raises(RuntimeError, match="stuck-reader"):
            coord.join(0.2)
    finally:
        release.set()
        t.join(5)


def test_queue_runner_error_stops_coordinator_and_closes_queue():
    g = T.Graph()
    with g.as_default():
        q = T.FIFOQueue(2, [np.float32], shapes=[()])
        p = T.placeholder(np.float32, (), name="never_fed")
        runner = T.QueueRunner(q, [q.enqueue([p])])
        deq = q.dequeue()
    s = T.Session(g)
    coord = T.Coordinator()
    runner.create_threads(s, coord)
    deadline = time.monotonic() + 5
    while not any(q.closed for q in s.state.resources.values()) and time.monotonic() < deadline:
        time.sleep(0.01)
    # checked first: on an open queue the dequeue below would block
    assert coord.should_stop() and any(q.closed for q in s.state.resources.values())
    with pytest.raises(T.OutOfRangeError):
        s.run(deq)  # the failing runner closed the queue, so the consumer is not stuck
    with pytest.raises(Exception, match="must be fed"):
        coord.join(5)


def test_random_shuffle_queue_is_a_permutation_and_drains_on_close():
    g = T.Graph()
    with g.as_default():
        q = T.RandomShuffleQueue(20, 5, [np.int64], shapes=[()], seed=3)
        vals = T.placeholder(np.int64, (None,), name="vals")
        enq, deq, close = q.enqueue_many([vals]), q.dequeue(), q.close()
    s = T.Session(g)
    s.run(enq, {vals: np.arange(10)})
    s.run(close)
    out = []
    with pytest.raises(T.OutOfRangeError):
        while True:
            out.append(int(s.run(deq)))
    assert sorted(out) == list(range(10))
