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

from trainer.array_ops import reduce_sum
from trainer.graph import GraphKeys, Tensor, control_dependencies, get_default_graph, name_scope
from trainer.ops import (cast, constant, convert_to_tensor, equal, greater, maximum, ones_like, reshape, sqrt,
                         subtract)
from trainer.variables import Variable

__all__ = [
    "accuracy", "auc", "false_negatives", "false_negatives_at_thresholds", "false_positives",
    "false_positives_at_thresholds", "mean", "mean_absolute_error", "mean_per_class_accuracy", "mean_relative_error",
    "mean_squared_error", "mean_tensor", "percentage_below", "precision", "precision_at_thresholds", "recall",
    "recall_at_thresholds", "root_mean_squared_error", "true_negatives", "true_negatives_at_thresholds",
    "true_positives", "true_positives_at_thresholds",
]

_EPSILON = 1e-7  # TensorFlow's, in AUC's rates
METRIC_VARIABLES = GraphKeys.METRIC_VARIABLES


def metric_variable(shape, name: str, dtype=np.float32) -> Variable:
    """A zeroed local variable in GraphKeys.LOCAL_VARIABLES and METRIC_VARIABLES (a metric's running total)."""
    return Variable(np.zeros(shape, dtype), trainable=False, name=name,
                    collections=[GraphKeys.LOCAL_VARIABLES, METRIC_VARIABLES])


def as_float(x) -> Tensor:
    x = convert_to_tensor(x)
    return x if x.dtype == np.float32 else cast(x, np.float32)


def _weighted(values: Tensor, weights) -> tuple[Tensor, Tensor]:
    """(sum of values * weights, sum of weights), weights broadcast to the values' shape."""
    ones = ones_like(values)
    if weights is None:
        return reduce_sum(values), reduce_sum(ones)
    w = as_float(weights) * ones  # broadcast, as TensorFlow does
    return reduce_sum(values * w), reduce_sum(w)


def _ratio(num: Tensor, den: Tensor) -> Tensor:
    """num / den, 0 where den is 0 (TensorFlow's div_no_nan for non-negative totals)."""
    return num / maximum(den, np.float32(1e-30))


def collected(value, update, metrics_collections, updates_collections):
    g = get_default_graph()
    for key in metrics_collections or ():
        g.add_to_collection(key, value)
    for key in updates_collections or ():
        g.add_to_collection(key, update)
    return value, update


