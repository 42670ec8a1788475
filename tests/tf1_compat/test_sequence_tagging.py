"""A TF1 sequence tagger written the way the PTB tutorial writes its language model: token ids in
[None, None] placeholders (batch and length known only at run time), an embedding, dynamic_rnn,
a dense layer over every step's output, per-token sparse cross-entropy, and tf.gradients clipped by
tf.clip_by_global_norm before apply_gradients (the embedding's gradient is an IndexedSlices).

The data: each digit image pooled to 4x4 and read as a sequence of 16 intensity tokens (0-16),
every token tagged with the image's label, so later tokens have seen more of the image."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def _tokens(x):
    pooled = x.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4))  # 8x8 in [0, 1] -> 4x4
    return np.rint(pooled.reshape(-1, 16) * 16).astype(np.int32)


@pytest.mark.slow
def test_a_tagger_on_run_time_shapes_with_clipped_gradients_learns(digits):
    tf.set_random_seed(7)
    tf.init.set_seed(0)  # tf.layers' initial values: else they depend on what the process ran before
    vocab, hidden, classes = 17, 48, 10
    inputs = tf.placeholder(tf.int32, [None, None], name="inputs")
    targets = tf.placeholder(tf.int32, [None, None], name="targets")
    with tf.variable_scope("tagger"):
        embedding = tf.get_variable("embedding", [vocab, 16], dtype=tf.float32)
        emb = tf.nn.embedding_lookup(embedding, inputs)
        cell = tf.nn.rnn_cell.BasicLSTMCell(hidden)
        batch_size = tf.shape(inputs)[0]
        initial = cell.zero_state(batch_size, tf.float32)
        outputs, state = tf.nn.dynamic_rnn(cell, emb, initial_state=initial)
        flat = tf.reshape(outputs, [-1, hidden])
        logits = tf.reshape(tf.layers.dense(flat, classes), [batch_size, -1, classes])
        per_token = tf.layers.dense(outputs, classes, name="per_token")  # the same, over the 3-D outputs
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits))
    loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=per_token))
    tvars = tf.trainable_variables()
    grads = tf.gradients(loss, tvars)
    sparse = [g for g in grads if isinstance(g, tf.IndexedSlices)]
    assert len(sparse) == 1 and sparse[0].dense_shape is not None  # the embedding's
    clipped, global_norm = tf.clip_by_global_norm(grads, 5.0)
    train_op = tf.train.AdamOptimizer(0.01).apply_gradients(zip(clipped, tvars),
                                                            global_step=tf.train.get_or_create_global_step())
    last = tf.argmax(per_token[:, -1], axis=1, output_type=tf.int32)

    xs, ys = _tokens(digits["x_train"]), digits["y_train"].astype(np.int32)
    tags = np.repeat(ys[:, None], 16, axis=1)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {inputs: xs[:100], targets: tags[:100]})
        for epoch in range(12):
            for i in range(0, 1400, 100):
                sess.run(train_op, {inputs: xs[i:i + 100], targets: tags[i:i + 100]})
        final = sess.run(loss, {inputs: xs[:100], targets: tags[:100]})
        test = _tokens(digits["x_test"])
        predicted = sess.run(last, {inputs: test})  # another batch size (397)
        shorter = sess.run(outputs, {inputs: test[:7, :12]})  # and another length
        dense_shape = sess.run(sparse[0].dense_shape, {inputs: xs[:3], targets: tags[:3]})
    assert final < first * 0.6, (first, final)
    accuracy = float((predicted == digits["y_test"]).mean())
    # a 4x4 view of the digit; chance is 0.1 (0.66-0.72 over initial values seeded 0-11)
    assert accuracy >= 0.6, accuracy
    assert shorter.shape == (7, 12, hidden)
    assert dense_shape.tolist() == [vocab, 16]
