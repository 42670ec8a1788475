"""``tf.contrib.metrics`` (``slim.metrics``): the streaming metrics of ``tf.metrics`` under their
older names, which take the predictions FIRST (``streaming_accuracy(predictions, labels)``), and
the helpers slim's evaluation scripts use to gather many metrics into one update op."""

from __future__ import annotations

from collections.abc import Callable

from trainer import metrics

__all__ = ["aggregate_metric_map", "aggregate_metrics", "streaming_accuracy", "streaming_auc",
           "streaming_false_negatives", "streaming_false_positives", "streaming_mean",
           "streaming_mean_absolute_error", "streaming_mean_squared_error", "streaming_precision",
           "streaming_recall", "streaming_root_mean_squared_error", "streaming_true_negatives",
           "streaming_true_positives"]


def _predictions_first(metric: Callable, name: str) -> Callable:
    """``metric(labels, predictions, ...)`` as ``name(predictions, labels, ...)``."""

    def streaming(predictions, labels, weights=None, **kwargs):
        return metric(labels, predictions, weights, **kwargs)

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


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.metrics", name, globals())
