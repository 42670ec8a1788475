"""tf.contrib.crf against brute force over every tag sequence of tiny cases, its gradients against
central differences, and a BiLSTM-CRF tagger trained the TF1 way."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import trainer as tf

crf = tf.contrib.crf
RNG = np.random.default_rng(7)


def brute_force(x, tr, length):
    """(every sequence of the first ``length`` positions, its score)."""
    seqs = list(itertools.product(range(x.shape[1]), repeat=length))
    scores = [sum(x[t, s[t]] for t in range(length)) + sum(tr[s[t], s[t + 1]] for t in range(length - 1))
              for s in seqs]
    return seqs, np.array(scores)


def case(batch=4, steps=5, tags=3, dtype=np.float32):
    x = RNG.standard_normal((batch, steps, tags)).astype(dtype)
    tr = RNG.standard_normal((tags, tags)).astype(dtype)
    lengths = np.array([steps, 3, 1, 2][:batch], np.int32)
    tag_indices = RNG.integers(0, tags, (batch, steps)).astype(np.int32)
    return x, tr, lengths, tag_indices


def test_log_likelihood_and_scores_match_enumeration():
    x, tr, lengths, tags = case()
    ll, params = crf.crf_log_likelihood(tf.constant(x), tf.constant(tags), tf.constant(lengths), tf.constant(tr))
    unary = crf.crf_unary_score(tf.constant(tags), tf.constant(lengths), tf.constant(x))
    binary = crf.crf_binary_score(tf.constant(tags), tf.constant(lengths), tf.constant(tr))
    norm = crf.crf_log_norm(tf.constant(x), tf.constant(lengths), tf.constant(tr))
    with tf.Session() as sess:
        got_ll, got_u, got_b, got_norm = sess.run([ll, unary, binary, norm])
    for b in range(4):
        n = lengths[b]
        seqs, scores = brute_force(x[b], tr, n)
        expected_norm = np.log(np.sum(np.exp(scores.astype(np.float64))))
        own = scores[seqs.index(tuple(tags[b, :n]))]
        assert got_norm[b] == pytest.approx(expected_norm, rel=1e-5)
        assert got_ll[b] == pytest.approx(own - expected_norm, rel=1e-4, abs=1e-5)
        assert got_u[b] == pytest.approx(sum(x[b, t, tags[b, t]] for t in range(n)), rel=1e-5)
        assert got_b[b] == pytest.approx(sum(tr[tags[b, t], tags[b, t + 1]] for t in range(n - 1)), abs=1e-5)


def test_decode_and_viterbi_find_the_best_path():
    x, tr, lengths, _ = case(tags=4)
    tags, best = crf.crf_decode(tf.constant(x), tf.constant(tr), tf.constant(lengths))
    assert tags.dtype == np.int32
    with tf.Session() as sess:
        got_tags, got_best = sess.run([tags, best])
    for b in range(4):
        n = lengths[b]
        seqs, scores = brute_force(x[b], tr, n)
        assert tuple(got_tags[b, :n]) == seqs[int(np.argmax(scores))]
        assert np.all(got_tags[b, n:] == 0)
        assert got_best[b] == pytest.approx(scores.max(), rel=1e-5)
        path, score = crf.viterbi_decode(x[b, :n], tr)
        assert tuple(path) == seqs[int(np.argmax(scores))] and score == pytest.approx(scores.max(), rel=1e-5)
    single, single_best = crf.crf_decode(tf.constant(x[:, :1]), tf.constant(tr), tf.constant(np.ones(4, np.int32)))
    with tf.Session() as sess:
        got, got_best = sess.run([single, single_best])
    np.testing.assert_array_equal(got[:, 0], np.argmax(x[:, 0], axis=1))
    np.testing.assert_allclose(got_best, np.max(x[:, 0], axis=1), rtol=1e-6)


def test_empty_sequences_multitag_and_bad_input():
    x, tr, _, tags = case(batch=2, steps=3)
    lengths = np.array([0, 3], np.int32)
    norm = crf.crf_log_norm(tf.constant(x), tf.constant(lengths), tf.constant(tr))
    everything = crf.crf_multitag_sequence_score(tf.constant(x), tf.constant(np.ones(x.shape, bool)),
                                                 tf.constant(lengths), tf.constant(tr))
    only_tags = crf.crf_multitag_sequence_score(tf.constant(x), tf.constant(np.eye(3, dtype=bool)[tags]),
                                                tf.constant([3, 3]), tf.constant(tr))
    own = crf.crf_sequence_score(tf.constant(x), tf.constant(tags), tf.constant([3, 3]), tf.constant(tr))
    with tf.Session() as sess:
        got_norm, got_all, got_only, got_own = sess.run([norm, everything, only_tags, own])
    assert got_norm[0] == 0.0  # an empty sequence
    np.testing.assert_allclose(got_all, got_norm, rtol=1e-6)
    np.testing.assert_allclose(got_only, got_own, rtol=1e-5)
    with pytest.raises(ValueError, match=r"inputs must be \[batch_size, max_seq_len, num_tags\]"):
        crf.crf_log_norm(tf.constant(x[0]), tf.constant(lengths), tf.constant(tr))
    with pytest.raises(ValueError, match="viterbi_decode"):
        crf.viterbi_decode(x[0], tr[:2])


def test_log_likelihood_gradients_match_finite_differences():
    x, tr, lengths, tags = case(batch=3, steps=4, tags=3, dtype=np.float64)
    xs, trs = tf.placeholder(tf.float64, x.shape), tf.placeholder(tf.float64, tr.shape)
    ll, _ = crf.crf_log_likelihood(xs, tf.constant(tags[:3]), tf.constant(lengths[:3]), trs)
    loss = tf.reduce_sum(ll * np.array([1.0, -0.5, 2.0]))
    grads = tf.gradients(loss, [xs, trs])
    with tf.Session() as sess:
        feed = {xs: x, trs: tr}
        analytic = sess.run(grads, feed)
        eps = 1e-6
        for k, value in enumerate([x, tr]):
            flat = value.reshape(-1)
            for i in RNG.choice(flat.size, size=min(flat.size, 10), replace=False):
                old = flat[i]
                flat[i] = old + eps
                up = sess.run(loss, feed)
                flat[i] = old - eps
                down = sess.run(loss, feed)
                flat[i] = old
                assert analytic[k].reshape(-1)[i] == pytest.approx((up - down) / (2 * eps), rel=1e-5, abs=1e-7)


def make_tagging_data(n, steps, vocab, rng):
    """Words 0..vocab-1; a word's tag is its parity, except that a word right after word 0 is tag 2."""
    words = rng.integers(0, vocab, (n, steps))
    tags = words % 2
    tags[:, 1:] = np.where(words[:, :-1] == 0, 2, tags[:, 1:])
    lengths = rng.integers(3, steps + 1, n)
    return words.astype(np.int32), tags.astype(np.int32), lengths.astype(np.int32)


