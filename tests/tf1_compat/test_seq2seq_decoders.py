"""``tf.contrib.seq2seq``'s decoders as TF 1.15 scripts use them: BasicDecoder with the training,
greedy and sampling helpers under dynamic_decode, checked step by step against NumPy with explicit
weights (a BasicRNNCell: h = tanh([x, h] @ K + b), logits = h @ W + c); gradients through the loop
against central differences."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(21)
BATCH, VOCAB, EMB, UNITS = 3, 7, 4, 5
EMBEDDING = RNG.standard_normal((VOCAB, EMB)).astype(np.float32)
KERNEL = (RNG.standard_normal((EMB + UNITS, UNITS)) * 0.6).astype(np.float32)
BIAS = (RNG.standard_normal(UNITS) * 0.1).astype(np.float32)
PROJ = (RNG.standard_normal((UNITS, VOCAB)) * 1.5).astype(np.float32)
PROJ_BIAS = (RNG.standard_normal(VOCAB) * 0.1).astype(np.float32)


def rnn_step(x, h):
    h = np.tanh(np.concatenate([x, h], 1) @ KERNEL + BIAS)
    return h, h @ PROJ + PROJ_BIAS


def assign_weights(sess):
    """Our variables set to the module's explicit weights, by their TensorFlow names."""
    by_name = {v.op.name: v for v in tf.global_variables()}
    values = {"decoder/basic_rnn_cell/kernel": KERNEL, "decoder/basic_rnn_cell/bias": BIAS,
              "decoder/output_projection/kernel": PROJ, "decoder/output_projection/bias": PROJ_BIAS}
    sess.run([by_name[name].assign(value) for name, value in values.items()])


def basic_decoder(helper, batch=BATCH):
    cell = tf.nn.rnn_cell.BasicRNNCell(UNITS)
    projection = tf.layers.Dense(VOCAB, name="output_projection")
    return tf.contrib.seq2seq.BasicDecoder(cell, helper, cell.zero_state(batch, tf.float32), output_layer=projection)


def test_training_helper_matches_numpy_and_names_variables_as_tensorflow():
    ids = RNG.integers(0, VOCAB, (BATCH, 6)).astype(np.int32)
    lengths = np.array([6, 2, 4], np.int32)
    helper = tf.contrib.seq2seq.TrainingHelper(tf.nn.embedding_lookup(EMBEDDING, ids), lengths)
    outputs, state, out_lengths = tf.contrib.seq2seq.dynamic_decode(basic_decoder(helper))
    assert outputs.rnn_output.shape.as_list() == [BATCH, None, VOCAB]
    assert sorted(v.op.name for v in tf.trainable_variables()) == [
        "decoder/basic_rnn_cell/bias", "decoder/basic_rnn_cell/kernel", "decoder/output_projection/bias",
        "decoder/output_projection/kernel"]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assign_weights(sess)
        got, final, got_lengths = sess.run([outputs, state, out_lengths])
    h = np.zeros((BATCH, UNITS), np.float32)
    want = []
    for t in range(6):
        h, logits = rnn_step(EMBEDDING[ids[:, t]], h)
        want.append(logits)
    want = np.stack(want, 1)
    # without impute_finished every example runs all 6 steps (the longest length)
    np.testing.assert_allclose(got.rnn_output, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got.sample_id, want.argmax(-1))
    np.testing.assert_array_equal(got_lengths, lengths)
    np.testing.assert_allclose(final, h, rtol=1e-5, atol=1e-5)


def test_impute_finished_zeros_outputs_and_keeps_state():
    ids = RNG.integers(0, VOCAB, (BATCH, 5)).astype(np.int32)
    lengths = np.array([3, 5, 1], np.int32)
    inputs = tf.nn.embedding_lookup(EMBEDDING, np.transpose(ids))  # time-major
    helper = tf.contrib.seq2seq.TrainingHelper(inputs, lengths, time_major=True)
    outputs, state, out_lengths = tf.contrib.seq2seq.dynamic_decode(basic_decoder(helper), impute_finished=True,
                                                                    output_time_major=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assign_weights(sess)
        got, final, got_lengths = sess.run([outputs, state, out_lengths])
    assert got.rnn_output.shape == (5, BATCH, VOCAB)
    h = np.zeros((BATCH, UNITS), np.float32)
    for t in range(5):
        h_new, logits = rnn_step(EMBEDDING[ids[:, t]], h)
        running = t < lengths
        np.testing.assert_allclose(got.rnn_output[t], np.where(running[:, None], logits, 0.0), rtol=1e-5, atol=1e-5)
        h = np.where(running[:, None], h_new, h)
    np.testing.assert_allclose(final, h, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got_lengths, lengths)


def greedy_reference(start, end, steps):
    """NumPy greedy decoding: (ids [batch, steps], per-example lengths)."""
    h = np.zeros((BATCH, UNITS), np.float32)
    x = EMBEDDING[start]
    ids, finished, lengths = [], np.zeros(BATCH, bool), np.zeros(BATCH, np.int32)
    for t in range(steps):
        h, logits = rnn_step(x, h)
        sample = logits.argmax(-1)
        lengths = np.where(finished, lengths, t + 1)
        finished = finished | (sample == end) | (t + 1 >= steps)
        ids.append(sample)
        x = EMBEDDING[sample]
        if finished.all():
            break
    return np.stack(ids, 1), lengths


@pytest.mark.parametrize("embedding_as", ["matrix", "callable"])
def test_greedy_embedding_helper_matches_numpy(embedding_as):
    start, end, steps = np.array([1, 4, 6], np.int32), 2, 8
    embedding = EMBEDDING if embedding_as == "matrix" else (lambda ids: tf.nn.embedding_lookup(EMBEDDING, ids))
    helper = tf.contrib.seq2seq.GreedyEmbeddingHelper(embedding, tf.constant(start), end)
    outputs, _, lengths = tf.contrib.seq2seq.dynamic_decode(basic_decoder(helper), maximum_iterations=steps)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assign_weights(sess)
        got, got_lengths = sess.run([outputs.sample_id, lengths])
    want, want_lengths = greedy_reference(start, end, steps)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_lengths, want_lengths)


