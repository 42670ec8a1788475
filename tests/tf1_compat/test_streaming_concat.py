"""tf.contrib.metrics.streaming_concat and streaming_dynamic_auc: every value seen, kept in a
growing local variable; the exact AUC against the pairwise (Mann-Whitney) formula and a
hand-computed PR area."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

cm = tf.contrib.metrics


def pairwise_auc(labels, scores):
    pos, neg = scores[labels == 1], scores[labels == 0]
    diff = pos[:, None] - neg[None, :]
    return (np.sum(diff > 0) + 0.5 * np.sum(diff == 0)) / diff.size


def test_streaming_concat_grows_and_stops_at_max_size():
    x = tf.placeholder(tf.float32, [None, 2])
    value, update = cm.streaming_concat(x)
    capped, capped_update = cm.streaming_concat(x, max_size=4)
    columns, columns_update = cm.streaming_concat(tf.placeholder_with_default(np.ones((2, 1), np.float32), [2, None]),
                                                  axis=1)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        assert sess.run(value).shape == (0, 2)
        for batch in (np.arange(6).reshape(3, 2), np.arange(6, 10).reshape(2, 2)):
            sess.run([update, capped_update, columns_update], {x: batch})
        got, got_capped, got_columns = sess.run([value, capped, columns])
    np.testing.assert_array_equal(got, np.arange(10).reshape(5, 2))
    np.testing.assert_array_equal(got_capped, np.arange(8).reshape(4, 2))
    assert got_columns.shape == (2, 2)
    with pytest.raises(ValueError, match="statically known along every axis but 0"):
        cm.streaming_concat(tf.placeholder(tf.float32, [None, None]))
    with pytest.raises(ValueError, match="axis must be in"):
        cm.streaming_concat(x, axis=2)


def test_dynamic_auc_is_exact_over_every_batch():
    rng = np.random.default_rng(8)
    labels = rng.integers(0, 2, 60)
    scores = np.round(rng.random(60) * 0.6 + 0.4 * labels, 1)  # ties included
    lab, pred = tf.placeholder(tf.int64, [None]), tf.placeholder(tf.float32, [None])
    auc, update = cm.streaming_dynamic_auc(lab, pred)
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        for part in (slice(0, 25), slice(25, 60)):
            sess.run(update, {lab: labels[part], pred: scores[part]})
        got = sess.run(auc)
    assert got == pytest.approx(pairwise_auc(labels, scores.astype(np.float32)), rel=1e-9)


def test_dynamic_auc_pr_curve_weights_and_degenerate_labels():
    # PR by hand: labels 1, 0, 1 at 0.9, 0.5, 0.3 -> points (0, 1), (0.5, 1), (0.5, 0.5), (1, 2/3)
    pr, pr_update = cm.streaming_dynamic_auc(tf.constant([1, 0, 1]), tf.constant([0.9, 0.5, 0.3]), curve="PR")
    # weights: a weight of 2 on the only misordered pair's negative halves its share
    roc, roc_update = cm.streaming_dynamic_auc(tf.constant([1, 0, 1, 0]), tf.constant([0.9, 0.5, 0.3, 0.1]),
                                               weights=tf.constant([1.0, 2.0, 1.0, 1.0]))
    same, same_update = cm.streaming_dynamic_auc(tf.constant([1, 1]), tf.constant([0.2, 0.4]))
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        got = sess.run([pr_update, roc_update, same_update])
    assert got[0] == pytest.approx(0.5 + 0.5 * (0.5 + 2 / 3) / 2)
    # pairs (pos, neg) weighted by w_pos * w_neg: correct ones are (0.9, 0.5), (0.9, 0.1), (0.3, 0.1)
    assert got[1] == pytest.approx((2 + 1 + 1) / (2 + 1 + 2 + 1))
    assert got[2] == 0.0  # one class only: undefined, reported as 0
    with pytest.raises(ValueError, match="curve must be either ROC or PR"):
        cm.streaming_dynamic_auc(tf.constant([1]), tf.constant([0.5]), curve="XX")
    with pytest.raises(ValueError, match="labels must be bool or integer"):
        cm.streaming_dynamic_auc(tf.constant([0.5]), tf.constant([0.5]))
