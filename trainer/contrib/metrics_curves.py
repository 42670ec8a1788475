"""``tf.contrib.metrics``' own streaming metrics: ``f1_score`` (the best F1 over thresholds),
``precision_at_recall``, ``recall_at_precision``, ``streaming_curve_points`` (the ROC or PR
curve's points), ``streaming_covariance``, ``streaming_pearson_correlation`` and ``count``, plus
the non-streaming ``accuracy``.

The threshold-based ones read confusion counts at ``num_thresholds`` thresholds spread over
[0, 1] (as ``tf.metrics.auc``); covariance keeps float64 running sums of the weights, x, y and
x*y, from which the unbiased co-moment follows (NaN until two examples are seen, as TF's).
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import argmin, greater_equal, reduce_max, reduce_sum, stack
from trainer.graph import Tensor, control_dependencies, name_scope
from trainer.metrics import as_float, collected, confusion_at_thresholds, metric_variable
from trainer.metrics_more import EPSILON
from trainer.ops import abs as abs_, cast, convert_to_tensor, equal, gather, greater, ones_like, reshape, sqrt, where

__all__ = ["accuracy", "count", "f1_score", "precision_at_recall", "recall_at_precision", "streaming_covariance",
           "streaming_curve_points", "streaming_pearson_correlation"]

F64 = np.float64


def _thresholds(num_thresholds: int) -> list[float]:
    if num_thresholds < 2:
        raise ValueError(f"num_thresholds must be > 1, given {num_thresholds}")
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - EPSILON] + inner + [1.0 + EPSILON]


def _from_confusion(labels, predictions, weights, num_thresholds: int, scope: str, compute, metrics_collections,
                    updates_collections):
    """A value computed from the (tp, fp, fn, tn) counts at the thresholds, streamed."""
    with name_scope(scope):
        totals, updates = confusion_at_thresholds(labels, predictions, _thresholds(num_thresholds), weights,
                                                  ["tp", "fp", "fn", "tn"])
        value = compute({k: v.value() for k, v in totals.items()})
        with control_dependencies(updates):
            update = compute({k: v.value() * 1.0 for k, v in totals.items()})
    return collected(value, update, metrics_collections, updates_collections)


def f1_score(labels, predictions, weights=None, num_thresholds: int = 200, metrics_collections=None,
             updates_collections=None, name=None):
    """The highest F1 (2PR / (P + R)) over the thresholds."""
    def best_f1(c):
        precision = c["tp"] / (EPSILON + c["tp"] + c["fp"])
        recall = c["tp"] / (EPSILON + c["tp"] + c["fn"])
        return reduce_max(2 * precision * recall / (EPSILON + precision + recall))

    return _from_confusion(labels, predictions, weights, num_thresholds, name or "f1", best_f1, metrics_collections,
                           updates_collections)


def precision_at_recall(labels, predictions, target_recall: float, weights=None, num_thresholds: int = 200,
                        metrics_collections=None, updates_collections=None, name=None):
    """The precision at the threshold whose recall is nearest ``target_recall``."""
    if not 0 <= target_recall <= 1:
        raise ValueError(f"`target_recall` must be in the range [0, 1], given {target_recall}.")

    def compute(c):
        index = argmin(abs_(c["tp"] / (c["tp"] + c["fn"] + EPSILON) - np.float32(target_recall)), axis=0)
        tp, fp = gather(c["tp"], index), gather(c["fp"], index)
        return tp / (tp + fp + EPSILON)

    return _from_confusion(labels, predictions, weights, num_thresholds, name or "precision_at_recall", compute,
                           metrics_collections, updates_collections)


def recall_at_precision(labels, predictions, precision: float, weights=None, num_thresholds: int = 200,
                        metrics_collections=None, updates_collections=None, name=None, strict_mode: bool = False):
    """The recall at the threshold whose precision is nearest ``precision``; with ``strict_mode``, at
    the threshold whose precision is the lowest still at or above it (0 when none is)."""
    if not 0 <= precision <= 1:
        raise ValueError(f"`precision` must be in the range [0, 1], given {precision}.")

    def compute(c):
        precisions = c["tp"] / (c["tp"] + c["fp"] + EPSILON)
        target = np.float32(precision)
        if strict_mode:
            reached = greater_equal(precisions, target)
            index = argmin(where(reached, precisions, precisions * 0 + np.float32(np.inf)), axis=0)
        else:
            index = argmin(abs_(precisions - target), axis=0)
        tp, fn = gather(c["tp"], index), gather(c["fn"], index)
        recall = tp / (tp + fn + EPSILON)
        if strict_mode:
            return where(gather(reached, index), recall, recall * 0)
        return recall

    return _from_confusion(labels, predictions, weights, num_thresholds, name or "recall_at_precision", compute,
                           metrics_collections, updates_collections)


def streaming_curve_points(labels=None, predictions=None, weights=None, num_thresholds: int = 200,
                           metrics_collections=None, updates_collections=None, curve: str = "ROC", name=None):
    """The curve's [num_thresholds, 2] points: (false positive rate, recall) for ROC, (recall, precision) for PR."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"curve must be either ROC or PR, {curve} unknown")

    def points(c):
        recall = (c["tp"] + EPSILON) / (c["tp"] + c["fn"] + EPSILON)
        if curve == "ROC":
            return stack([c["fp"] / (c["fp"] + c["tn"] + EPSILON), recall], axis=1)
        return stack([recall, (c["tp"] + EPSILON) / (c["tp"] + c["fp"] + EPSILON)], axis=1)

    return _from_confusion(labels, predictions, weights, num_thresholds, name or "curve_points", points,
                           metrics_collections, updates_collections)


