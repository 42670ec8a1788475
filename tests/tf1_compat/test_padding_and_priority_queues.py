"""tf.PaddingFIFOQueue, tf.PriorityQueue, tf.QueueBase.from_list and tf.train.batch(dynamic_pad=True):
values checked against NumPy padding by hand and sorted() of what went in."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_padding_queue_pads_each_batch_to_its_longest_element():
    q = tf.PaddingFIFOQueue(10, [tf.int32, tf.string], shapes=[[None, 2], []])
    x, s = tf.placeholder(tf.int32, [None, 2]), tf.placeholder(tf.string, [])
    enqueue = q.enqueue([x, s])
    batch = q.dequeue_many(2)
    one = q.dequeue()
    assert batch[0].shape == (2, None, 2) and one[0].shape == (None, 2)
    rows = [np.ones((1, 2), np.int32), 2 * np.ones((3, 2), np.int32), 3 * np.ones((2, 2), np.int32)]
    with tf.Session() as sess:
        for r, word in zip(rows, ["a", "bb", "c"]):
            sess.run(enqueue, {x: r, s: word})
        ints, words = sess.run(batch)
        single, word = sess.run(one)
    expected = np.zeros((2, 3, 2), np.int32)
    expected[0, :1], expected[1, :3] = 1, 2
    assert ints.tolist() == expected.tolist() and words.tolist() == [b"a", b"bb"]
    assert single.tolist() == rows[2].tolist() and word == b"c"  # a single dequeue is not padded


def test_padding_queue_pads_strings_with_empty_strings_and_checks_shapes():
    q = tf.PaddingFIFOQueue(4, [tf.string], shapes=[[None]])
    x = tf.placeholder(tf.string, None)
    enqueue = q.enqueue([x])
    with tf.Session() as sess:
        sess.run(enqueue, {x: ["a", "b"]})
        sess.run(enqueue, {x: ["c"]})
        assert sess.run(q.dequeue_many(2)).tolist() == [[b"a", b"b"], [b"c", b""]]
        with pytest.raises(tf.errors.OpError, match=r"component 0: expected shape \(None,\), got \(1, 1\)"):
            sess.run(enqueue, {x: [["a"]]})
    with pytest.raises(ValueError, match="shapes must give one shape per dtype"):
        tf.PaddingFIFOQueue(4, [tf.string], shapes=None)


def test_priority_queue_dequeues_smallest_priority_first():
    q = tf.PriorityQueue(10, [tf.string], shapes=[[]])
    priority, value = tf.placeholder(tf.int64, []), tf.placeholder(tf.string, [])
    enqueue = q.enqueue([priority, value])
    batch = q.dequeue_many(4)
    pairs = [(5, "e"), (1, "a"), (3, "c1"), (3, "c2"), (-2, "z")]
    with tf.Session() as sess:
        for p, v in pairs:
            sess.run(enqueue, {priority: p, value: v})
        got_p, got_v = sess.run(batch)
        last = sess.run(q.dequeue())
    order = sorted(range(len(pairs)), key=lambda i: (pairs[i][0], i))  # ties leave in arrival order
    assert got_p.tolist() == [pairs[i][0] for i in order[:4]]
    assert got_v.tolist() == [pairs[i][1].encode() for i in order[:4]]
    assert last[0] == 5 and last[1] == b"e"


def test_priority_queue_rejects_a_non_scalar_priority():
    q = tf.PriorityQueue(4, [tf.float32], shapes=[[]])
    enqueue_many = q.enqueue_many([tf.constant([[1, 2]], tf.int64), tf.constant([0.5])])
    with tf.Session() as sess, pytest.raises(tf.errors.OpError, match="priority .* must be an int64 scalar"):
        sess.run(enqueue_many)


def test_queue_base_from_list_picks_a_queue_at_run_time():
    queues = [tf.FIFOQueue(4, [tf.int64], shapes=[[]]) for _ in range(3)]
    index = tf.placeholder(tf.int32, [])
    chosen = tf.QueueBase.from_list(index, queues)
    assert isinstance(chosen, tf.QueueBase) and chosen.queue_ref is chosen.handle
    value = tf.placeholder(tf.int64, [])
    enqueue = chosen.enqueue(value)
    with tf.Session() as sess:
        for i, v in [(2, 20), (0, 0), (2, 21)]:
            sess.run(enqueue, {index: i, value: v})
        assert [sess.run(q.size()) for q in queues] == [1, 0, 2]
        assert sess.run(chosen.dequeue_many(2), {index: 2}).tolist() == [20, 21]
    with pytest.raises(TypeError, match="queue 1 has dtypes"):
        tf.QueueBase.from_list(0, [queues[0], tf.FIFOQueue(2, [tf.float32])])


def test_a_tf1_script_batches_variable_length_sequences_with_dynamic_pad():
    lengths = [2, 4, 1, 3]
    table = np.arange(1, 17, dtype=np.int64).reshape(4, 4)
    index = tf.train.range_input_producer(4, shuffle=False).dequeue()
    length = tf.reshape(tf.gather(tf.constant(lengths), index), [1])
    sequence = tf.slice(tf.gather(tf.constant(table), index), [0], length)
    padded, length = tf.train.batch([sequence, tf.size(sequence)], batch_size=2, dynamic_pad=True)
    assert padded.shape == (2, None)
    with tf.Session() as sess:
        coord = tf.train.Coordinator()
        threads = tf.train.start_queue_runners(sess, coord)
        got = [sess.run([padded, length]) for _ in range(2)]
        coord.request_stop()
        coord.join(threads, timeout=10)
    for (batch, got_lengths), rows in zip(got, ([0, 1], [2, 3])):
        width = max(lengths[r] for r in rows)
        expected = [[*table[r, :lengths[r]], *[0] * (width - lengths[r])] for r in rows]
        assert batch.tolist() == expected and got_lengths.tolist() == [lengths[r] for r in rows]
