"""Recurrent TF1 scripts: an LSTM classifier with contrib.rnn cells and static_rnn, and a
dynamic_rnn model over variable-length sequences (digits read row by row)."""

from __future__ import annotations

import numpy as np

import trainer as tf


def test_lstm_classifier_with_contrib_rnn_and_static_rnn_reaches_90_percent(digits):
    tf.set_random_seed(4)
    timesteps, num_input, num_hidden = 8, 8, 32
    X = tf.placeholder("float", [None, timesteps, num_input])
    Y = tf.placeholder("float", [None, 10])
    weights = tf.Variable(tf.random_normal([num_hidden, 10]))
    biases = tf.Variable(tf.random_normal([10]))
    x = tf.unstack(X, timesteps, 1)
    lstm_cell = tf.contrib.rnn.BasicLSTMCell(num_hidden, forget_bias=1.0)
    outputs, states = tf.contrib.rnn.static_rnn(lstm_cell, x, dtype=tf.float32)
    logits = tf.matmul(outputs[-1], weights) + biases
    loss_op = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(logits=logits, labels=Y))
    train_op = tf.train.AdamOptimizer(learning_rate=0.02).minimize(loss_op)
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), tf.argmax(Y, 1)), tf.float32))
    xs = digits["x_train"].reshape(-1, 8, 8)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(12):
            for i in range(0, 1400, 100):
                sess.run(train_op, {X: xs[i:i + 100], Y: digits["y_train_1h"][i:i + 100]})
        acc = sess.run(accuracy, {X: digits["x_test"].reshape(-1, 8, 8), Y: digits["y_test_1h"]})
    assert acc >= 0.9, acc
    assert isinstance(states, tf.nn.rnn_cell.LSTMStateTuple)
    assert sorted(v.name for v in tf.trainable_variables())[:2] == ["Variable:0", "Variable_1:0"]
    assert {v.name for v in tf.trainable_variables()} >= {"rnn/basic_lstm_cell/kernel:0", "rnn/basic_lstm_cell/bias:0"}


def test_dynamic_rnn_over_variable_length_sequences_reaches_85_percent(digits):
    """Each digit is cut to its first 6 to 8 rows; padded rows must not change the prediction."""
    tf.set_random_seed(5)
    rng = np.random.default_rng(5)
    batch = 100

    def cut(x):
        seq = x.reshape(-1, 8, 8).copy()
        lengths = rng.integers(6, 9, size=len(seq))
        for i, n in enumerate(lengths):
            seq[i, n:] = 0.0
        return seq, lengths

    x = tf.placeholder(tf.float32, [batch, 8, 8])
    seqlen = tf.placeholder(tf.int32, [batch])
    y = tf.placeholder(tf.int64, [batch])
    cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.GRUCell(24), tf.nn.rnn_cell.LSTMCell(24)])
    outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=seqlen, dtype=tf.float32)
    last = state[-1].h  # the state at each sequence's own last step
    logits = tf.layers.dense(last, 10)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    train_op = tf.train.AdamOptimizer(0.02).minimize(loss)
    correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    xs, ls = cut(digits["x_train"])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for epoch in range(12):
            for i in range(0, 1400, batch):
                sess.run(train_op, {x: xs[i:i + batch], seqlen: ls[i:i + batch], y: digits["y_train"][i:i + batch]})
        xt, lt = cut(digits["x_test"][:300])
        hits = sum(sess.run(correct, {x: xt[i:i + batch], seqlen: lt[i:i + batch], y: digits["y_test"][i:i + batch]})
                   for i in range(0, 300, batch))
        # Garbage past each length changes neither the final state nor the outputs inside the length.
        noisy = xt[:batch].copy()
        for i, n in enumerate(lt[:batch]):
            noisy[i, n:] = 7.0
        feeds = [{x: data, seqlen: lt[:batch]} for data in (xt[:batch], noisy)]
        (out_a, h_a), (out_b, h_b) = (sess.run([outputs, last], f) for f in feeds)
    assert hits / 300 >= 0.85, hits / 300
    np.testing.assert_allclose(h_a, h_b, rtol=1e-6)
    np.testing.assert_allclose(out_a, out_b, rtol=1e-6)
    assert all((out_a[i, n:] == 0).all() for i, n in enumerate(lt[:batch]))


def test_dynamic_rnn_of_an_lstm_runs_fused_and_matches_the_per_step_loop():
    x = tf.placeholder(tf.float32, [3, 5, 4])
    cell = tf.nn.rnn_cell.BasicLSTMCell(6, forget_bias=0.5)
    fused, fused_state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    looped, loop_state = tf.nn.dynamic_rnn(cell, x, sequence_length=[5, 5, 5], dtype=tf.float32, scope="again")
    ops = {n.op_type for n in tf.get_default_graph().nodes}
    assert {"LSTMBlockFused", "LSTMBlockCell"} <= ops
    variables = tf.trainable_variables()
    assert len(variables) == 2  # one cell, one set of weights, both runs
    fetch = [[out, state.h, state.c] + tf.gradients(tf.reduce_sum(out * out) + tf.reduce_sum(state.c), variables)
             for out, state in ((fused, fused_state), (looped, loop_state))]
    sess = tf.Session()
    sess.run(tf.global_variables_initializer())
    feed = {x: np.random.default_rng(0).normal(size=(3, 5, 4)).astype(np.float32)}
    for a, b in zip(*sess.run(fetch, feed)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
