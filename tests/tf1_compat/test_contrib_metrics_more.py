"""tf.contrib.metrics: the streaming_* names of the newer tf.metrics (predictions first), f1_score,
precision_at_recall, recall_at_precision, curve points, covariance, Pearson's r, count, accuracy,
confusion_matrix and the set_* ops, against NumPy and Python sets."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

cm = tf.contrib.metrics
RNG = np.random.default_rng(21)


def run_updates(*pairs):
    """Each metric's update once (one batch), then the values."""
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        sess.run([u for _, u in pairs])
        return sess.run([v for v, _ in pairs])


def reference_counts(labels, scores, n):
    thresholds = [-1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + 1e-7]
    out = {"tp": [], "fp": [], "fn": [], "tn": []}
    for t in thresholds:
        pos = scores > t
        out["tp"].append(np.sum(pos & (labels == 1)))
        out["fp"].append(np.sum(pos & (labels == 0)))
        out["fn"].append(np.sum(~pos & (labels == 1)))
        out["tn"].append(np.sum(~pos & (labels == 0)))
    return {k: np.array(v, np.float64) for k, v in out.items()}


def test_threshold_metrics_match_numpy():
    labels = RNG.integers(0, 2, 120)
    scores = np.clip(0.35 * labels + 0.65 * RNG.random(120), 0, 1).astype(np.float32)
    c = reference_counts(labels, scores, 20)
    eps = 1e-7
    precision = c["tp"] / (eps + c["tp"] + c["fp"])
    recall = c["tp"] / (eps + c["tp"] + c["fn"])
    best_f1 = np.max(2 * precision * recall / (eps + precision + recall))
    i = np.argmin(np.abs(c["tp"] / (c["tp"] + c["fn"] + eps) - 0.6))
    p_at_r = c["tp"][i] / (c["tp"][i] + c["fp"][i] + eps)
    precisions = c["tp"] / (c["tp"] + c["fp"] + eps)
    j = np.argmin(np.abs(precisions - 0.7))
    r_at_p = c["tp"][j] / (c["tp"][j] + c["fn"][j] + eps)
    strict = np.where(precisions >= 0.9, precisions, np.inf)
    s = np.argmin(strict)
    r_strict = c["tp"][s] / (c["tp"][s] + c["fn"][s] + eps) if np.isfinite(strict[s]) else 0.0
    roc = np.stack([c["fp"] / (c["fp"] + c["tn"] + eps), (c["tp"] + eps) / (c["tp"] + c["fn"] + eps)], 1)
    lab, sc = tf.constant(labels), tf.constant(scores)
    got = run_updates(cm.f1_score(lab, sc, num_thresholds=20), cm.precision_at_recall(lab, sc, 0.6, num_thresholds=20),
                      cm.recall_at_precision(lab, sc, 0.7, num_thresholds=20),
                      cm.recall_at_precision(lab, sc, 0.9, num_thresholds=20, strict_mode=True),
                      cm.streaming_curve_points(lab, sc, num_thresholds=20))
    np.testing.assert_allclose(got[:4], [best_f1, p_at_r, r_at_p, r_strict], rtol=1e-5)
    np.testing.assert_allclose(got[4], roc, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match="curve must be either ROC or PR"):
        cm.streaming_curve_points(lab, sc, curve="AUC")
    with pytest.raises(ValueError, match="must be in the range"):
        cm.precision_at_recall(lab, sc, 1.5)


def test_covariance_and_pearson_stream_with_weights():
    x, y = RNG.standard_normal(30), RNG.standard_normal(30)
    y = 0.6 * x + 0.4 * y
    w = RNG.uniform(0.5, 2.0, 30)
    xs, ys, ws = tf.placeholder(tf.float64, [None]), tf.placeholder(tf.float64, [None]), tf.placeholder(tf.float64, [None])
    cov, cov_update = cm.streaming_covariance(xs, ys, weights=ws)
    r, r_update = cm.streaming_pearson_correlation(xs, ys)
    n, n_update = cm.count(xs)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert np.isnan(sess.run(cov))  # nothing seen yet
        for part in (slice(0, 10), slice(10, 30)):
            sess.run([cov_update, r_update, n_update], {xs: x[part], ys: y[part], ws: w[part]})
        got_cov, got_r, got_n = sess.run([cov, r, n])
    mx, my = np.sum(w * x) / np.sum(w), np.sum(w * y) / np.sum(w)
    assert got_cov == pytest.approx(np.sum(w * (x - mx) * (y - my)) / (np.sum(w) - 1), rel=1e-9)
    assert got_r == pytest.approx(np.corrcoef(x, y)[0, 1], rel=1e-9)
    assert got_n == 30


