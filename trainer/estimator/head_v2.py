"""TF 1.15's ``tf.estimator`` heads (the v2 heads of tensorflow_estimator's ``head/``):
``BinaryClassHead``, ``MultiClassHead``, ``MultiLabelHead``, ``RegressionHead`` and
``PoissonRegressionHead``, each turning a model's logits into predictions, a loss, evaluation
metrics and, through ``create_estimator_spec``, the ``EstimatorSpec`` of every mode.

The loss is the per-example loss ([batch, 1], or [batch, label_dimension] for regression) times
the ``weight_column`` weights, reduced by ``loss_reduction``: ``sum_over_batch_size`` (the
default: the sum over the number of elements) or ``sum``; ``regularization_losses`` are added to
it for training. Evaluation metrics are tf.metrics streams under TensorFlow's keys
(``accuracy``, ``average_loss`` (the weighted mean of the per-example loss), ``auc``,
``label/mean``, ...).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer import metrics, nn
from trainer.array_ops import greater_equal, reduce_mean, reduce_sum, size
from trainer.estimator.export import ClassificationOutput, PredictOutput, RegressionOutput
from trainer.estimator.heads import ClassificationHead, check_label_vocabulary
from trainer.estimator.spec import EstimatorSpec, ModeKeys
from trainer.graph import Tensor
from trainer.ops import add_n, cast, convert_to_tensor, exp, group, maximum, ones_like, reshape, square, subtract
from trainer.train import get_or_create_global_step

__all__ = ["BinaryClassHead", "Head", "MultiClassHead", "MultiLabelHead", "PoissonRegressionHead", "RegressionHead",
           "train_spec"]

SUM_OVER_BATCH_SIZE = "sum_over_batch_size"
SUM = "sum"
# tf.keras.losses.Reduction's names, and tf.losses.Reduction's that mean the same.
REDUCTIONS = {"sum_over_batch_size": SUM_OVER_BATCH_SIZE, "auto": SUM_OVER_BATCH_SIZE, "sum": SUM,
              "weighted_sum_over_batch_size": SUM_OVER_BATCH_SIZE, "weighted_sum": SUM}


def _reduction(loss_reduction) -> str:
    if loss_reduction not in REDUCTIONS:
        raise ValueError(f"Invalid loss_reduction: {loss_reduction}. See `tf.losses.Reduction` for valid options.")
    return REDUCTIONS[loss_reduction]


def _float(x) -> Tensor:
    x = convert_to_tensor(x)
    return x if x.dtype == np.float32 else cast(x, np.float32)


class Head:
    """What every head shares: weights, loss reduction and the EstimatorSpec of each mode.

    A subclass gives ``logits_dimension``, ``predictions(logits)``, ``unreduced_loss(labels, logits)``
    (the processed labels' per-example loss), ``processed_labels(labels)``, ``eval_metric_ops`` and
    ``export_outputs``."""

    def __init__(self, name: str | None, weight_column, loss_reduction):
        if name is not None and not isinstance(name, str):
            raise ValueError(f"name must be a string or None, given {name!r}")
        self._name = name
        self._weight_column = weight_column
        self._loss_reduction = _reduction(loss_reduction)

    @property
    def name(self) -> str | None:
        return self._name

    @property
    def loss_reduction(self) -> str:
        return self._loss_reduction

    @property
    def logits_dimension(self) -> int:
        raise NotImplementedError

    def weights(self, features) -> Tensor | float:
        """The ``weight_column`` feature as a float [batch, 1] (1.0 without one)."""
        if self._weight_column is None:
            return 1.0
        key = self._weight_column if isinstance(self._weight_column, str) else self._weight_column.key
        if not isinstance(features, dict) or key not in features:
            raise ValueError(f"weight_column {key!r} is not among the features "
                             f"{sorted(features) if isinstance(features, dict) else features!r}")
        return reshape(_float(features[key]), (-1, 1))

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None) -> Tensor:
        """The reduced training loss (without the regularization losses)."""
        unreduced = self.unreduced_loss(self.processed_labels(labels), _float(logits))
        weighted = unreduced * self.weights(features)
        total = reduce_sum(weighted)
        if self._loss_reduction == SUM:
            return total
        return total / cast(size(weighted), np.float32)

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn: Callable | None = None, update_ops=None,
                              regularization_losses=None) -> EstimatorSpec:
        """The EstimatorSpec of ``mode``: predictions and export outputs; the loss and metrics for
        EVAL; the loss and ``optimizer.minimize`` (or ``train_op_fn(loss)``) for TRAIN."""
        logits = _float(logits)
        predictions = self.predictions(logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, export_outputs=self.export_outputs(predictions))
        if labels is None:
            raise ValueError(f"labels must be given in mode {mode!r}")
        processed = self.processed_labels(labels)
        unreduced = self.unreduced_loss(processed, logits)
        weights = self.weights(features)
        loss = self.loss(labels, logits, features, mode)
        regularized = loss if not regularization_losses else loss + add_n(list(regularization_losses))
        if mode == ModeKeys.EVAL:
            found = {"average_loss": metrics.mean(unreduced, weights=weights * ones_like(unreduced))}
            found.update(self.eval_metric_ops(processed, predictions, weights))
            if regularization_losses:
                found["regularization_loss"] = metrics.mean(add_n(list(regularization_losses)))
            return EstimatorSpec(mode, predictions=predictions, loss=regularized, eval_metric_ops=found)
        return train_spec(mode, predictions, regularized, optimizer, train_op_fn, trainable_variables, update_ops)


def train_spec(mode, predictions, loss, optimizer, train_op_fn, trainable_variables, update_ops) -> EstimatorSpec:
    """The TRAIN EstimatorSpec: ``optimizer.minimize(loss)`` or ``train_op_fn(loss)`` (exactly one), then the
    update ops."""
    if mode != ModeKeys.TRAIN:
        raise ValueError(f"mode must be one of ModeKeys.TRAIN/EVAL/PREDICT, given {mode!r}")
    if optimizer is not None and train_op_fn is not None:
        raise ValueError("train_op_fn and optimizer cannot both be set.")
    if optimizer is not None:
        train_op = optimizer.minimize(loss, global_step=get_or_create_global_step(), var_list=trainable_variables)
    elif train_op_fn is not None:
        train_op = train_op_fn(loss)
    else:
        raise ValueError("train_op_fn and optimizer cannot both be None.")
    if update_ops:
        train_op = group(train_op, *update_ops)
    return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)


def _threshold_metrics(thresholds, labels, scores, weights) -> dict:
    """accuracy, precision and recall with a score at or above each threshold taken as positive."""
    found = {}
    for t in thresholds:
        predicted = cast(greater_equal(scores, np.float32(t)), np.int64)
        found[f"accuracy/positive_threshold_{t:g}"] = metrics.accuracy(labels, predicted, weights=weights)
        found[f"precision/positive_threshold_{t:g}"] = metrics.precision(labels, predicted, weights=weights)
        found[f"recall/positive_threshold_{t:g}"] = metrics.recall(labels, predicted, weights=weights)
    return found


class _ClassHead(Head):
    """Binary and multi-class heads: TensorFlow's classification predictions over one label per example."""

    def __init__(self, n_classes: int, weight_column, label_vocabulary, loss_reduction, loss_fn, name, estimator: str):
        super().__init__(name, weight_column, loss_reduction)
        self._head = ClassificationHead(n_classes, check_label_vocabulary(estimator, label_vocabulary, n_classes))
        self._loss_fn = loss_fn

    @property
    def logits_dimension(self) -> int:
        return self._head.logits_dimension

    def predictions(self, logits, keys=None) -> dict:
        found = self._head.predictions(_float(logits))
        return found if keys is None else {k: found[k] for k in keys}

    def processed_labels(self, labels) -> Tensor:
        return reshape(self._head.label_ids(labels), (-1, 1))

    def export_outputs(self, predictions: dict) -> dict:
        scores = ClassificationOutput(scores=predictions["probabilities"])
        return {"serving_default": scores, "classification": scores, "predict": PredictOutput(predictions)}


class BinaryClassHead(_ClassHead):
    """One logit per example; sigmoid cross-entropy; metrics at 0.5 and at each of ``thresholds``."""

    def __init__(self, weight_column=None, thresholds=None, label_vocabulary=None, loss_reduction=SUM_OVER_BATCH_SIZE,
                 loss_fn=None, name=None):
        super().__init__(2, weight_column, label_vocabulary, loss_reduction, loss_fn, name, "BinaryClassHead")
        self._thresholds = tuple(thresholds or ())
        for t in self._thresholds:
            if not 0.0 < t < 1.0:
                raise ValueError(f"thresholds not in (0, 1): {self._thresholds}.")

    def unreduced_loss(self, labels, logits):
        if self._loss_fn is not None:
            return _float(self._loss_fn(labels=labels, logits=logits))
        return nn.sigmoid_cross_entropy_with_logits(labels=_float(labels), logits=logits)

    def eval_metric_ops(self, labels, predictions, weights) -> dict:
        ids, class_ids = reshape(labels, (-1,)), reshape(predictions["class_ids"], (-1,))
        positive = reshape(predictions["logistic"], (-1,))
        w = reshape(weights * ones_like(_float(labels)), (-1,))
        label_mean = metrics.mean(_float(ids), weights=w)
        found = {"accuracy": metrics.accuracy(ids, class_ids, weights=w),
                 "precision": metrics.precision(ids, class_ids, weights=w),
                 "recall": metrics.recall(ids, class_ids, weights=w),
                 "prediction/mean": metrics.mean(positive, weights=w), "label/mean": label_mean,
                 "accuracy_baseline": tuple(maximum(m, subtract(np.float32(1), m)) for m in label_mean),
                 "auc": metrics.auc(ids, positive, weights=w),
                 "auc_precision_recall": metrics.auc(ids, positive, weights=w, curve="PR")}
        found.update(_threshold_metrics(self._thresholds, ids, positive, w))
        return found


class MultiClassHead(_ClassHead):
    """``n_classes`` logits; sparse softmax cross-entropy; ``accuracy``."""

    def __init__(self, n_classes: int, weight_column=None, label_vocabulary=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None, name=None):
        if n_classes is None or n_classes <= 2:
            raise ValueError(f"n_classes must be > 2: {n_classes}")
        super().__init__(n_classes, weight_column, label_vocabulary, loss_reduction, loss_fn, name, "MultiClassHead")

    def unreduced_loss(self, labels, logits):
        if self._loss_fn is not None:
            return _float(self._loss_fn(labels=labels, logits=logits))
        per = nn.sparse_softmax_cross_entropy_with_logits(labels=reshape(labels, (-1,)), logits=logits)
        return reshape(per, (-1, 1))

    def eval_metric_ops(self, labels, predictions, weights) -> dict:
        w = reshape(weights * ones_like(_float(labels)), (-1,))
        return {"accuracy": metrics.accuracy(reshape(labels, (-1,)), reshape(predictions["class_ids"], (-1,)),
                                             weights=w)}


class MultiLabelHead(Head):
    """``n_classes`` independent labels per example (a multi-hot [batch, n_classes]); sigmoid
    cross-entropy averaged over the classes; ``auc`` and ``auc_precision_recall`` over all of them."""

    def __init__(self, n_classes: int, weight_column=None, thresholds=None, label_vocabulary=None,
                 loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None, classes_for_class_based_metrics=None, name=None):
        if n_classes is None or n_classes < 2:
            raise ValueError(f"n_classes must be > 1 for multi-label classification. Given: {n_classes}")
        if label_vocabulary is not None or classes_for_class_based_metrics is not None:
            raise ValueError("MultiLabelHead: label_vocabulary and classes_for_class_based_metrics are not supported; "
                             "give the labels as a multi-hot [batch, n_classes]")
        super().__init__(name, weight_column, loss_reduction)
        self._n_classes = int(n_classes)
        self._thresholds = tuple(thresholds or ())
        self._loss_fn = loss_fn

    @property
    def logits_dimension(self) -> int:
        return self._n_classes

    def predictions(self, logits, keys=None) -> dict:
        logits = _float(logits)
        found = {"logits": logits, "probabilities": nn.sigmoid(logits, name="probabilities")}
        return found if keys is None else {k: found[k] for k in keys}

    def processed_labels(self, labels) -> Tensor:
        labels = convert_to_tensor(labels)
        if labels.dtype is not None and labels.dtype.kind not in "iub":
            raise ValueError(f"MultiLabelHead: labels must be a multi-hot of integers, got {labels.dtype}")
        return reshape(cast(labels, np.int64), (-1, self._n_classes))

    def unreduced_loss(self, labels, logits):
        if self._loss_fn is not None:
            return _float(self._loss_fn(labels=labels, logits=logits))
        per = nn.sigmoid_cross_entropy_with_logits(labels=_float(labels), logits=logits)
        return reduce_mean(per, axis=-1, keepdims=True)

    def eval_metric_ops(self, labels, predictions, weights) -> dict:
        probabilities = predictions["probabilities"]
        w = weights * ones_like(probabilities)
        found = {"auc": metrics.auc(labels, probabilities, weights=w),
                 "auc_precision_recall": metrics.auc(labels, probabilities, weights=w, curve="PR")}
        found.update(_threshold_metrics(self._thresholds, labels, probabilities, w))
        return found

    def export_outputs(self, predictions: dict) -> dict:
        scores = ClassificationOutput(scores=predictions["probabilities"])
        return {"serving_default": scores, "classification": scores, "predict": PredictOutput(predictions)}


class RegressionHead(Head):
    """``label_dimension`` outputs; squared error; predictions ``inverse_link_fn(logits)``."""

    def __init__(self, label_dimension: int = 1, weight_column=None, loss_reduction=SUM_OVER_BATCH_SIZE, loss_fn=None,
                 inverse_link_fn=None, name=None):
        if label_dimension is None or label_dimension < 1:
            raise ValueError(f"Invalid label_dimension {label_dimension}.")
        super().__init__(name, weight_column, loss_reduction)
        self._label_dimension = int(label_dimension)
        self._loss_fn = loss_fn
        self._inverse_link_fn = inverse_link_fn

    @property
    def logits_dimension(self) -> int:
        return self._label_dimension

    def predictions(self, logits, keys=None) -> dict:
        logits = _float(logits)
        if self._inverse_link_fn is None:
            found = {"predictions": logits}
        else:
            found = {"predictions": self._inverse_link_fn(logits), "logits": logits}
        return found if keys is None else {k: found[k] for k in keys}

    def processed_labels(self, labels) -> Tensor:
        labels = convert_to_tensor(labels)
        if labels.dtype is not None and labels.dtype.kind not in "fiu":
            raise ValueError(f"Labels dtype should be numeric, given {labels.dtype}")
        return reshape(_float(labels), (-1, self._label_dimension))

    def unreduced_loss(self, labels, logits):
        if self._loss_fn is not None:
            return _float(self._loss_fn(labels=labels, logits=logits))
        return square(subtract(logits, labels))

    def eval_metric_ops(self, labels, predictions, weights) -> dict:
        w = weights * ones_like(labels)
        return {"label/mean": metrics.mean(labels, weights=w),
                "prediction/mean": metrics.mean(predictions["predictions"], weights=w)}

    def export_outputs(self, predictions: dict) -> dict:
        output = RegressionOutput(predictions["predictions"])
        return {"serving_default": output, "regression": output, "predict": PredictOutput(predictions)}


class PoissonRegressionHead(RegressionHead):
    """Counts: ``log_poisson_loss`` of the logits (the log of the rate); predictions ``exp(logits)``."""

    def __init__(self, label_dimension: int = 1, weight_column=None, loss_reduction=SUM_OVER_BATCH_SIZE,
                 compute_full_loss: bool = True, name=None):
        def poisson_loss(labels, logits):
            return nn.log_poisson_loss(targets=labels, log_input=logits, compute_full_loss=compute_full_loss)

        super().__init__(label_dimension, weight_column, loss_reduction, poisson_loss, exp, name)
