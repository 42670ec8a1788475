"""``tf.metrics``: streaming metrics, as TensorFlow 1.x defines them.

Each metric returns ``(value, update_op)``. ``update_op`` folds one batch into running totals kept
in local variables (``GraphKeys.LOCAL_VARIABLES``, reset by ``local_variables_initializer()``,
left out of checkpoints) and returns the updated value; ``value`` reads the totals without
changing them. Evaluating a data set is: initialize the locals, run ``update_op`` over every
batch, read ``value``::

    acc, acc_update = trainer.metrics.accuracy(labels, predictions)
    sess.run(trainer.local_variables_initializer())
    for batch in batches: sess.run(acc_update, feed(batch))
    sess.run(acc)
"""

from __future__ import annotations

import numpy as np

from trainer.graph import GraphKeys, Tensor, control_dependencies, get_default_graph, name_scope
from trainer.ops import (cast, constant, convert_to_tensor, equal, greater, maximum, ones_like, reduce_sum, reshape,
                         sqrt, subtract)
from trainer.variables import Variable

__all__ = [
    "accuracy", "auc", "false_negatives", "false_positives", "mean", "mean_absolute_error",
    "mean_squared_error", "precision", "recall", "root_mean_squared_error", "true_negatives",
    "true_positives",
]

_EPSILON = 1e-7  # TensorFlow's, in AUC's rates
METRIC_VARIABLES = "metric_variables"  # TensorFlow's GraphKeys.METRIC_VARIABLES


def _local(shape, name: str) -> Variable:
    return Variable(np.zeros(shape, np.float32), trainable=False, name=name,
                    collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES])


def _float(x) -> Tensor:
    x = convert_to_tensor(x)
    return x if x.dtype == np.float32 else cast(x, np.float32)


def _weighted(values: Tensor, weights) -> tuple[Tensor, Tensor]:
    """(sum of values * weights, sum of weights), weights broadcast to the values' shape."""
    ones = ones_like(values)
    if weights is None:
        return reduce_sum(values), reduce_sum(ones)
    w = _float(weights) * ones  # broadcast, as TensorFlow does
    return reduce_sum(values * w), reduce_sum(w)


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """num / den, 0 where den is 0 (TensorFlow's div_no_nan for non-negative totals)."""
    return num / maximum(den, np.float32(1e-30))


def _collect(value, update, metrics_collections, updates_collections):
    g = get_default_graph()
    for key in metrics_collections or ():
        g.add_to_collection(key, value)
    for key in updates_collections or ():
        g.add_to_collection(key, update)
    return value, update


