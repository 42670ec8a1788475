"""Canned estimators: ``DNNClassifier``, ``DNNRegressor``, ``LinearClassifier``, ``LinearRegressor`` and the
wide-and-deep ``DNNLinearCombinedClassifier`` / ``DNNLinearCombinedRegressor``.

Each is an ``Estimator`` whose model_fn is a stack of dense layers (none for the linear ones) over
``feature_column.input_layer`` and a head: for classifiers ``heads.ClassificationHead`` (softmax
cross-entropy over ``n_classes`` logits; for two classes one logit and a sigmoid, as in TF; string
labels through ``label_vocabulary``), mean squared error for regressors. Predictions and evaluation
metrics use TensorFlow's keys (``class_ids``, ``classes``, ``probabilities``, ``logits``, ...;
``accuracy``, ``average_loss``, and for two classes ``auc``, ``precision``, ``recall``;
``predictions`` for regressors). Linear models default to Adagrad; the wide part of wide and deep
to FTRL, as in TF.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer import layers, metrics, nn, train
from trainer.array_ops import assign_add, reduce_mean
from trainer.estimator.estimator import Estimator
from trainer.estimator.heads import ClassificationHead, check_label_vocabulary
from trainer.estimator.export import ClassificationOutput, PredictOutput, RegressionOutput
from trainer.estimator.spec import EstimatorSpec, ModeKeys
from trainer.feature_column import input_layer, linear_columns
from trainer.graph import control_dependencies
from trainer.ops import cast, convert_to_tensor, reshape, square
from trainer.variable_scopes import variable_scope
from trainer.variables import trainable_variables
from trainer.train import get_or_create_global_step

__all__ = ["DNNClassifier", "DNNLinearCombinedClassifier", "DNNLinearCombinedRegressor", "DNNRegressor",
           "LinearClassifier", "LinearRegressor"]

_OPTIMIZERS: dict[str, Callable] = {
    "Adagrad": train.AdagradOptimizer,
    "Ftrl": lambda learning_rate: train.FtrlOptimizer(learning_rate),
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


def dnn_logits_fn(feature_columns, hidden_units, units, activation_fn, dropout) -> Callable:
    """The ``logits_fn(features, mode)`` of dense layers over the columns (none: a linear model)."""
    return lambda features, mode: _logits(features, feature_columns, hidden_units, units, activation_fn, dropout, mode)


def wide_and_deep_logits_fn(linear_feature_columns, dnn_feature_columns, hidden_units, units, activation_fn, dropout) -> Callable:
    """The sum of a linear model's logits (variables under ``linear/``) and a DNN's (under ``dnn/``)."""
    def logits_fn(features, mode):
        parts = []
        if linear_feature_columns:
            with variable_scope("linear"):
                parts.append(_logits(features, linear_columns(linear_feature_columns), [], units, None, None, mode))
        if dnn_feature_columns:
            with variable_scope("dnn"):
                parts.append(_logits(features, dnn_feature_columns, hidden_units, units, activation_fn, dropout, mode))
        return parts[0] if len(parts) == 1 else parts[0] + parts[1]

    return logits_fn


def minimize_fn(optimizer, learning_rate: float) -> Callable:
    """The ``train_fn(loss)`` of one optimizer over every trainable variable."""
    return lambda loss: _optimizer(optimizer, learning_rate).minimize(loss, global_step=get_or_create_global_step())


def minimize_each_fn(optimizers: dict) -> Callable:
    """``train_fn(loss)`` giving each variable scope (``linear``, ``dnn``) its own optimizer, then one step."""
    def train_fn(loss):
        updates = []
        for scope, (optimizer, learning_rate) in optimizers.items():
            own = [v for v in trainable_variables() if v.op.name.startswith(scope + "/")]
            if own:
                updates.append(_optimizer(optimizer, learning_rate).minimize(loss, var_list=own))
        with control_dependencies(updates):
            return assign_add(get_or_create_global_step(), 1)

    return train_fn


def _classifier_fn(logits_fn, head: ClassificationHead, train_fn):
    def model_fn(features, labels, mode):
        logits = logits_fn(features, mode)
        predictions = head.predictions(logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, export_outputs={
                "serving_default": ClassificationOutput(scores=predictions["probabilities"]),
                "predict": PredictOutput(predictions)})
        ids = head.label_ids(labels)
        loss = head.loss(ids, logits)
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(mode, predictions=predictions, loss=loss,
                                 eval_metric_ops=head.eval_metrics(ids, predictions, loss))
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_fn(loss))

    return model_fn


def _regressor_fn(logits_fn, label_dimension, train_fn):
    def model_fn(features, labels, mode):
        out = logits_fn(features, mode)
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
        return EstimatorSpec(mode, predictions=predictions, loss=loss, train_op=train_fn(loss))

    return model_fn


def checked_columns(feature_columns) -> list:
    columns = list(feature_columns or ())
    if not columns:
        raise ValueError("feature_columns must name at least one feature column")
    return columns


class DNNClassifier(Estimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes: int = 2, optimizer="Adagrad",
                 activation_fn=nn.relu, dropout: float | None = None, config=None, learning_rate: float = 0.05,
                 label_vocabulary=None, warm_start_from=None):
        head = ClassificationHead(n_classes, check_label_vocabulary("DNNClassifier", label_vocabulary, n_classes))
        super().__init__(_classifier_fn(dnn_logits_fn(checked_columns(feature_columns), list(hidden_units), head.logits_dimension,
                                             activation_fn, dropout), head, minimize_fn(optimizer, learning_rate)),
                         model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class LinearClassifier(Estimator):
    def __init__(self, feature_columns, model_dir=None, n_classes: int = 2, optimizer="Adagrad", config=None,
                 learning_rate: float = 0.2, label_vocabulary=None, warm_start_from=None):
        head = ClassificationHead(n_classes, check_label_vocabulary("LinearClassifier", label_vocabulary, n_classes))
        super().__init__(_classifier_fn(dnn_logits_fn(linear_columns(checked_columns(feature_columns)), [], head.logits_dimension,
                                             None, None), head, minimize_fn(optimizer, learning_rate)),
                         model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNRegressor(Estimator):
    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension: int = 1, optimizer="Adagrad",
                 activation_fn=nn.relu, dropout: float | None = None, config=None, learning_rate: float = 0.05,
                 warm_start_from=None):
        super().__init__(_regressor_fn(dnn_logits_fn(checked_columns(feature_columns), list(hidden_units), label_dimension,
                                            activation_fn, dropout), label_dimension, minimize_fn(optimizer, learning_rate)),
                         model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class LinearRegressor(Estimator):
    def __init__(self, feature_columns, model_dir=None, label_dimension: int = 1, optimizer="Adagrad", config=None,
                 learning_rate: float = 0.2, warm_start_from=None):
        super().__init__(_regressor_fn(dnn_logits_fn(linear_columns(checked_columns(feature_columns)), [], label_dimension, None, None),
                                       label_dimension, minimize_fn(optimizer, learning_rate)),
                         model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


def wide_and_deep_columns(name: str, linear_feature_columns, dnn_feature_columns, dnn_hidden_units) -> tuple:
    linear, dnn = list(linear_feature_columns or ()), list(dnn_feature_columns or ())
    if not linear and not dnn:
        raise ValueError(f"{name}: give linear_feature_columns, dnn_feature_columns or both")
    if dnn and not dnn_hidden_units:
        raise ValueError(f"{name}: dnn_hidden_units must be given with dnn_feature_columns")
    return linear, dnn


class DNNLinearCombinedClassifier(Estimator):
    """Wide and deep: a linear model over ``linear_feature_columns`` (FTRL by default, as in TF)
    plus a DNN over ``dnn_feature_columns`` (Adagrad), their logits summed, each part trained by
    its own optimizer."""

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=nn.relu, dnn_dropout=None,
                 n_classes: int = 2, config=None, linear_learning_rate: float = 0.2, dnn_learning_rate: float = 0.05,
                 label_vocabulary=None, warm_start_from=None):
        head = ClassificationHead(n_classes, check_label_vocabulary("DNNLinearCombinedClassifier", label_vocabulary,
                                                                    n_classes))
        linear, dnn = wide_and_deep_columns("DNNLinearCombinedClassifier", linear_feature_columns,
                                             dnn_feature_columns, dnn_hidden_units)
        logits_fn = wide_and_deep_logits_fn(linear, dnn, list(dnn_hidden_units or ()), head.logits_dimension, dnn_activation_fn,
                                   dnn_dropout)
        train_fn = minimize_each_fn({"linear": (linear_optimizer, linear_learning_rate),
                                   "dnn": (dnn_optimizer, dnn_learning_rate)})
        super().__init__(_classifier_fn(logits_fn, head, train_fn), model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class DNNLinearCombinedRegressor(Estimator):
    """Wide and deep for regression (``label_dimension`` outputs); see DNNLinearCombinedClassifier."""

    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl", dnn_feature_columns=None,
                 dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=nn.relu, dnn_dropout=None,
                 label_dimension: int = 1, config=None, linear_learning_rate: float = 0.2,
                 dnn_learning_rate: float = 0.05, warm_start_from=None):
        linear, dnn = wide_and_deep_columns("DNNLinearCombinedRegressor", linear_feature_columns,
                                             dnn_feature_columns, dnn_hidden_units)
        logits_fn = wide_and_deep_logits_fn(linear, dnn, list(dnn_hidden_units or ()), label_dimension, dnn_activation_fn,
                                   dnn_dropout)
        train_fn = minimize_each_fn({"linear": (linear_optimizer, linear_learning_rate),
                                   "dnn": (dnn_optimizer, dnn_learning_rate)})
        super().__init__(_regressor_fn(logits_fn, label_dimension, train_fn), model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)