def test_streaming_names_take_the_predictions_first():
    labels = RNG.integers(0, 4, 40)
    predictions = np.where(RNG.random(40) < 0.7, labels, RNG.integers(0, 4, 40))
    scores = RNG.standard_normal((40, 4)).astype(np.float32)
    new = run_updates(tf.metrics.mean_iou(tf.constant(labels), tf.constant(predictions), 4),
                      tf.metrics.recall_at_k(tf.constant(labels), tf.constant(scores), 2))
    old = run_updates(cm.streaming_mean_iou(tf.constant(predictions), tf.constant(labels), 4),
                      cm.streaming_sparse_recall_at_k(tf.constant(scores), tf.constant(labels), 2),
                      cm.streaming_recall_at_k(tf.constant(scores), tf.constant(labels.astype(np.int32)), 2))
    top2 = np.argsort(-scores, axis=1)[:, :2]
    in_top = np.mean([labels[i] in top2[i] for i in range(40)])
    np.testing.assert_allclose(old, [new[0], new[1], in_top], rtol=1e-6)


def test_accuracy_and_confusion_matrix():
    with tf.Session() as sess:
        acc, matrix = sess.run([cm.accuracy(tf.constant([1, 2, 3, 4]), tf.constant([1, 2, 0, 4]),
                                            weights=tf.constant([1.0, 1.0, 2.0, 0.0])),
                                cm.confusion_matrix(tf.constant([0, 1, 1]), tf.constant([0, 0, 1]), num_classes=2)])
    assert acc == pytest.approx(0.5)
    np.testing.assert_array_equal(matrix, [[1, 0], [1, 1]])
    with pytest.raises(ValueError, match="should match"):
        cm.accuracy(tf.constant([1, 2]), tf.constant([1.0, 2.0]))


def test_set_ops_match_python_sets():
    a = RNG.integers(0, 6, (4, 5)).astype(np.int64)
    b = RNG.integers(0, 6, (4, 3)).astype(np.int64)
    ops = {"intersection": (cm.set_intersection(a, b), lambda x, y: x & y),
           "union": (cm.set_union(a, b), lambda x, y: x | y),
           "a-b": (cm.set_difference(a, b), lambda x, y: x - y),
           "b-a": (cm.set_difference(a, b, aminusb=False), lambda x, y: y - x)}
    with tf.Session() as sess:
        sizes = sess.run(cm.set_size(a))
        results = sess.run({k: v for k, (v, _) in ops.items()})
    np.testing.assert_array_equal(sizes, [len(set(row)) for row in a])
    for name, (_, combine) in ops.items():
        got = results[name]
        for row in range(4):
            values = got.values[got.indices[:, 0] == row].tolist()
            assert values == sorted(combine(set(a[row]), set(b[row]))), (name, row)
    words = tf.SparseTensor([[0, 0], [0, 1], [1, 0]], tf.constant(["b", "a", "c"]), [2, 2])
    with tf.Session() as sess:
        got = sess.run(cm.set_union(words, tf.SparseTensor([[1, 0]], tf.constant(["a"]), [2, 1])))
    assert got.values.tolist() == [b"a", b"b", b"a", b"c"] and got.dense_shape.tolist() == [2, 2]
    with pytest.raises(ValueError, match="b must be one too"):
        cm.set_union(words, tf.constant([["a"], ["b"]]))
    with pytest.raises(TypeError, match="sets hold integers or strings"):
        cm.set_size(tf.constant([[1.5]]))