def _streaming_mean(values: Tensor, weights, name: str, metrics_collections, updates_collections):
    with name_scope(name):
        total, count = _local((), "total"), _local((), "count")
        batch_total, batch_count = _weighted(values, weights)
        value = _ratio(total.value(), count.value())
        updates = [total.assign_add(batch_total), count.assign_add(batch_count)]
        with control_dependencies(updates):
            update = _ratio(total.value() * 1.0, count.value() * 1.0)
    return _collect(value, update, metrics_collections, updates_collections)


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of every value seen."""
    return _streaming_mean(_float(values), weights, name or "mean", metrics_collections, updates_collections)


def accuracy(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """How often ``predictions`` equals ``labels``.

    ``predictions`` are class ids; logits (one rank more than ``labels``) are argmax-ed first,
    a convenience TensorFlow does not offer.
    """
    labels, predictions = convert_to_tensor(labels), convert_to_tensor(predictions)
    if predictions.shape is not None and labels.shape is not None and len(predictions.shape) == len(labels.shape) + 1:
        from trainer.ops import argmax

        predictions = argmax(predictions, axis=-1)
    if predictions.dtype != labels.dtype:
        predictions = cast(predictions, labels.dtype)
    return _streaming_mean(cast(equal(predictions, labels), np.float32), weights, name or "accuracy",
                           metrics_collections, updates_collections)


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                       name=None):
    diff = subtract(_float(predictions), _float(labels))
    return _streaming_mean(diff * diff, weights, name or "mean_squared_error", metrics_collections,
                           updates_collections)


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                        name=None):
    from trainer.ops import abs as abs_

    return _streaming_mean(abs_(subtract(_float(predictions), _float(labels))), weights,
                           name or "mean_absolute_error", metrics_collections, updates_collections)


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                            name=None):
    value, update = mean_squared_error(labels, predictions, weights, name=name or "root_mean_squared_error")
    return _collect(sqrt(value), sqrt(update), metrics_collections, updates_collections)


# -- confusion counts at one threshold (labels and predictions are booleans, or 0/1) ------------------
def _as_bool_float(x) -> Tensor:
    x = convert_to_tensor(x)
    return cast(x, np.float32) if x.dtype == np.bool_ else cast(greater(_float(x), np.float32(0.5)), np.float32)


def _count(kind: str):
    def metric(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
        lab, pred = _as_bool_float(labels), _as_bool_float(predictions)
        hit = {"true_positives": lab * pred, "false_positives": (1.0 - lab) * pred,
               "true_negatives": (1.0 - lab) * (1.0 - pred), "false_negatives": lab * (1.0 - pred)}[kind]
        with name_scope(name or kind):
            total = _local((), "count")
            batch, _ = _weighted(hit, weights)
            update = total.assign_add(batch)
            value = total.value() * 1.0
        return _collect(value, update, metrics_collections, updates_collections)

    metric.__name__ = kind
    metric.__doc__ = f"The (weighted) number of {kind.replace('_', ' ')} seen (predictions > 0.5 count as true)."
    return metric


true_positives = _count("true_positives")
false_positives = _count("false_positives")
true_negatives = _count("true_negatives")
false_negatives = _count("false_negatives")


def _rate(name: str, other: str):
    def metric(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, scope=None):
        with name_scope(scope or name):
            tp, tp_update = true_positives(labels, predictions, weights)
            miss, miss_update = _count(other)(labels, predictions, weights)
            value = _ratio(tp, tp + miss)
            update = _ratio(tp_update, tp_update + miss_update)
        return _collect(value, update, metrics_collections, updates_collections)

    metric.__name__ = name
    return metric


precision = _rate("precision", "false_positives")
precision.__doc__ = "tp / (tp + fp) over everything seen."
recall = _rate("recall", "false_negatives")
recall.__doc__ = "tp / (tp + fn) over everything seen."


def auc(labels, predictions, weights=None, num_thresholds: int = 200, metrics_collections=None,
        updates_collections=None, curve: str = "ROC", name=None, summation_method: str = "trapezoidal"):
    """Area under the ROC (or ``curve="PR"``) curve, from confusion counts at ``num_thresholds``
    thresholds spread over [0, 1], by the trapezoidal rule, as TensorFlow 1.x approximates it."""
    if curve not in ("ROC", "PR"):
        raise ValueError(f"auc: curve must be 'ROC' or 'PR', got {curve!r}")
    if summation_method != "trapezoidal":
        raise ValueError(f"auc: only summation_method='trapezoidal' is supported, got {summation_method!r}")
    if num_thresholds < 2:
        raise ValueError(f"auc: num_thresholds must be at least 2, got {num_thresholds}")
    inner = [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    thresholds = np.asarray([-_EPSILON] + inner + [1.0 + _EPSILON], np.float32).reshape(1, -1)
    with name_scope(name or "auc"):
        pred = reshape(_float(predictions), (-1, 1))
        lab = reshape(_as_bool_float(labels), (-1, 1))
        above = cast(greater(pred, constant(thresholds)), np.float32)  # (n, thresholds)
        w = 1.0 if weights is None else reshape(_float(weights), (-1, 1))
        counts = {"tp": above * lab * w, "fp": above * (1.0 - lab) * w,
                  "fn": (1.0 - above) * lab * w, "tn": (1.0 - above) * (1.0 - lab) * w}
        totals = {k: _local((num_thresholds,), k) for k in counts}
        updates = [totals[k].assign_add(reduce_sum(v, axis=0)) for k, v in counts.items()]
        value = _area({k: v.value() for k, v in totals.items()}, curve, num_thresholds)
        with control_dependencies(updates):
            update = _area({k: v.value() * 1.0 for k, v in totals.items()}, curve, num_thresholds)
    return _collect(value, update, metrics_collections, updates_collections)


def _area(c: dict, curve: str, n: int) -> Tensor:
    recall_ = (c["tp"] + _EPSILON) / (c["tp"] + c["fn"] + _EPSILON)
    if curve == "ROC":
        x, y = c["fp"] / (c["fp"] + c["tn"] + _EPSILON), recall_
    else:
        x, y = recall_, (c["tp"] + _EPSILON) / (c["tp"] + c["fp"] + _EPSILON)
    return reduce_sum((x[: n - 1] - x[1:]) * (y[: n - 1] + y[1:]) * 0.5)
