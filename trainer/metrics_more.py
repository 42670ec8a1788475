"""``tf.metrics.mean_iou``, ``mean_cosine_distance``, ``sensitivity_at_specificity`` and
``specificity_at_sensitivity``, streamed as the other tf.metrics (value, update_op).

``mean_iou`` keeps a float64 [num_classes, num_classes] confusion matrix (rows labels, columns
predictions); the value is the mean over the classes that occur (as label or prediction) of
true / (row + column - true), and its update op returns the updated matrix, as TensorFlow's.
The sensitivity/specificity pair reads confusion counts at ``num_thresholds`` thresholds spread
over [0, 1] (as ``auc``) and reports one rate at the threshold whose other rate is nearest the
target (the first such threshold for sensitivity_at_specificity, the last for
specificity_at_sensitivity, as TensorFlow picks them).
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import argmin, confusion_matrix, cumsum, diag_part, reduce_min, reduce_sum
from trainer.graph import Tensor, control_dependencies, name_scope
from trainer.metrics import as_float, collected, confusion_at_thresholds, mean, metric_variable
from trainer.ops import (abs as abs_, argmax, cast, convert_to_tensor, equal, gather, greater, maximum, reshape,
                         subtract, where)

__all__ = ["mean_cosine_distance", "mean_iou", "sensitivity_at_specificity", "specificity_at_sensitivity"]

EPSILON = 1e-7  # TensorFlow's kepsilon


def _positive(x: Tensor) -> Tensor:
    return greater(x, np.float64(0))


def _iou(cm: Tensor) -> Tensor:
    """The mean over the classes with a non-zero denominator of true / (row + column - true); 0 if none."""
    rows, cols, true = reduce_sum(cm, axis=0), reduce_sum(cm, axis=1), diag_part(cm)
    denominator = rows + cols - true
    per_class = true / where(_positive(denominator), denominator, denominator * 0 + 1)
    count = reduce_sum(cast(_positive(denominator), np.float64))
    return where(_positive(count), reduce_sum(per_class) / maximum(count, np.float64(1)), count * 0)


def mean_iou(labels, predictions, num_classes: int, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """The mean intersection-over-union of the classes; the update op returns the confusion matrix."""
    if int(num_classes) < 1:
        raise ValueError(f"mean_iou: num_classes must be positive, given {num_classes}")
    labels = reshape(convert_to_tensor(labels), (-1,))
    predictions = reshape(convert_to_tensor(predictions), (-1,))
    w = None if weights is None else reshape(cast(convert_to_tensor(weights), np.float64), (-1,))
    with name_scope(name or "mean_iou"):
        total = metric_variable((num_classes, num_classes), "total_confusion_matrix", np.float64)
        batch = confusion_matrix(labels, predictions, num_classes, weights=w, dtype=np.float64)
        update = total.assign_add(batch)
        value = _iou(total.value())
    return collected(value, update, metrics_collections, updates_collections)


def mean_cosine_distance(labels, predictions, dim: int, weights=None, metrics_collections=None,
                         updates_collections=None, name=None):
    """1 - the mean of the dot products along ``dim`` (labels and predictions are unit-normalized)."""
    products = reduce_sum(as_float(predictions) * as_float(labels), axis=dim, keepdims=True)
    value, update = mean(products, weights, None, None, name or "mean_cosine_distance")
    return collected(subtract(np.float32(1), value), subtract(np.float32(1), update), metrics_collections,
                     updates_collections)


def _thresholds(num_thresholds: int) -> list[float]:
    if num_thresholds < 2:
        raise ValueError(f"`num_thresholds` must be > 1, given {num_thresholds}")
    inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    return [0.0 - EPSILON] + inner + [1.0 + EPSILON]


def _rate_at(c: dict, target: float, of: tuple, at: tuple, last: bool) -> Tensor:
    """``at`` rate (num/(num+other)) at the threshold whose ``of`` rate is nearest ``target``."""
    rates = c[of[0]] / (c[of[0]] + c[of[1]] + EPSILON)
    gap = abs_(rates - np.float32(target))
    if last:  # the last index at the minimum gap: the argmax of the running count of minima
        index = argmax(cumsum(cast(equal(gap, reduce_min(gap)), np.int64)), axis=0)
    else:
        index = argmin(gap, axis=0)
    num, other = gather(c[at[0]], index), gather(c[at[1]], index)
    return num / (num + other + EPSILON)


def _at_rate(labels, predictions, target: float, what: str, weights, num_thresholds: int, scope: str, of, at,
             last: bool, metrics_collections, updates_collections):
    if not 0 <= target <= 1:
        raise ValueError(f"`{what}` must be in the range [0, 1].")
    with name_scope(scope):
        totals, updates = confusion_at_thresholds(labels, predictions, _thresholds(num_thresholds), weights,
                                                  ["tp", "fp", "fn", "tn"])
        value = _rate_at({k: v.value() for k, v in totals.items()}, target, of, at, last)
        with control_dependencies(updates):
            update = _rate_at({k: v.value() * 1.0 for k, v in totals.items()}, target, of, at, last)
    return collected(value, update, metrics_collections, updates_collections)


def sensitivity_at_specificity(labels, predictions, specificity: float, weights=None, num_thresholds: int = 200,
                               metrics_collections=None, updates_collections=None, name=None):
    """The recall (tp / (tp + fn)) at the threshold whose specificity (tn / (tn + fp)) is nearest ``specificity``."""
    return _at_rate(labels, predictions, specificity, "specificity", weights, num_thresholds,
                    name or "sensitivity_at_specificity", ("tn", "fp"), ("tp", "fn"), False, metrics_collections,
                    updates_collections)


def specificity_at_sensitivity(labels, predictions, sensitivity: float, weights=None, num_thresholds: int = 200,
                               metrics_collections=None, updates_collections=None, name=None):
    """The specificity (tn / (tn + fp)) at the threshold whose sensitivity (tp / (tp + fn)) is nearest ``sensitivity``."""
    return _at_rate(labels, predictions, sensitivity, "sensitivity", weights, num_thresholds,
                    name or "specificity_at_sensitivity", ("tp", "fn"), ("tn", "fp"), True, metrics_collections,
                    updates_collections)