def streaming_mean(values: Tensor, weights, name: str, metrics_collections, updates_collections):
    with name_scope(name):
        total, count = metric_variable((), "total"), metric_variable((), "count")
        batch_total, batch_count = _weighted(values, weights)
        value = _ratio(total.value(), count.value())
        updates = [total.assign_add(batch_total), count.assign_add(batch_count)]
        with control_dependencies(updates):
            update = _ratio(total.value() * 1.0, count.value() * 1.0)
    return collected(value, update, metrics_collections, updates_collections)


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The (weighted) mean of every value seen."""
    return streaming_mean(as_float(values), weights, name or "mean", metrics_collections, updates_collections)


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
    return streaming_mean(cast(equal(predictions, labels), np.float32), weights, name or "accuracy",
                           metrics_collections, updates_collections)


def mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                       name=None):
    diff = subtract(as_float(predictions), as_float(labels))
    return streaming_mean(diff * diff, weights, name or "mean_squared_error", metrics_collections,
                           updates_collections)


def mean_absolute_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                        name=None):
    from trainer.ops import abs as abs_

    return streaming_mean(abs_(subtract(as_float(predictions), as_float(labels))), weights,
                           name or "mean_absolute_error", metrics_collections, updates_collections)


def root_mean_squared_error(labels, predictions, weights=None, metrics_collections=None, updates_collections=None,
                            name=None):
    value, update = mean_squared_error(labels, predictions, weights, name=name or "root_mean_squared_error")
    return collected(sqrt(value), sqrt(update), metrics_collections, updates_collections)


# -- confusion counts at one threshold (labels and predictions are booleans, or 0/1) ------------------
def _as_bool_float(x) -> Tensor:
    x = convert_to_tensor(x)
    return cast(x, np.float32) if x.dtype == np.bool_ else cast(greater(as_float(x), np.float32(0.5)), np.float32)


def _count(kind: str):
    def metric(labels, predictions, weights=None, metrics_collections=None, updates_collections=None, name=None):
        lab, pred = _as_bool_float(labels), _as_bool_float(predictions)
        hit = {"true_positives": lab * pred, "false_positives": (1.0 - lab) * pred,
               "true_negatives": (1.0 - lab) * (1.0 - pred), "false_negatives": lab * (1.0 - pred)}[kind]
        with name_scope(name or kind):
            total = metric_variable((), "count")
            batch, _ = _weighted(hit, weights)
            update = total.assign_add(batch)
            value = total.value() * 1.0
        return collected(value, update, metrics_collections, updates_collections)

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
        return collected(value, update, metrics_collections, updates_collections)

    metric.__name__ = name
    return metric


precision = _rate("precision", "false_positives")
precision.__doc__ = "tp / (tp + fp) over everything seen."
recall = _rate("recall", "false_negatives")
recall.__doc__ = "tp / (tp + fn) over everything seen."


def confusion_at_thresholds(labels, predictions, thresholds, weights, kinds):
    """Local (len(thresholds),) totals of each of ``kinds`` ("tp", "fp", "fn", "tn"): predictions above a
    threshold count as positive. Returns ({kind: variable}, [their update ops])."""
    pred = reshape(as_float(predictions), (-1, 1))
    lab = reshape(_as_bool_float(labels), (-1, 1))
    above = cast(greater(pred, constant(np.asarray(thresholds, np.float32).reshape(1, -1))), np.float32)
    w = 1.0 if weights is None else reshape(as_float(weights), (-1, 1))
    hits = {"tp": lambda: above * lab, "fp": lambda: above * (1.0 - lab),
            "fn": lambda: (1.0 - above) * lab, "tn": lambda: (1.0 - above) * (1.0 - lab)}
    totals = {k: metric_variable((len(thresholds),), k) for k in kinds}
    updates = [totals[k].assign_add(reduce_sum(hits[k]() * w, axis=0)) for k in kinds]
    return totals, updates


def _at_thresholds(kind: str, tf_name: str):
    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None, updates_collections=None,
               name=None):
        with name_scope(name or tf_name):
            totals, updates = confusion_at_thresholds(labels, predictions, list(thresholds), weights, [kind])
        return collected(totals[kind].value() * 1.0, updates[0], metrics_collections, updates_collections)

    metric.__name__ = tf_name
    metric.__doc__ = f"The (weighted) {kind} count at each threshold (predictions above it are positive)."
    return metric


true_positives_at_thresholds = _at_thresholds("tp", "true_positives_at_thresholds")
false_positives_at_thresholds = _at_thresholds("fp", "false_positives_at_thresholds")
true_negatives_at_thresholds = _at_thresholds("tn", "true_negatives_at_thresholds")
false_negatives_at_thresholds = _at_thresholds("fn", "false_negatives_at_thresholds")


def _rate_at_thresholds(other: str, tf_name: str):
    def metric(labels, predictions, thresholds, weights=None, metrics_collections=None, updates_collections=None,
               name=None):
        with name_scope(name or tf_name):
            totals, updates = confusion_at_thresholds(labels, predictions, list(thresholds), weights, ["tp", other])
            tp, miss = totals["tp"].value(), totals[other].value()
            value = _ratio(tp * 1.0, tp + miss)
            with control_dependencies(updates):
                update = _ratio(tp * 1.0, tp + miss)
        return collected(value, update, metrics_collections, updates_collections)

    metric.__name__ = tf_name
    return metric


precision_at_thresholds = _rate_at_thresholds("fp", "precision_at_thresholds")
precision_at_thresholds.__doc__ = "tp / (tp + fp) at each threshold."
recall_at_thresholds = _rate_at_thresholds("fn", "recall_at_thresholds")
recall_at_thresholds.__doc__ = "tp / (tp + fn) at each threshold."


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
    thresholds = [-_EPSILON] + inner + [1.0 + _EPSILON]
    with name_scope(name or "auc"):
        totals, updates = confusion_at_thresholds(labels, predictions, thresholds, weights, ["tp", "fp", "fn", "tn"])
        value = _area({k: v.value() for k, v in totals.items()}, curve, num_thresholds)
        with control_dependencies(updates):
            update = _area({k: v.value() * 1.0 for k, v in totals.items()}, curve, num_thresholds)
    return collected(value, update, metrics_collections, updates_collections)


def _area(c: dict, curve: str, n: int) -> Tensor:
    recall_ = (c["tp"] + _EPSILON) / (c["tp"] + c["fn"] + _EPSILON)
    if curve == "ROC":
        x, y = c["fp"] / (c["fp"] + c["tn"] + _EPSILON), recall_
    else:
        x, y = recall_, (c["tp"] + _EPSILON) / (c["tp"] + c["fp"] + _EPSILON)
    return reduce_sum((x[: n - 1] - x[1:]) * (y[: n - 1] + y[1:]) * 0.5)


def mean_tensor(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The element-wise (weighted) mean of every ``values`` tensor seen (all of one shape)."""
    values = as_float(values)
    if values.shape is None or any(d is None for d in values.shape):
        raise ValueError(f"mean_tensor needs values of a fully known shape, got {values.shape}")
    with name_scope(name or "mean"):
        total, count = metric_variable(values.shape, "total_tensor"), metric_variable(values.shape, "count_tensor")
        w = ones_like(values) if weights is None else as_float(weights) * ones_like(values)
        updates = [total.assign_add(values * w), count.assign_add(w)]
        value = _ratio(total.value(), count.value())
        with control_dependencies(updates):
            update = _ratio(total.value() * 1.0, count.value() * 1.0)
    return collected(value, update, metrics_collections, updates_collections)