def test_maximum_iterations_bounds_the_decode():
    helper = tf.contrib.seq2seq.GreedyEmbeddingHelper(EMBEDDING, tf.fill([BATCH], 1), -1)  # never ends by token
    outputs, _, lengths = tf.contrib.seq2seq.dynamic_decode(basic_decoder(helper), maximum_iterations=4)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        ids, got_lengths = sess.run([outputs.sample_id, lengths])
    assert ids.shape == (BATCH, 4)
    np.testing.assert_array_equal(got_lengths, [4] * BATCH)


def test_sample_embedding_helper_is_seeded_and_follows_the_distribution():
    """With a huge temperature every id is near-uniform; with a tiny one sampling is greedy."""
    start = np.array([1, 4, 6], np.int32)

    def sampled(temperature, seed):
        g = tf.Graph()
        with g.as_default():
            helper = tf.contrib.seq2seq.SampleEmbeddingHelper(EMBEDDING, start, -1, softmax_temperature=temperature,
                                                              seed=seed)
            outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(basic_decoder(helper), maximum_iterations=40)
            with tf.Session() as sess:
                sess.run(tf.global_variables_initializer())
                assign_weights(sess)
                return sess.run(outputs.sample_id)

    np.testing.assert_array_equal(sampled(1.0, 3), sampled(1.0, 3))
    spread = sampled(1e4, 5)
    assert len(np.unique(spread)) == VOCAB  # 120 draws over 7 ids: each is missed with probability < 1e-7
    greedy = sampled(1e-4, 5)
    want, _ = greedy_reference(start, -1, 40)
    np.testing.assert_array_equal(greedy, want)


def test_gradients_flow_into_cell_projection_and_embeddings():
    """d(loss)/d(embeddings, kernel) through the decode loop, against central differences."""
    ids = RNG.integers(0, VOCAB, (BATCH, 4)).astype(np.int32)
    targets = RNG.integers(0, VOCAB, (BATCH, 4)).astype(np.int32)
    lengths = np.array([4, 3, 2], np.int32)
    embedding = tf.get_variable("embedding", initializer=EMBEDDING.astype(np.float64))
    cell = tf.nn.rnn_cell.BasicRNNCell(UNITS, dtype=tf.float64)
    helper = tf.contrib.seq2seq.TrainingHelper(tf.nn.embedding_lookup(embedding, ids), lengths)
    decoder = tf.contrib.seq2seq.BasicDecoder(cell, helper, cell.zero_state(BATCH, tf.float64),
                                              output_layer=tf.layers.Dense(VOCAB, name="output_projection"))
    outputs, _, _ = tf.contrib.seq2seq.dynamic_decode(decoder, impute_finished=True)
    weights = tf.sequence_mask(lengths, 4, dtype=tf.float64)
    loss = tf.contrib.seq2seq.sequence_loss(outputs.rnn_output, targets, weights)
    variables = {v.op.name: v for v in tf.trainable_variables()}
    assert set(variables) == {"embedding", "decoder/basic_rnn_cell/kernel", "decoder/basic_rnn_cell/bias",
                              "decoder/output_projection/kernel", "decoder/output_projection/bias"}
    grads = dict(zip(variables, tf.gradients(loss, list(variables.values()))))
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for name in ("embedding", "decoder/basic_rnn_cell/kernel", "decoder/output_projection/kernel"):
            var = variables[name]
            analytic = np.asarray(sess.run(tf.convert_to_tensor(grads[name])))
            value = sess.run(var)
            for index in [tuple(i) for i in RNG.integers(0, value.shape, (6, value.ndim))]:
                bumped = value.copy()
                bumped[index] += 1e-6
                sess.run(var.assign(bumped))
                up = sess.run(loss)
                bumped[index] -= 2e-6
                sess.run(var.assign(bumped))
                down = sess.run(loss)
                sess.run(var.assign(value))
                np.testing.assert_allclose(analytic[index], (up - down) / 2e-6, rtol=1e-5, atol=1e-8)


def test_bad_input_is_refused_with_a_clear_error():
    inputs = tf.zeros([BATCH, 5, EMB])
    with pytest.raises(ValueError, match="sequence_length to be a vector"):
        tf.contrib.seq2seq.TrainingHelper(inputs, [[5, 5, 5]])
    with pytest.raises(ValueError, match="sequence_length has 2 entries but inputs have a batch of 3"):
        tf.contrib.seq2seq.TrainingHelper(inputs, [5, 5])
    with pytest.raises(ValueError, match="end_token must be a scalar"):
        tf.contrib.seq2seq.GreedyEmbeddingHelper(EMBEDDING, [1, 1, 1], [2, 2])
    with pytest.raises(ValueError, match="start_tokens must be a vector"):
        tf.contrib.seq2seq.GreedyEmbeddingHelper(EMBEDDING, 1, 2)
    helper = tf.contrib.seq2seq.TrainingHelper(inputs, [5, 5, 5])
    with pytest.raises(ValueError, match="initial_state has a batch of 2 but the helper's batch is 3"):
        basic_decoder(helper, batch=2)
    with pytest.raises(TypeError, match="expected decoder to be a Decoder"):
        tf.contrib.seq2seq.dynamic_decode(helper)
