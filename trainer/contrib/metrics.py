"""``tf.contrib.metrics`` (``slim.metrics``): the streaming metrics of ``tf.metrics`` under their
older names, which take the predictions FIRST (``streaming_accuracy(predictions, labels)``), and
the helpers slim's evaluation scripts use to gather many metrics into one update op."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from trainer import metrics

__all__ = ["aggregate_metric_map", "aggregate_metrics", "streaming_accuracy", "streaming_auc",
           "streaming_false_negatives", "streaming_false_negatives_at_thresholds", "streaming_false_positives",
           "streaming_false_positives_at_thresholds", "streaming_mean", "streaming_mean_absolute_error",
           "streaming_mean_cosine_distance", "streaming_mean_iou", "streaming_mean_relative_error",
           "streaming_mean_squared_error", "streaming_mean_tensor", "streaming_percentage_less", "streaming_precision",
           "streaming_precision_at_thresholds", "streaming_recall", "streaming_recall_at_k",
           "streaming_recall_at_thresholds", "streaming_root_mean_squared_error", "streaming_sensitivity_at_specificity",
           "streaming_sparse_average_precision_at_k", "streaming_sparse_precision_at_k", "streaming_sparse_recall_at_k",
           "streaming_specificity_at_sensitivity", "streaming_true_negatives", "streaming_true_negatives_at_thresholds",
           "streaming_true_positives", "streaming_true_positives_at_thresholds"]


def _predictions_first(metric: Callable, name: str) -> Callable:
    """``metric(labels, predictions, ...)`` as ``name(predictions, labels, ...)`` (what follows: the
    weights, or the thresholds, k, num_classes, ... of the metrics that take one)."""

    def streaming(predictions, labels, *args, **kwargs):
        return metric(labels, predictions, *args, **kwargs)

    streaming.__name__ = streaming.__qualname__ = name
    streaming.__doc__ = f"``tf.metrics.{metric.__name__}`` with the predictions first: (value, update_op)."
    return streaming


streaming_accuracy = _predictions_first(metrics.accuracy, "streaming_accuracy")
streaming_auc = _predictions_first(metrics.auc, "streaming_auc")
streaming_precision = _predictions_first(metrics.precision, "streaming_precision")
streaming_recall = _predictions_first(metrics.recall, "streaming_recall")
streaming_true_positives = _predictions_first(metrics.true_positives, "streaming_true_positives")
streaming_false_positives = _predictions_first(metrics.false_positives, "streaming_false_positives")
streaming_true_negatives = _predictions_first(metrics.true_negatives, "streaming_true_negatives")
streaming_false_negatives = _predictions_first(metrics.false_negatives, "streaming_false_negatives")
streaming_mean_squared_error = _predictions_first(metrics.mean_squared_error, "streaming_mean_squared_error")
streaming_mean_absolute_error = _predictions_first(metrics.mean_absolute_error, "streaming_mean_absolute_error")
streaming_root_mean_squared_error = _predictions_first(metrics.root_mean_squared_error,
                                                       "streaming_root_mean_squared_error")
streaming_mean = metrics.mean
streaming_mean_tensor = metrics.mean_tensor
streaming_percentage_less = metrics.percentage_below


streaming_true_positives_at_thresholds = _predictions_first(metrics.true_positives_at_thresholds,
                                                            "streaming_true_positives_at_thresholds")
streaming_false_positives_at_thresholds = _predictions_first(metrics.false_positives_at_thresholds,
                                                             "streaming_false_positives_at_thresholds")
streaming_true_negatives_at_thresholds = _predictions_first(metrics.true_negatives_at_thresholds,
                                                            "streaming_true_negatives_at_thresholds")
streaming_false_negatives_at_thresholds = _predictions_first(metrics.false_negatives_at_thresholds,
                                                             "streaming_false_negatives_at_thresholds")
streaming_precision_at_thresholds = _predictions_first(metrics.precision_at_thresholds,
                                                       "streaming_precision_at_thresholds")
streaming_recall_at_thresholds = _predictions_first(metrics.recall_at_thresholds, "streaming_recall_at_thresholds")
streaming_mean_relative_error = _predictions_first(metrics.mean_relative_error, "streaming_mean_relative_error")
streaming_mean_cosine_distance = _predictions_first(metrics.mean_cosine_distance, "streaming_mean_cosine_distance")
streaming_mean_iou = _predictions_first(metrics.mean_iou, "streaming_mean_iou")
streaming_sensitivity_at_specificity = _predictions_first(metrics.sensitivity_at_specificity,
                                                          "streaming_sensitivity_at_specificity")
streaming_specificity_at_sensitivity = _predictions_first(metrics.specificity_at_sensitivity,
                                                          "streaming_specificity_at_sensitivity")


streaming_sparse_precision_at_k = _predictions_first(metrics.precision_at_k, "streaming_sparse_precision_at_k")
streaming_sparse_recall_at_k = _predictions_first(metrics.recall_at_k, "streaming_sparse_recall_at_k")
streaming_sparse_average_precision_at_k = _predictions_first(metrics.average_precision_at_k,
                                                             "streaming_sparse_average_precision_at_k")


def streaming_recall_at_k(predictions, labels, k: int, weights=None, metrics_collections=None,
                          updates_collections=None, name=None):
    """The fraction of examples whose label (int, [batch]) is among the k highest predictions."""
    from trainer.nn import in_top_k
    from trainer.ops import cast

    hits = cast(in_top_k(predictions, labels, k), np.float32)
    return metrics.mean(hits, weights, metrics_collections, updates_collections, name or f"recall_at_{k}")


def aggregate_metrics(*value_update_tuples) -> tuple[list, list]:
    """``[(value, update), ...]`` as ``([values], [updates])``."""
    if not value_update_tuples:
        raise ValueError("aggregate_metrics: expected at least one (value, update_op) pair")
    values, updates = zip(*value_update_tuples)
    return list(values), list(updates)


def aggregate_metric_map(names_to_tuples: dict) -> tuple[dict, dict]:
    """``{name: (value, update)}`` as ``({name: value}, {name: update})``."""
    return ({name: pair[0] for name, pair in names_to_tuples.items()},
            {name: pair[1] for name, pair in names_to_tuples.items()})


# tf.contrib.metrics' own metrics, in their own module.
LAZY_ATTRIBUTES = {name: ("trainer.contrib.metrics_curves", name) for name in (
    "accuracy", "confusion_matrix", "count", "f1_score", "precision_at_recall", "recall_at_precision",
    "streaming_covariance", "streaming_curve_points", "streaming_pearson_correlation")}
LAZY_ATTRIBUTES.update({name: ("trainer.contrib.metrics_concat", name) for name in (
    "streaming_concat", "streaming_dynamic_auc")})
LAZY_ATTRIBUTES.update({name: ("trainer.set_ops", name) for name in (
    "set_difference", "set_intersection", "set_size", "set_union")})


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in LAZY_ATTRIBUTES:
        return resolve_lazy(name, LAZY_ATTRIBUTES)
    raise missing_symbol("tf.contrib.metrics", name, globals())