def percentage_below(values, threshold, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The fraction of values less than ``threshold``."""
    from trainer.ops import less

    below = cast(less(as_float(values), np.float32(threshold)), np.float32)
    return streaming_mean(below, weights, name or "percentage_below_threshold", metrics_collections,
                           updates_collections)


def mean_relative_error(labels, predictions, normalizer, weights=None, metrics_collections=None,
                        updates_collections=None, name=None):
    """The mean of |predictions - labels| / normalizer (0 where the normalizer is 0)."""
    from trainer.ops import abs as abs_, where

    norm = as_float(normalizer)
    err = abs_(subtract(as_float(predictions), as_float(labels)))
    zero = equal(norm, np.float32(0))
    relative = where(zero, err * 0.0, err / where(zero, norm * 0.0 + 1.0, norm))
    return streaming_mean(relative, weights, name or "mean_relative_error", metrics_collections, updates_collections)


def mean_per_class_accuracy(labels, predictions, num_classes: int, weights=None, metrics_collections=None,
                            updates_collections=None, name=None):
    """The mean over classes of each class's accuracy (recall), from running per-class counts."""
    from trainer.array_ops import reduce_mean

    labels = reshape(convert_to_tensor(labels), (-1,))
    predictions = reshape(convert_to_tensor(predictions), (-1,))
    if predictions.dtype != labels.dtype:
        predictions = cast(predictions, labels.dtype)
    classes = constant(np.arange(num_classes, dtype=labels.dtype).reshape(1, -1))
    member = cast(equal(reshape(labels, (-1, 1)), classes), np.float32)  # (n, classes)
    right = member * reshape(cast(equal(predictions, labels), np.float32), (-1, 1))
    w = 1.0 if weights is None else reshape(as_float(weights), (-1, 1))
    with name_scope(name or "mean_accuracy"):
        total, count = metric_variable((num_classes,), "total"), metric_variable((num_classes,), "count")
        updates = [total.assign_add(reduce_sum(right * w, axis=0)), count.assign_add(reduce_sum(member * w, axis=0))]

        def per_class_mean(t, c):
            return reduce_mean(_ratio(t, c))

        value = per_class_mean(total.value() * 1.0, count.value() * 1.0)
        with control_dependencies(updates):
            update = per_class_mean(total.value() * 1.0, count.value() * 1.0)
    return collected(value, update, metrics_collections, updates_collections)


# The metrics of their own modules: at k (top-k ranking) and the others.
LAZY_ATTRIBUTES = {name: ("trainer.metrics_at_k", name) for name in (
    "average_precision_at_k", "precision_at_k", "precision_at_top_k", "recall_at_k", "recall_at_top_k",
    "sparse_average_precision_at_k", "sparse_precision_at_k")}
LAZY_ATTRIBUTES.update({name: ("trainer.metrics_more", name) for name in (
    "mean_cosine_distance", "mean_iou", "sensitivity_at_specificity", "specificity_at_sensitivity")})


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in LAZY_ATTRIBUTES:
        return resolve_lazy(name, LAZY_ATTRIBUTES)
    raise missing_symbol("tf.metrics", name, globals())
