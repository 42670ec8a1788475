"""tf.nn.raw_rnn as TF 1.15 documents it: the documented loop_fn that emulates dynamic_rnn (values,
final state and gradients equal dynamic_rnn's with sequence lengths), a greedy decoder feeding back
its outputs with an explicit emit structure and a loop state, and bad loop_fns."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

MAX_TIME, BATCH, DEPTH, UNITS = 5, 3, 4, 6


def _documented_raw_rnn(cell, inputs, sequence_length):
    inputs_ta = tf.TensorArray(dtype=tf.float32, size=MAX_TIME).unstack(inputs)

    def loop_fn(time, cell_output, cell_state, loop_state):
        emit_output = cell_output  # None at time 0
        next_cell_state = cell.zero_state(BATCH, tf.float32) if cell_output is None else cell_state
        elements_finished = tf.greater_equal(time, sequence_length)
        finished = tf.reduce_all(elements_finished)
        next_input = tf.cond(finished, lambda: tf.zeros([BATCH, DEPTH], dtype=tf.float32),
                             lambda: inputs_ta.read(time))
        return elements_finished, next_input, next_cell_state, emit_output, None

    return tf.nn.raw_rnn(cell, loop_fn)


@pytest.mark.parametrize("make_cell", [lambda: tf.nn.rnn_cell.GRUCell(UNITS),
                                       lambda: tf.nn.rnn_cell.BasicLSTMCell(UNITS)])
def test_the_documented_loop_fn_is_dynamic_rnn(make_cell):
    inputs = tf.placeholder(tf.float32, (MAX_TIME, BATCH, DEPTH))
    lengths = tf.placeholder(tf.int32, (BATCH,))
    cell = make_cell()
    outputs_ta, final_state, final_loop_state = _documented_raw_rnn(cell, inputs, lengths)
    assert final_loop_state is None
    outputs = outputs_ta.stack()
    expected, expected_state = tf.nn.dynamic_rnn(cell, inputs, sequence_length=lengths, dtype=tf.float32,
                                                 time_major=True)
    grad, expected_grad = tf.gradients(tf.reduce_sum(outputs), inputs)[0], tf.gradients(
        tf.reduce_sum(expected), inputs)[0]
    assert all(v.op.name.startswith("rnn/") for v in tf.global_variables())
    feed = {inputs: np.random.default_rng(0).standard_normal((MAX_TIME, BATCH, DEPTH)).astype(np.float32),
            lengths: [5, 2, 3]}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, state, want, want_state, g, want_g = sess.run(
            [outputs, final_state, expected, expected_state, grad, expected_grad], feed)
    assert got.shape == (5, BATCH, UNITS)  # the loop ran to the longest sequence
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(state), np.asarray(want_state), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g, want_g, rtol=1e-5, atol=1e-6)


def test_a_greedy_decoder_with_emit_structure_and_loop_state():
    """Feed back each output; stop entries whose first output unit goes negative; count steps."""
    cell = tf.nn.rnn_cell.BasicRNNCell(2)
    start = tf.constant(np.array([[1.0, 0.5], [0.2, -0.1]], np.float32))

    def loop_fn(time, cell_output, cell_state, loop_state):
        if cell_output is None:
            return (tf.constant([False, False]), start, cell.zero_state(2, tf.float32),
                    (tf.zeros([2], tf.float32), tf.zeros([2, 2], tf.float32)), tf.constant(0))
        finished = tf.logical_or(tf.less(cell_output[:, 0], 0.0), tf.greater_equal(time, tf.constant(6, tf.int32)))
        emit = (cell_output[:, 0] * 2.0, cell_output)
        return finished, cell_output, cell_state, emit, loop_state + 1

    (first_ta, full_ta), final_state, steps = tf.nn.raw_rnn(cell, loop_fn, scope="decoder")
    firsts, fulls = first_ta.stack(), full_ta.stack()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        kernel, bias = sess.run(cell.variables)
        f, full, state, n = sess.run([firsts, fulls, final_state, steps])
    x, h = np.array([[1.0, 0.5], [0.2, -0.1]]), np.zeros((2, 2))
    done = np.array([False, False])
    rows = []
    for t in range(n):
        out = np.tanh(np.concatenate([x, h], 1) @ kernel + bias)
        rows.append(np.where(done[:, None], 0.0, out))
        h = np.where(done[:, None], h, out)
        done = done | (out[:, 0] < 0) | (t + 1 >= 6)
        x = out
    assert done.all() and n == len(rows) == full.shape[0]
    np.testing.assert_allclose(full, np.stack(rows), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(f, np.stack(rows)[:, :, 0] * 2.0, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, h, rtol=1e-5, atol=1e-6)
    assert cell.variables[0].op.name == "decoder/basic_rnn_cell/kernel"


def test_bad_loop_fns():
    cell = tf.nn.rnn_cell.BasicRNNCell(2)
    with pytest.raises(TypeError, match="loop_fn must be a callable"):
        tf.nn.raw_rnn(cell, None)
    with pytest.raises(ValueError, match="must return the initial cell state"):
        tf.nn.raw_rnn(cell, lambda t, o, s, ls: (tf.constant([True]), tf.zeros([1, 2]), None, None, None))