def test_bilstm_crf_tagger_learns():
    """A TF1 BiLSTM-CRF: embeddings, a bidirectional LSTM, a dense layer of tag scores and the CRF
    loss; training lowers the loss and crf_decode tags held-out sentences."""
    tf.set_random_seed(3)
    rng = np.random.default_rng(3)
    vocab, steps, num_tags = 8, 6, 3
    words, tags, lengths = make_tagging_data(256, steps, vocab, rng)
    test_words, test_tags, test_lengths = make_tagging_data(64, steps, vocab, rng)

    word_ids = tf.placeholder(tf.int32, [None, None])
    labels = tf.placeholder(tf.int32, [None, None])
    seq_len = tf.placeholder(tf.int32, [None])
    embeddings = tf.get_variable("embeddings", [vocab, 8])
    embedded = tf.nn.embedding_lookup(embeddings, word_ids)
    (fw, bw), _ = tf.nn.bidirectional_dynamic_rnn(tf.nn.rnn_cell.LSTMCell(8), tf.nn.rnn_cell.LSTMCell(8), embedded,
                                                  sequence_length=seq_len, dtype=tf.float32)
    scores = tf.reshape(tf.layers.dense(tf.reshape(tf.concat([fw, bw], axis=-1), [-1, 16]), num_tags),
                        [-1, steps, num_tags])
    log_likelihood, transitions = crf.crf_log_likelihood(scores, labels, seq_len)
    loss = tf.reduce_mean(-log_likelihood)
    train_op = tf.train.AdamOptimizer(0.05).minimize(loss)
    decoded, _ = crf.crf_decode(scores, transitions, seq_len)
    assert transitions.op.name == "transitions"

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        feed = {word_ids: words, labels: tags, seq_len: lengths}
        first = sess.run(loss, feed)
        for step in range(60):
            part = slice((step % 4) * 64, (step % 4 + 1) * 64)
            sess.run(train_op, {word_ids: words[part], labels: tags[part], seq_len: lengths[part]})
        last = sess.run(loss, feed)
        predicted = sess.run(decoded, {word_ids: test_words, seq_len: test_lengths})
    mask = np.arange(steps)[None, :] < test_lengths[:, None]
    accuracy = np.mean((predicted == test_tags)[mask])
    assert last < 0.3 * first, (first, last)  # measured 4.92 -> 0.0036 (seeded)
    assert accuracy > 0.9, accuracy  # measured 1.0
