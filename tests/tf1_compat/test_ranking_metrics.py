"""tf.metrics at k (precision/recall at k and top k, average precision at k), mean_iou,
mean_cosine_distance and sensitivity/specificity at a target rate, streamed over batches and
checked against plain-Python set arithmetic and NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

RNG = np.random.default_rng(11)


def top_k_ids(scores: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def reference_at_k(labels, ids, class_id=None, weights=None):
    """(tp, fp, fn) summed over rows, by Python sets."""
    tp = fp = fn = 0.0
    for row, (lab, top) in enumerate(zip(labels, ids)):
        w = 1.0 if weights is None else weights[row]
        lab, top = set(lab), set(top)
        if class_id is not None:
            lab, top = lab & {class_id}, top & {class_id}
        tp += w * len(lab & top)
        fp += w * len(top - lab)
        fn += w * len(lab - top)
    return tp, fp, fn


def reference_ap(labels, ids, k):
    aps = []
    for lab, top in zip(labels, ids):
        lab = {x for x in lab if x >= 0}
        hits, total = 0, 0.0
        for i, c in enumerate(top[:k]):
            if c in lab:
                hits += 1
                total += hits / (i + 1)
        aps.append(total / min(len(lab), k))
    return float(np.mean(aps))


def stream(metric, batches):
    """Run the update over each batch of placeholders, then read the value."""
    phs = [tf.placeholder(v.dtype, (None,) + v.shape[1:]) for v in batches[0]]
    value, update = metric(*phs)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for batch in batches:
            sess.run(update, dict(zip(phs, batch)))
        return sess.run(value)


def test_precision_and_recall_at_k_stream_over_batches():
    scores = [RNG.standard_normal((6, 5)).astype(np.float32) for _ in range(3)]
    labels = [RNG.integers(0, 5, (6, 2)).astype(np.int64) for _ in range(3)]
    k = 2
    tp, fp, fn = np.sum([reference_at_k(lab, top_k_ids(s, k)) for lab, s in zip(labels, scores)], axis=0)
    batches = list(zip(labels, scores))
    assert stream(lambda l, p: tf.metrics.precision_at_k(l, p, k), batches) == pytest.approx(tp / (tp + fp))
    assert stream(lambda l, p: tf.metrics.recall_at_k(l, p, k), batches) == pytest.approx(tp / (tp + fn))
    tp3, fp3, fn3 = np.sum([reference_at_k(lab, top_k_ids(s, k), class_id=3) for lab, s in batches], axis=0)
    assert stream(lambda l, p: tf.metrics.precision_at_k(l, p, k, class_id=3), batches) == pytest.approx(
        tp3 / (tp3 + fp3))
    assert stream(lambda l, p: tf.metrics.sparse_precision_at_k(l, p, k, class_id=3), batches) == pytest.approx(
        tp3 / (tp3 + fp3))
    assert stream(lambda l, p: tf.metrics.recall_at_k(l, p, k, class_id=3), batches) == pytest.approx(
        tp3 / (tp3 + fn3))


def test_at_top_k_with_weights_one_label_each_and_sparse_labels():
    ids = np.array([[2, 0, 1], [1, 3, 0], [0, 1, 2]], np.int64)
    labels = np.array([0, 2, 3], np.int64)  # one label a row: [batch]
    weights = np.array([1.0, 0.5, 2.0], np.float32)
    tp, fp, fn = reference_at_k(labels[:, None], ids[:, :2], weights=weights)
    assert stream(lambda l, p, w: tf.metrics.precision_at_top_k(l, p, k=2, weights=w),
                  [(labels, ids, weights)]) == pytest.approx(tp / (tp + fp))
    assert stream(lambda l, p, w: tf.metrics.recall_at_top_k(l, p, k=2, weights=w),
                  [(labels, ids, weights)]) == pytest.approx(tp / (tp + fn))
    sparse = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], tf.constant([2, 1, 4], dtype=tf.int64), [3, 2])
    value, update = tf.metrics.recall_at_top_k(sparse, tf.constant(ids))
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        got = sess.run(update)
    assert got == pytest.approx(2 / 3)  # row 0: {2, 1} both found; row 2: 4 missed; row 1: no labels
    with pytest.raises(ValueError, match="k must be in"):
        tf.metrics.precision_at_top_k(tf.constant(labels), tf.constant(ids), k=4)


def test_nan_when_nothing_counts_for_the_class():
    value, update = tf.metrics.precision_at_k(tf.constant([[1]], dtype=tf.int64), tf.constant([[0.9, 0.1, 0.0]]), 1,
                                              class_id=2)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert np.isnan(sess.run(update))


def test_average_precision_at_k():
    scores = RNG.standard_normal((8, 6)).astype(np.float32)
    labels = RNG.integers(0, 6, (8, 3)).astype(np.int64)
    labels[0, 2] = -1  # ignored
    for k in (1, 3, 6):
        expected = reference_ap(labels, top_k_ids(scores, k), k)
        got = stream(lambda l, p, k=k: tf.metrics.average_precision_at_k(l, p, k), [(labels, scores)])
        assert got == pytest.approx(expected, rel=1e-9), k
    # TF's documented example: labels {0, 3}? predictions ranked 3, 1, 0 -> precision@1 1, @3 2/3 -> (1 + 2/3) / 2
    got = stream(lambda l, p: tf.metrics.sparse_average_precision_at_k(l, p, 3),
                 [(np.array([[0, 3]], np.int64), np.array([[0.3, 0.5, 0.0, 0.9, 0.1]], np.float32))])
    assert got == pytest.approx((1 + 2 / 3) / 2)


def test_mean_iou_and_its_update_returns_the_confusion_matrix():
    labels = RNG.integers(0, 4, 50)
    predictions = np.where(RNG.random(50) < 0.6, labels, RNG.integers(0, 4, 50))
    value, update = tf.metrics.mean_iou(tf.constant(labels), tf.constant(predictions), num_classes=5)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        cm = sess.run(update)
        got = sess.run(value)
    expected_cm = np.zeros((5, 5))
    np.add.at(expected_cm, (labels, predictions), 1)
    np.testing.assert_array_equal(cm, expected_cm)
    ious = [expected_cm[c, c] / (expected_cm[c].sum() + expected_cm[:, c].sum() - expected_cm[c, c])
            for c in range(4)]  # class 4 never occurs: left out of the mean
    assert got == pytest.approx(np.mean(ious))
    with pytest.raises(ValueError, match="num_classes must be positive"):
        tf.metrics.mean_iou(tf.constant(labels), tf.constant(predictions), 0)


def test_mean_cosine_distance():
    a = RNG.standard_normal((5, 3))
    b = RNG.standard_normal((5, 3))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    got = stream(lambda l, p: tf.metrics.mean_cosine_distance(l, p, dim=1),
                 [(a[:2].astype(np.float32), b[:2].astype(np.float32)), (a[2:].astype(np.float32),
                                                                          b[2:].astype(np.float32))])
    assert got == pytest.approx(1 - np.mean(np.sum(a * b, axis=1)), rel=1e-5)


def reference_rates(labels, scores, n):
    thresholds = [-1e-7] + [(i + 1) / (n - 1) for i in range(n - 2)] + [1 + 1e-7]
    out = []
    for t in thresholds:
        pos = scores > t
        tp, fp = np.sum(pos & (labels == 1)), np.sum(pos & (labels == 0))
        fn, tn = np.sum(~pos & (labels == 1)), np.sum(~pos & (labels == 0))
        out.append((tp / (tp + fn + 1e-7), tn / (tn + fp + 1e-7)))
    return np.array(out)


def test_sensitivity_at_specificity_and_back():
    labels = RNG.integers(0, 2, 200)
    scores = np.clip(0.3 * labels + 0.7 * RNG.random(200), 0, 1).astype(np.float32)
    rates = reference_rates(labels, scores, 50)
    sens, spec = rates[:, 0], rates[:, 1]
    first = np.argmin(np.abs(spec - 0.8))
    last = np.flatnonzero(np.abs(sens - 0.7) == np.min(np.abs(sens - 0.7)))[-1]
    got = stream(lambda l, p: tf.metrics.sensitivity_at_specificity(l, p, 0.8, num_thresholds=50),
                 [(labels, scores)])
    assert got == pytest.approx(sens[first], rel=1e-4)
    got = stream(lambda l, p: tf.metrics.specificity_at_sensitivity(l, p, 0.7, num_thresholds=50),
                 [(labels, scores)])
    assert got == pytest.approx(spec[last], rel=1e-4)
    with pytest.raises(ValueError, match=r"`specificity` must be in the range \[0, 1\]"):
        tf.metrics.sensitivity_at_specificity(tf.constant(labels), tf.constant(scores), 1.5)


def test_tf1_eval_script_with_metric_ops_in_an_estimator(tmp_path):
    """An Estimator model_fn reporting recall@k and mean IoU as eval_metric_ops."""
    rng = np.random.default_rng(4)
    y = rng.integers(0, 4, 200)
    x = (np.eye(4)[y] * 3 + rng.standard_normal((200, 4))).astype(np.float32)

    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 4)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdamOptimizer(0.05).minimize(loss, global_step=tf.train.get_or_create_global_step())
        metrics = {"recall_at_2": tf.metrics.recall_at_k(tf.cast(labels, tf.int64), logits, 2),
                   "iou": tf.metrics.mean_iou(labels, tf.argmax(logits, 1), 4)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op, eval_metric_ops=metrics)

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=50, num_epochs=None, shuffle=True), steps=60)
    result = est.evaluate(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=50, shuffle=False))
    assert result["recall_at_2"] > 0.9 and result["iou"] > 0.7, result  # measured 1.0 and 0.95
