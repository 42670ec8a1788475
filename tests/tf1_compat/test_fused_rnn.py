"""tf.contrib.rnn's fused-RNN interface: FusedRNNCellAdaptor over an RNNCell (dynamic_rnn or
static_rnn, tensor or list of steps) and TimeReversedFusedRNN, the backward half of a fused
bidirectional LSTM, against a NumPy transcription of TF's LSTM equations."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.tf1_compat.lstm_reference import tf_lstm, tf_values

TIME, BATCH, DEPTH, UNITS = 5, 3, 4, 3
DATA = np.random.default_rng(31).standard_normal((TIME, BATCH, DEPTH))  # time-major


def reversed_reference(data, kernel, bias, lengths):
    """TF's backward LSTM: each example's first ``lengths[b]`` steps run last to first, the outputs put
    back at their steps (zeros past the length), the state after the example's last run step."""
    outputs = np.zeros((TIME, BATCH, UNITS))
    cs, hs = [], []
    for b, n in enumerate(lengths):
        out, c, h = tf_lstm(data[:n, b:b + 1][::-1], kernel, bias, 1.0)
        outputs[:n, b] = out[::-1, 0]
        cs.append(c)
        hs.append(h)
    return outputs, np.concatenate(cs), np.concatenate(hs)


@pytest.mark.parametrize("lengths", [None, [5, 3, 1]])
def test_a_fused_bidirectional_lstm_reads_the_sequence_both_ways(lengths):
    x = tf.placeholder(tf.float64, [TIME, BATCH, DEPTH])
    fw = tf.contrib.rnn.LSTMBlockFusedCell(UNITS)
    bw = tf.contrib.rnn.TimeReversedFusedRNN(tf.contrib.rnn.LSTMBlockFusedCell(UNITS, name="bw"))
    assert isinstance(fw, tf.contrib.rnn.FusedRNNCell) and isinstance(bw, tf.contrib.rnn.FusedRNNCell)
    fw_out, fw_state = fw(x, dtype=tf.float64, sequence_length=lengths)
    bw_out, bw_state = bw(x, dtype=tf.float64, sequence_length=lengths)
    outputs = tf.concat([fw_out, bw_out], axis=2)
    assert [v.op.name for v in tf.trainable_variables()] == [
        "lstm_fused_cell/kernel", "lstm_fused_cell/bias", "bw/kernel", "bw/bias"]
    (kf, bf), (kb, bb) = tf_values(seed=1, depth=DEPTH, units=UNITS), tf_values(seed=2, depth=DEPTH, units=UNITS)
    with tf.Session() as sess:
        sess.run([tf.assign(v, value) for v, value in zip(tf.trainable_variables(), (kf, bf, kb, bb))])
        got, (c_b, h_b), h_f = sess.run([outputs, bw_state, fw_state.h], {x: DATA})
    n = lengths or [TIME] * BATCH
    want_b, want_cb, want_hb = reversed_reference(DATA, kb, bb, n)
    forward = [tf_lstm(DATA[:k, b:b + 1], kf, bf, 1.0) for b, k in enumerate(n)]
    want_f = np.zeros((TIME, BATCH, UNITS))
    for b, (out, _, _) in enumerate(forward):
        want_f[:n[b], b] = out[:, 0]
    np.testing.assert_allclose(got, np.concatenate([want_f, want_b], axis=2), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h_f, np.concatenate([f[2] for f in forward]), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c_b, want_cb, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h_b, want_hb, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("as_list", [False, True])
@pytest.mark.parametrize("use_dynamic_rnn", [False, True])
def test_fused_rnn_cell_adaptor_runs_a_cell_over_the_sequence(use_dynamic_rnn, as_list):
    x = tf.placeholder(tf.float64, [TIME, BATCH, DEPTH])
    cell = tf.contrib.rnn.FusedRNNCellAdaptor(tf.nn.rnn_cell.BasicLSTMCell(UNITS), use_dynamic_rnn=use_dynamic_rnn)
    outputs, state = cell(tf.unstack(x) if as_list else x, dtype=tf.float64)
    assert isinstance(outputs, list) == as_list
    kernel_var, bias_var = tf.trainable_variables()
    assert kernel_var.op.name == "rnn/basic_lstm_cell/kernel"
    kernel, bias = tf_values(seed=3, depth=DEPTH, units=UNITS)
    with tf.Session() as sess:
        sess.run([tf.assign(kernel_var, kernel), tf.assign(bias_var, bias)])
        got, h = sess.run([outputs, state.h], {x: DATA})
    want, _, want_h = tf_lstm(DATA, kernel, bias, 1.0)
    np.testing.assert_allclose(np.stack(got) if as_list else got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h, want_h, rtol=1e-10, atol=1e-12)


def test_time_reversed_adaptor_over_a_list_reverses_the_whole_list():
    steps = [tf.placeholder(tf.float64, [BATCH, DEPTH]) for _ in range(TIME)]
    cell = tf.contrib.rnn.TimeReversedFusedRNN(tf.contrib.rnn.FusedRNNCellAdaptor(tf.nn.rnn_cell.BasicLSTMCell(UNITS)))
    outputs, _ = cell(steps, dtype=tf.float64)
    kernel_var, bias_var = tf.trainable_variables()
    kernel, bias = tf_values(seed=4, depth=DEPTH, units=UNITS)
    with tf.Session() as sess:
        sess.run([tf.assign(kernel_var, kernel), tf.assign(bias_var, bias)])
        got = sess.run(outputs, dict(zip(steps, DATA)))
    want = tf_lstm(DATA[::-1], kernel, bias, 1.0)[0][::-1]
    np.testing.assert_allclose(np.stack(got), want, rtol=1e-10, atol=1e-12)


def test_fused_rnn_cell_is_abstract_and_subclasses_run():
    with pytest.raises(TypeError, match="abstract"):
        tf.contrib.rnn.FusedRNNCell()

    class Doubling(tf.contrib.rnn.FusedRNNCell):
        def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
            return inputs * 2.0, None

    reversed_doubling = tf.contrib.rnn.TimeReversedFusedRNN(Doubling())
    out, _ = reversed_doubling(tf.constant(DATA))
    with tf.Session() as sess:
        np.testing.assert_allclose(sess.run(out), DATA * 2.0)
