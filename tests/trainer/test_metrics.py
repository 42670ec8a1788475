"""tf.metrics: streaming (value, update_op) pairs over local variables, checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


@pytest.fixture(autouse=True)
def fresh_graph():
    g = tf.Graph()
    with g.as_default():
        yield g


def stream(metric_pair, feeds_per_batch, placeholders):
    value, update = metric_pair
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert np.all(sess.run(value) == 0.0)  # nothing seen yet: 0, not NaN
        last = None
        for batch in feeds_per_batch:
            last = sess.run(update, dict(zip(placeholders, batch)))
        final = sess.run(value)
    assert np.allclose(last, final)  # update_op returns the updated value
    return final


def batches(rng, n=3, size=40, classes=4):
    return [(rng.integers(classes, size=size), rng.integers(classes, size=size)) for _ in range(n)]


def test_accuracy_mean_and_errors_stream_over_batches():
    rng = np.random.default_rng(0)
    labels, preds = tf.placeholder(np.int64, (None,)), tf.placeholder(np.int64, (None,))
    data = batches(rng)
    all_l = np.concatenate([b[0] for b in data])
    all_p = np.concatenate([b[1] for b in data])
    assert np.isclose(stream(tf.metrics.accuracy(labels, preds), data, [labels, preds]), np.mean(all_l == all_p))
    assert np.isclose(stream(tf.metrics.mean(preds), [(p,) for _, p in data], [preds]), all_p.mean())
    assert np.isclose(stream(tf.metrics.mean_squared_error(labels, preds), data, [labels, preds]),
                      np.mean((all_l - all_p) ** 2.0), rtol=1e-6)
    assert np.isclose(stream(tf.metrics.root_mean_squared_error(labels, preds), data, [labels, preds]),
                      np.sqrt(np.mean((all_l - all_p) ** 2.0)), rtol=1e-6)
    assert np.isclose(stream(tf.metrics.mean_absolute_error(labels, preds), data, [labels, preds]),
                      np.mean(np.abs(all_l - all_p)), rtol=1e-6)


def test_weighted_mean_and_accuracy_from_logits():
    values, weights = tf.placeholder(np.float32, (None,)), tf.placeholder(np.float32, (None,))
    got = stream(tf.metrics.mean(values, weights), [(np.float32([1, 2, 3]), np.float32([1, 0, 3]))], [values, weights])
    assert np.isclose(got, (1 + 9) / 4)
    labels, logits = tf.placeholder(np.int64, (None,)), tf.placeholder(np.float32, (None, 3))
    acc = stream(tf.metrics.accuracy(labels, logits), [(np.int64([2, 0]), np.float32([[0, 0, 1], [0, 1, 0]]))],
                 [labels, logits])
    assert acc == 0.5


def test_precision_recall_and_confusion_counts():
    rng = np.random.default_rng(1)
    labels, preds = tf.placeholder(np.bool_, (None,)), tf.placeholder(np.bool_, (None,))
    data = [(rng.random(50) < 0.4, rng.random(50) < 0.5) for _ in range(3)]
    lab = np.concatenate([d[0] for d in data])
    pre = np.concatenate([d[1] for d in data])
    tp, fp, fn = np.sum(lab & pre), np.sum(~lab & pre), np.sum(lab & ~pre)
    assert np.isclose(stream(tf.metrics.precision(labels, preds), data, [labels, preds]), tp / (tp + fp))
    assert np.isclose(stream(tf.metrics.recall(labels, preds), data, [labels, preds]), tp / (tp + fn))
    assert stream(tf.metrics.false_negatives(labels, preds), data, [labels, preds]) == fn
    assert stream(tf.metrics.true_negatives(labels, preds), data, [labels, preds]) == np.sum(~lab & ~pre)


def test_auc_matches_the_exact_area_within_threshold_resolution():
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(2)
    labels, scores = tf.placeholder(np.int64, (None,)), tf.placeholder(np.float32, (None,))
    data = []
    for _ in range(3):
        lab = rng.integers(2, size=200)
        data.append((lab, np.clip(0.3 * lab + rng.random(200) * 0.7, 0, 1).astype(np.float32)))
    lab = np.concatenate([d[0] for d in data])
    sc = np.concatenate([d[1] for d in data])
    roc = stream(tf.metrics.auc(labels, scores, num_thresholds=1000), data, [labels, scores])
    assert abs(roc - metrics.roc_auc_score(lab, sc)) < 5e-3
    pr = stream(tf.metrics.auc(labels, scores, curve="PR", num_thresholds=1000), data, [labels, scores])
    assert abs(pr - metrics.average_precision_score(lab, sc)) < 2e-2


def test_local_variables_restart_metrics_and_stay_out_of_checkpoints(tmp_path):
    labels = tf.placeholder(np.int64, (None,))
    acc, update = tf.metrics.accuracy(labels, labels * 0)
    kept = tf.Variable(np.float32(1.0), name="kept")
    assert [v.name for v in tf.local_variables()] == ["accuracy/total:0", "accuracy/count:0"]
    saver = tf.Saver()
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
        sess.run(update, {labels: np.int64([0, 1])})
        assert sess.run(acc) == 0.5
        sess.run(tf.local_variables_initializer())
        sess.run(update, {labels: np.int64([0])})
        assert sess.run(acc) == 1.0
        path = saver.save(sess, str(tmp_path / "model"))
    assert kept in saver.var_list and not any("accuracy" in v.name for v in saver.var_list)
    assert path


def test_auc_refuses_unknown_curves():
    with pytest.raises(ValueError, match="curve"):
        tf.metrics.auc(tf.constant(np.int64([1])), tf.constant(np.float32([0.5])), curve="DET")


def test_threshold_metrics_and_the_rest_match_numpy():
    rng = np.random.default_rng(3)
    labels, scores = tf.placeholder(np.int64, (None,)), tf.placeholder(np.float32, (None,))
    data = [(rng.integers(2, size=30), rng.random(30).astype(np.float32)) for _ in range(2)]
    lab = np.concatenate([d[0] for d in data]).astype(bool)
    sc = np.concatenate([d[1] for d in data])
    th = [0.25, 0.5, 0.75]
    tp = np.array([np.sum(lab & (sc > t)) for t in th])
    fp = np.array([np.sum(~lab & (sc > t)) for t in th])
    fn = np.array([np.sum(lab & (sc <= t)) for t in th])
    feeds = [labels, scores]
    assert stream(tf.metrics.true_positives_at_thresholds(labels, scores, th), data, feeds).tolist() == tp.tolist()
    assert stream(tf.metrics.false_negatives_at_thresholds(labels, scores, th), data, feeds).tolist() == fn.tolist()
    assert np.allclose(stream(tf.metrics.precision_at_thresholds(labels, scores, th), data, feeds), tp / (tp + fp))
    assert np.allclose(stream(tf.metrics.recall_at_thresholds(labels, scores, th), data, feeds), tp / (tp + fn))
    assert np.isclose(stream(tf.metrics.percentage_below(scores, 0.3), [(d[1],) for d in data], [scores]),
                      np.mean(sc < 0.3))
    vec = tf.placeholder(np.float32, (2,))
    assert stream(tf.metrics.mean_tensor(vec), [(np.float32([1, 2]),), (np.float32([3, 6]),)], [vec]).tolist() == [2, 4]
    ids, preds = tf.placeholder(np.int64, (None,)), tf.placeholder(np.int64, (None,))
    got = stream(tf.metrics.mean_per_class_accuracy(ids, preds, num_classes=3),
                 [(np.int64([0, 0, 1, 2]), np.int64([0, 1, 1, 1]))], [ids, preds])
    assert np.isclose(got, (0.5 + 1.0 + 0.0) / 3)
    y, p, n = (tf.placeholder(np.float32, (None,)) for _ in range(3))
    got = stream(tf.metrics.mean_relative_error(y, p, n), [(np.float32([1, 2]), np.float32([2, 2]), np.float32([2, 0]))],
                 [y, p, n])
    assert np.isclose(got, (0.5 + 0.0) / 2)
