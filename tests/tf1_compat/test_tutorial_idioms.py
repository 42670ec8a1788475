"""Idioms of TensorFlow 1.x's own tutorials (PTB language model, CIFAR-10 towers, word2vec) that
must run unchanged: TF1's name_scope signature, Python operators on tensors with TF's integer
semantics, slices bounded by tensors, shape idioms, and namedtuple fetches."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_name_scope_takes_a_default_name_and_values():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
    with tf.name_scope(None, "Producer", [x]) as scope:  # builds in x's graph, not the default one
        y = tf.identity(x, name="y")
    with g.as_default(), tf.name_scope("given", "Producer"):
        z = tf.identity(x, name="z")
    assert scope == "Producer/" and y.name == "Producer/y:0" and y.graph is g
    assert z.name == "given/z:0"


def test_operators_follow_tf_integer_semantics():
    a = tf.constant(np.array([7, -7], np.int32))
    b = tf.constant(np.array([2.5, -2.5], np.float32))
    with tf.Session() as sess:
        got = sess.run([a // 2, a % 3, 9 // a, a // -2, a % -3, b // 2, b % 2, 2 ** b, abs(a)])
        flags = sess.run([a <= 1, a >= 1, ~(a > 0), (a > 0) & (a < 10), (a > 0) | (a < -10), (a > 0) ^ (a < 10)])
    want = [[3, -4], [1, 2], [1, -2], [-4, 3], [-2, -1], [1.0, -2.0], [0.5, 1.5], 2 ** np.array([2.5, -2.5]), [7, 7]]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)
    assert got[0].dtype == np.int32  # integer division stays integer, rounding toward -inf as Python's
    assert [f.tolist() for f in flags] == [[False, True], [True, False], [False, True], [True, False],
                                           [True, False], [False, True]]


def test_slices_and_indices_bounded_by_tensors():
    x = tf.constant(np.arange(10))
    m = tf.constant(np.arange(12).reshape(3, 4))
    n = tf.size(x) // 3
    i = tf.placeholder(tf.int32, [])
    strided = tf.strided_slice(m, [0, i], [3, i + 2])
    with tf.Session() as sess:
        head, tail, last, row, column, part = sess.run([x[0:n], x[n:], x[i], m[i], m[:, i], strided], {i: -1})
        middle = sess.run(strided, {i: 1})
    assert head.tolist() == [0, 1, 2] and tail.tolist() == list(range(3, 10)) and int(last) == 9
    assert row.tolist() == [8, 9, 10, 11] and column.tolist() == [3, 7, 11] and part.shape == (3, 0)
    assert middle.tolist() == [[1, 2], [5, 6], [9, 10]]


def test_shape_idioms():
    x = tf.placeholder(tf.float32, [None, 8, 3])
    assert x.shape.as_list() == [None, 8, 3] and x.shape[-1].value == 3 and x.shape.ndims == 3
    assert x.get_shape()[1].value == 8 and x.get_shape()[0].value is None
    assert (x.get_shape()[1] * x.get_shape()[2]).value == 24 and (x.get_shape()[0] * 2).value is None
    flat = tf.reshape(x, [-1, x.get_shape()[1] * x.get_shape()[2]])
    assert flat.shape == (None, 24) and x.shape[1] + 1 == 9
    with pytest.raises(ValueError, match="not compatible"):
        x.get_shape()[1].merge_with(4)


def test_fetches_keep_their_namedtuple_structure_and_concat_takes_values():
    cell = tf.nn.rnn_cell.BasicLSTMCell(4)
    state = cell.zero_state(2, tf.float32)
    joined = tf.concat(axis=0, values=[tf.ones([1, 2]), tf.zeros([1, 2])])
    with tf.Session() as sess:
        value, both = sess.run([state, joined])
    assert type(value).__name__ == "LSTMStateTuple" and value.c.shape == (2, 4) and value.h.shape == (2, 4)
    assert both.tolist() == [[1, 1], [0, 0]]


def test_ptb_producer_feeds_a_static_rnn_language_model():
    """The PTB tutorial's reader and model, small: a tensor epoch size, range_input_producer over
    it, strided slices at a dequeued index, LSTM states fed back by namedtuple."""
    batch_size, num_steps, hidden, vocab = 4, 5, 8, 12
    raw = np.random.default_rng(0).integers(0, vocab, 400).astype(np.int32)
    with tf.Graph().as_default():
        tf.set_random_seed(0)
        with tf.name_scope(None, "PTBProducer", [raw]):
            data_t = tf.convert_to_tensor(raw, name="raw_data", dtype=tf.int32)
            batch_len = tf.size(data_t) // batch_size
            data = tf.reshape(data_t[0: batch_size * batch_len], [batch_size, batch_len])
            epoch_size = (batch_len - 1) // num_steps
            i = tf.train.range_input_producer(epoch_size, shuffle=False).dequeue()
            x = tf.strided_slice(data, [0, i * num_steps], [batch_size, (i + 1) * num_steps])
            x.set_shape([batch_size, num_steps])
            y = tf.strided_slice(data, [0, i * num_steps + 1], [batch_size, (i + 1) * num_steps + 1])
            y.set_shape([batch_size, num_steps])
        with tf.variable_scope("Model", initializer=tf.random_uniform_initializer(-0.1, 0.1)):
            cell = tf.contrib.rnn.MultiRNNCell([tf.contrib.rnn.BasicLSTMCell(hidden, forget_bias=0.0) for _ in range(2)])
            initial_state = cell.zero_state(batch_size, tf.float32)
            embedding = tf.get_variable("embedding", [vocab, hidden])
            inputs = tf.unstack(tf.nn.embedding_lookup(embedding, x), num=num_steps, axis=1)
            outputs, state = tf.contrib.rnn.static_rnn(cell, inputs, initial_state=initial_state)
            logits = tf.reshape(tf.layers.dense(tf.reshape(tf.concat(outputs, 1), [-1, hidden]), vocab),
                                [batch_size, num_steps, vocab])
            cost = tf.reduce_sum(tf.contrib.seq2seq.sequence_loss(logits, y, tf.ones([batch_size, num_steps]),
                                                                  average_across_timesteps=False))
            train = tf.train.GradientDescentOptimizer(1.0).minimize(cost)
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            coord = tf.train.Coordinator()
            threads = tf.train.start_queue_runners(sess, coord)
            state_v, first, firsts = sess.run(initial_state), None, []
            for step in range(40):
                feed = {}
                for layer, (c, h) in enumerate(initial_state):
                    feed[c], feed[h] = state_v[layer].c, state_v[layer].h
                vals = sess.run({"cost": cost, "state": state, "train": train, "x": x}, feed)
                state_v = vals["state"]
                firsts.append(vals["x"][0, 0])
                first = vals["cost"] if first is None else first
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=5)
    epoch = (len(raw) // batch_size - 1) // num_steps
    rows = raw[: batch_size * (len(raw) // batch_size)].reshape(batch_size, -1)
    assert [int(v) for v in firsts[:epoch]] == [int(rows[0, k * num_steps]) for k in range(epoch)]  # in order
    assert vals["cost"] < first  # it learns the sequence it sees again each epoch


def test_a_queue_of_one_component_takes_a_bare_dtype_and_shape():
    q = tf.FIFOQueue(3, tf.float32, shapes=[2])
    enqueue, batch = q.enqueue([[1.0, 2.0]]), q.dequeue_many(1)
    with tf.Session() as sess:
        sess.run(enqueue)
        assert sess.run(batch).tolist() == [[1.0, 2.0]] and batch.shape == (1, 2)
