"""Canned estimators: ``DNNClassifier``, ``DNNRegressor``, ``LinearClassifier``, ``LinearRegressor``.

Each is an ``Estimator`` whose model_fn is a stack of dense layers (none for the linear ones) over
``feature_column.input_layer`` and a head: softmax cross-entropy for classifiers (``n_classes``
logits, also for two classes), mean squared error for regressors. Predictions and evaluation
metrics use TensorFlow's keys (``class_ids``, ``probabilities``, ``logits``; ``accuracy``,
``average_loss``, and for two classes ``auc``, ``precision``, ``recall``; ``predictions`` for
regressors). Linear models default to Adagrad (TensorFlow's FTRL is not available).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer import layers, losses, metrics, nn, train
from trainer.array_ops import reduce_mean
from trainer.estimator.estimator import Estimator
from trainer.estimator.export import ClassificationOutput, PredictOutput, RegressionOutput
from trainer.estimator.spec import EstimatorSpec, ModeKeys
from trainer.feature_column import input_layer, linear_columns
from trainer.ops import argmax, cast, convert_to_tensor, reshape, square
from trainer.train import get_or_create_global_step

__all__ = ["DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor"]

_OPTIMIZERS: dict[str, Callable] = {
    "Adagrad": train.AdagradOptimizer,
    "Adam": train.AdamOptimizer,
    "SGD": train.GradientDescentOptimizer,
    "RMSProp": train.RMSPropOptimizer,
}


def _optimizer(optimizer, learning_rate: float):
    if isinstance(optimizer, str):
        try:
            return _OPTIMIZERS[optimizer](learning_rate)
        except KeyError:
            raise ValueError(f"unknown optimizer {optimizer!r}; use one of {sorted(_OPTIMIZERS)} or an Optimizer "
                             "instance") from None
    if isinstance(optimizer, train.Optimizer):
        return optimizer
    if callable(optimizer):
        return optimizer()
    raise TypeError(f"optimizer must be a name, an Optimizer or a callable returning one, got "
                    f"{type(optimizer).__name__}")


def _logits(features, feature_columns, hidden_units, units, activation_fn, dropout, mode):
    h = input_layer(features, feature_columns)
    for i, n in enumerate(hidden_units):
        h = layers.dense(h, n, activation=activation_fn, name=f"dnn/hiddenlayer_{i}")
        if dropout and mode == ModeKeys.TRAIN:
            h = nn.dropout(h, rate=dropout)
    return layers.dense(h, units, name="logits")


def _classifier_fn(feature_columns, hidden_units, n_classes, activation_fn, dropout, optimizer, learning_rate):
    def model_fn(features, labels, mode):
        logits = _logits(features, feature_columns, hidden_units, n_classes, activation_fn, dropout, mode)
        probabilities = nn.softmax(logits, name="probabilities")
        class_ids = argmax(logits, axis=-1)
        predictions = {"logits": logits, "probabilities": probabilities,
                       "class_ids": reshape(class_ids, (-1, 1))}
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, export_outputs={
                "serving_default": ClassificationOutput(scores=probabilities),
                "predict": PredictOutput(predictions)})
        ids = reshape(convert_to_tensor(labels), (-1,))
        if ids.dtype != np.int64:
            ids = cast(ids, np.int64)
        loss = losses.sparse_softmax_cross_entropy(ids, logits)
        if mode == ModeKeys.EVAL:
            eval_metrics = {"accuracy": metrics.accuracy(ids, class_ids), "average_loss": metrics.mean(loss)}
            if n_classes == 2:
                positive = probabilities[:, 1]
                eval_metrics.update(auc=metrics.auc(ids, positive), precision=metrics.precision(ids, class_ids),
                                    recall=metrics.recall(ids, class_ids))
            return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=eval_metrics)
        train_op = _optimizer(optimizer, learning_rate).minimize(loss, global_step=get_or_create_global_step())
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    return model_fn


def _regressor_fn(feature_columns, hidden_units, label_dimension, activation_fn, dropout, optimizer, learning_rate):
    def model_fn(features, labels, mode):
        out = _logits(features, feature_columns, hidden_units, label_dimension, activation_fn, dropout, mode)
        predictions = {"predictions": out}
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions,
                                 export_outputs={"serving_default": RegressionOutput(out)})
        target = reshape(convert_to_tensor(labels), (-1, label_dimension))
        if target.dtype != np.float32:
            target = cast(target, np.float32)
        loss = reduce_mean(square(out - target))
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops={
                "average_loss": metrics.mean(loss), "label/mean": metrics.mean(target),
                "prediction/mean": metrics.mean(out)})
        train_op = _optimizer(optimizer, learning_rate).minimize(loss, global_step=get_or_create_global_step())
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_op)

    return model_fn


def _columns(feature_columns) -> list:
    columns = list(feature_columns or ())
    if not columns:
        raise ValueError("feature_columns must name at least one feature column")
    return columns


class DNNClassifier(Estimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes: int = 2, optimizer="Adagrad",
                 activation_fn=nn.relu, dropout: float | None = None, config=None, learning_rate: float = 0.05):
        if n_classes < 2:
            raise ValueError(f"DNNClassifier: n_classes must be at least 2, got {n_classes}")
        super().__init__(_classifier_fn(_columns(feature_columns), list(hidden_units), n_classes, activation_fn,
                                        dropout, optimizer, learning_rate), model_dir=model_dir, config=config)


class LinearClassifier(Estimator):
    def __init__(self, feature_columns, model_dir=None, n_classes: int = 2, optimizer="Adagrad", config=None,
                 learning_rate: float = 0.2):
        if n_classes < 2:
            raise ValueError(f"LinearClassifier: n_classes must be at least 2, got {n_classes}")
        super().__init__(_classifier_fn(linear_columns(_columns(feature_columns)), [], n_classes, None, None, optimizer,
                                        learning_rate), model_dir=model_dir, config=config)


class DNNRegressor(Estimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension: int = 1, optimizer="Adagrad",
                 activation_fn=nn.relu, dropout: float | None = None, config=None, learning_rate: float = 0.05):
        super().__init__(_regressor_fn(_columns(feature_columns), list(hidden_units), label_dimension, activation_fn,
                                       dropout, optimizer, learning_rate), model_dir=model_dir, config=config)


class LinearRegressor(Estimator):
    def __init__(self, feature_columns, model_dir=None, label_dimension: int = 1, optimizer="Adagrad", config=None,
                 learning_rate: float = 0.2):
        super().__init__(_regressor_fn(linear_columns(_columns(feature_columns)), [], label_dimension, None, None,
                                       optimizer, learning_rate), model_dir=model_dir, config=config)
