"""tf.nn.ctc_loss and tf.nn.ctc_greedy_decoder as speech and OCR scripts use them: losses against a
direct log-space CTC forward algorithm, gradients by finite differences, a tiny model that learns
to transcribe, and TF's errors."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.errors import KernelError

RNG = np.random.default_rng(11)


def ctc_reference(logits, labels, merge_repeated=True):
    """-log p(labels | logits [T, C]) by the CTC forward recursion in log space, blank = C - 1."""
    t_len, classes = logits.shape
    blank = classes - 1
    lp = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    ext = [blank]
    for c in labels:
        ext += [c, blank]
    alpha = np.full(len(ext), -np.inf)
    alpha[0] = lp[0, blank]
    if labels:
        alpha[1] = lp[0, ext[1]]
    for t in range(1, t_len):
        new = np.full(len(ext), -np.inf)
        for s, c in enumerate(ext):
            terms = [alpha[s - 1]] if s >= 1 else []
            if merge_repeated or c == blank:
                terms.append(alpha[s])
            if s >= 2 and c != blank and c != ext[s - 2]:
                terms.append(alpha[s - 2])
            new[s] = np.logaddexp.reduce(terms) + lp[t, c] if terms else -np.inf
        alpha = new
    return -np.logaddexp.reduce(alpha[-2:] if labels else alpha[-1:])


def sparse_labels(rows):
    indices = [(b, i) for b, row in enumerate(rows) for i in range(len(row))]
    values = [v for row in rows for v in row]
    shape = [len(rows), max(len(r) for r in rows)]
    return tf.SparseTensor(np.asarray(indices, np.int64).reshape(-1, 2), np.asarray(values, np.int32), shape)


ROWS = [[1, 2, 2], [0], [3, 1, 0, 3], []]
LENGTHS = [8, 5, 9, 3]


def test_ctc_loss_matches_the_forward_algorithm():
    logits = RNG.standard_normal((9, 4, 5)).astype(np.float32)
    loss = tf.nn.ctc_loss(sparse_labels(ROWS), logits, LENGTHS)
    unmerged = tf.nn.ctc_loss(sparse_labels(ROWS), logits, LENGTHS, ctc_merge_repeated=False)
    batch_major = tf.nn.ctc_loss(sparse_labels(ROWS), np.transpose(logits, (1, 0, 2)), LENGTHS, time_major=False)
    collapsed = tf.nn.ctc_loss(sparse_labels(ROWS), logits, LENGTHS, preprocess_collapse_repeated=True)
    assert loss.shape == (4,)
    got, got_unmerged, got_batch, got_collapsed = tf.Session().run([loss, unmerged, batch_major, collapsed])
    want = [ctc_reference(logits[:n, b].astype(np.float64), r) for b, (r, n) in enumerate(zip(ROWS, LENGTHS))]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got_batch, want, rtol=1e-5)
    np.testing.assert_allclose(got_unmerged, [ctc_reference(logits[:n, b].astype(np.float64), r, False)
                                              for b, (r, n) in enumerate(zip(ROWS, LENGTHS))], rtol=1e-5)
    assert got_collapsed[0] == pytest.approx(ctc_reference(logits[:8, 0].astype(np.float64), [1, 2]), rel=1e-5)


def test_ctc_loss_gradient_matches_finite_differences():
    logits = RNG.standard_normal((9, 4, 5))
    x = tf.placeholder(tf.float64, logits.shape)
    weights = np.array([1.0, 0.5, 2.0, 1.5])
    loss = tf.reduce_sum(tf.nn.ctc_loss(sparse_labels(ROWS), x, LENGTHS) * weights)
    (grad,) = tf.gradients(loss, [x])
    sess = tf.Session()
    analytic = sess.run(grad, {x: logits})
    assert np.all(analytic[8, 0] == 0) and np.all(analytic[5:, 1] == 0)  # frames past each sequence_length
    eps = 1e-6
    for idx in [(0, 0, 1), (3, 0, 2), (7, 0, 4), (2, 1, 0), (0, 2, 3), (8, 2, 4), (1, 3, 4), (4, 1, 2), (4, 2, 1)]:
        up, down = logits.copy(), logits.copy()
        up[idx] += eps
        down[idx] -= eps
        numeric = (sess.run(loss, {x: up}) - sess.run(loss, {x: down})) / (2 * eps)
        assert analytic[idx] == pytest.approx(numeric, rel=1e-5, abs=1e-7), idx


def test_greedy_decoder_merges_repeats_and_drops_blanks():
    blank = 3
    paths = [[0, 0, blank, 0, 1, 1, 2], [2, blank, blank, 2, 2, blank, blank]]
    logits = np.full((7, 2, 4), -1.0, np.float32)
    for b, path in enumerate(paths):
        for t, c in enumerate(path):
            logits[t, b, c] = 2.0 + t
    (decoded,), neg_sum = tf.nn.ctc_greedy_decoder(logits, [7, 6])
    (unmerged,), _ = tf.nn.ctc_greedy_decoder(logits, [7, 6], merge_repeated=False)
    dense = tf.sparse_tensor_to_dense(decoded, default_value=-1)
    d, n, u = tf.Session().run([dense, neg_sum, tf.sparse_tensor_to_dense(unmerged, default_value=-1)])
    assert d.tolist() == [[0, 0, 1, 2], [2, 2, -1, -1]]
    assert u.tolist() == [[0, 0, 0, 1, 1, 2], [2, 2, 2, -1, -1, -1]]
    np.testing.assert_allclose(n, [[-sum(2.0 + t for t in range(7))], [-sum(2.0 + t for t in range(6))]])


def test_a_tiny_recognizer_learns_to_transcribe():
    """Frames are noisy one-hots of a label sequence with each symbol held for 2-3 frames; a linear
    layer trained with ctc_loss learns to transcribe them with the greedy decoder."""
    tf.set_random_seed(1)
    rng = np.random.default_rng(5)

    def batch(n=16, steps=12):
        xs, rows = np.zeros((steps, n, 5), np.float32), []
        for b in range(n):
            row = list(rng.integers(0, 3, size=rng.integers(1, 4)))
            t = 0
            for i, c in enumerate(row):
                if i and row[i - 1] == c:
                    t += 1  # a silent frame between repeats
                for _ in range(rng.integers(2, 4)):
                    xs[t, b, c] = 1.0
                    t += 1
            xs[t:, b, 4] = 1.0  # silence
            rows.append(row)
        return xs + rng.normal(0, 0.1, xs.shape).astype(np.float32), rows

    x = tf.placeholder(tf.float32, [12, None, 5])
    indices = tf.placeholder(tf.int64, [None, 2])
    values = tf.placeholder(tf.int32, [None])
    shape = tf.placeholder(tf.int64, [2])
    logits = tf.layers.dense(x, 4)
    loss = tf.reduce_mean(tf.nn.ctc_loss(tf.SparseTensor(indices, values, shape), logits, tf.fill([16], 12)))
    train = tf.train.AdamOptimizer(0.1).minimize(loss)
    (decoded,), _ = tf.nn.ctc_greedy_decoder(logits, tf.fill([16], 12))
    dense = tf.sparse_tensor_to_dense(decoded, default_value=-1)

    def feed(xs, rows):
        ind = np.asarray([(b, i) for b, r in enumerate(rows) for i in range(len(r))], np.int64)
        return {x: xs, indices: ind, values: np.concatenate(rows).astype(np.int32),
                shape: [len(rows), max(map(len, rows))]}

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, feed(*batch()))
        for _ in range(60):
            sess.run(train, feed(*batch()))
        xs, rows = batch()
        last, out = sess.run([loss, dense], feed(xs, rows))
    assert last < first / 4, (first, last)
    hits = sum([c for c in o if c >= 0] == list(r) for o, r in zip(out.tolist(), rows))
    assert hits >= 14, (hits, out.tolist(), rows)


def test_ctc_errors_name_the_problem():
    logits = np.zeros((3, 1, 4), np.float32)
    with pytest.raises(TypeError, match="Expected labels .* to be a SparseTensor"):
        tf.nn.ctc_loss([[1, 2]], logits, [3])
    with pytest.raises(ValueError, match="ctc_loss: inputs must be rank 3"):
        tf.nn.ctc_loss(sparse_labels([[1]]), np.zeros((3, 4), np.float32), [3])
    too_long = tf.nn.ctc_loss(sparse_labels([[1, 1, 2]]), logits, [3])
    with pytest.raises(KernelError, match="CTCLoss.*not enough time for target transition sequence .*required: 4, "
                                         "available: 3"):
        tf.Session().run(too_long)
    skipped = tf.nn.ctc_loss(sparse_labels([[1, 1, 2]]), logits, [3], ignore_longer_outputs_than_inputs=True)
    assert tf.Session().run(skipped).tolist() == [0.0]
    with pytest.raises(KernelError, match=r"labels of batch 0 must be in \[0, 3\)"):
        tf.Session().run(tf.nn.ctc_loss(sparse_labels([[3]]), logits, [3]))


def test_collapse_repeated_merges_runs_within_each_length():
    labels = np.array([[1, 1, 2, 2, 2, 3], [4, 4, 4, 4, 5, 5], [7, 6, 6, 7, 7, 0]], np.int32)
    collapsed, lengths = tf.nn.collapse_repeated(labels, np.array([6, 3, 5], np.int64))
    c, n = tf.Session().run([collapsed, lengths])
    assert c.tolist() == [[1, 2, 3], [4, 0, 0], [7, 6, 7]] and n.tolist() == [3, 1, 3]
    assert c.dtype == np.int32 and n.dtype == np.int64
    with pytest.raises(ValueError, match="collapse_repeated: labels must be rank 2"):
        tf.nn.collapse_repeated(np.zeros(3, np.int32), [3])


def test_beam_search_finds_the_most_likely_labelings():
    import itertools

    logits = RNG.standard_normal((4, 2, 3)) * 2
    lengths = [4, 3]
    decoded, log_probability = tf.nn.ctc_beam_search_decoder(logits.astype(np.float32), lengths, beam_width=40,
                                                             top_paths=3, merge_repeated=False)
    dense = [tf.sparse_tensor_to_dense(d, default_value=-1) for d in decoded]
    got, lp = tf.Session().run([dense, log_probability])
    for b, n in enumerate(lengths):
        labelings = [seq for k in range(n + 1) for seq in itertools.product([0, 1], repeat=k)]
        scored = sorted(((-ctc_reference(logits[:n, b], list(seq)), seq) for seq in labelings), reverse=True)[:3]
        np.testing.assert_allclose(lp[b], [s for s, _ in scored], rtol=1e-5)
        assert [[c for c in g[b] if c >= 0] for g in got] == [list(seq) for _, seq in scored]


def test_beam_search_merge_repeated_collapses_repeats_in_its_output():
    logits = np.full((3, 1, 3), -5.0, np.float32)
    logits[[0, 2], 0, 1] = 5.0
    logits[1, 0, 2] = 5.0  # 1, blank, 1: the labeling [1, 1]
    (kept,), _ = tf.nn.ctc_beam_search_decoder(logits, [3], beam_width=5, merge_repeated=False)
    (merged,), _ = tf.nn.ctc_beam_search_decoder(logits, [3], beam_width=5)
    k, m = tf.Session().run([tf.sparse_tensor_to_dense(kept), tf.sparse_tensor_to_dense(merged)])
    assert k.tolist() == [[1, 1]] and m.tolist() == [[1]]