class _Moments:
    """Float64 running sums of w, w*x, w*y, w*x*y, w*x*x and w*y*y."""

    def __init__(self, x: Tensor, y: Tensor, weights):
        x = reshape(cast(convert_to_tensor(x), F64), (-1,))
        y = reshape(cast(convert_to_tensor(y), F64), (-1,))
        w = ones_like(x) if weights is None else reshape(cast(convert_to_tensor(weights), F64), (-1,)) * ones_like(x)
        batch = {"n": w, "x": w * x, "y": w * y, "xy": w * x * y, "xx": w * x * x, "yy": w * y * y}
        self.sums = {k: metric_variable((), f"sum_{k}", F64) for k in batch}
        self.updates = [self.sums[k].assign_add(reduce_sum(v)) for k, v in batch.items()]

    def values(self, fresh: bool) -> dict:
        return {k: v.value() * 1.0 if fresh else v.value() for k, v in self.sums.items()}


def _covariance(s: dict, a: str, b: str) -> Tensor:
    """Unbiased co-moment / (n - 1); NaN while n <= 1."""
    comoment = s[a + b] - s[a] * s[b] / where(greater(s["n"], 0.0), s["n"], s["n"] * 0 + 1)
    defined = greater(s["n"], np.float64(1))
    return where(defined, comoment / where(defined, s["n"] - 1, s["n"] * 0 + 1), s["n"] * 0 + np.float64(np.nan))


def streaming_covariance(predictions, labels, weights=None, metrics_collections=None, updates_collections=None,
                         name=None):
    """The (weighted, unbiased) covariance of predictions and labels over every batch."""
    with name_scope(name or "covariance"):
        moments = _Moments(predictions, labels, weights)
        value = _covariance(moments.values(False), "x", "y")
        with control_dependencies(moments.updates):
            update = _covariance(moments.values(True), "x", "y")
    return collected(value, update, metrics_collections, updates_collections)


def _pearson(s: dict) -> Tensor:
    return _covariance(s, "x", "y") / (sqrt(_covariance(s, "x", "x")) * sqrt(_covariance(s, "y", "y")))


def streaming_pearson_correlation(predictions, labels, weights=None, metrics_collections=None,
                                  updates_collections=None, name=None):
    """Pearson's r of predictions and labels over every batch."""
    with name_scope(name or "pearson_r"):
        moments = _Moments(predictions, labels, weights)
        value = _pearson(moments.values(False))
        with control_dependencies(moments.updates):
            update = _pearson(moments.values(True))
    return collected(value, update, metrics_collections, updates_collections)


def count(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """How many values (the sum of their weights) were seen."""
    ones = ones_like(as_float(values))
    with name_scope(name or "count"):
        total = metric_variable((), "count")
        update = total.assign_add(reduce_sum(ones if weights is None else ones * as_float(weights)))
    return collected(total.value(), update, metrics_collections, updates_collections)


def accuracy(predictions, labels, weights=None, name=None) -> Tensor:
    """The (weighted) fraction of predictions equal to the labels in this batch (not streamed)."""
    predictions, labels = convert_to_tensor(predictions), convert_to_tensor(labels)
    if predictions.dtype != labels.dtype:
        raise ValueError(f"accuracy: dtypes of predictions ({predictions.dtype}) and labels ({labels.dtype}) "
                         f"should match")
    right = cast(equal(predictions, labels), np.float32)
    if weights is None:
        return reduce_sum(right) / reduce_sum(ones_like(right))
    w = as_float(weights) * ones_like(right)
    return reduce_sum(right * w) / reduce_sum(w)


def confusion_matrix(labels, predictions, num_classes=None, dtype=np.int32, name=None, weights=None) -> Tensor:
    """``tf.confusion_matrix`` (rows labels, columns predictions)."""
    from trainer.array_ops import confusion_matrix as matrix

    return matrix(labels, predictions, num_classes, weights=weights, dtype=dtype, name=name)
