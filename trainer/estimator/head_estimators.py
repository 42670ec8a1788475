"""Canned estimators over a given head: ``DNNEstimator``, ``LinearEstimator``,
``DNNLinearCombinedEstimator``, and the baselines (``BaselineClassifier``, ``BaselineRegressor``,
``BaselineEstimator``), whose logits are one learned bias per output (the label prior).

The logits come from the same networks as the DNN/Linear classifiers (trainer/estimator/canned.py);
the head (trainer/estimator/head_v2.py) makes predictions, loss, metrics and the train op with
``train_op_fn``. Baselines train with FTRL (learning rate 0.3) and sum the loss over the batch, as
TensorFlow's.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer import nn
from trainer.estimator.canned import (checked_columns, dnn_logits_fn, minimize_each_fn, minimize_fn,
                                      wide_and_deep_columns, wide_and_deep_logits_fn)
from trainer.estimator.estimator import Estimator
from trainer.feature_column import linear_columns
from trainer.estimator.head_v2 import SUM, BinaryClassHead, Head, MultiClassHead, RegressionHead
from trainer.array_ops import ones, stack
from trainer.ops import convert_to_tensor, shape
from trainer.variable_scopes import get_variable, variable_scope

__all__ = ["BaselineClassifier", "BaselineEstimator", "BaselineRegressor", "DNNEstimator",
           "DNNLinearCombinedEstimator", "LinearEstimator"]


def checked_head(head) -> Head:
    from trainer.estimator.multi_head import MultiHead

    if not isinstance(head, (Head, MultiHead)):
        raise TypeError(f"head must be a tf.estimator head (BinaryClassHead, MultiClassHead, ...), given "
                        f"{type(head).__name__}")
    return head


def head_model_fn(head: Head, logits_fn: Callable, train_fn: Callable) -> Callable:
    """A model_fn: the head's EstimatorSpec over ``logits_fn(features, mode)``."""
    def model_fn(features, labels, mode):
        return head.create_estimator_spec(features, mode, logits_fn(features, mode), labels, train_op_fn=train_fn)

    return model_fn


class DNNEstimator(Estimator):
    def __init__(self, head, hidden_units, feature_columns, model_dir=None, optimizer="Adagrad",
                 activation_fn=nn.relu, dropout: float | None = None, config=None, warm_start_from=None,
                 learning_rate: float = 0.05):
        logits_fn = dnn_logits_fn(checked_columns(feature_columns), list(hidden_units),
                                  checked_head(head).logits_dimension, activation_fn, dropout)
        super().__init__(head_model_fn(head, logits_fn, minimize_fn(optimizer, learning_rate)), model_dir=model_dir,
                         config=config, warm_start_from=warm_start_from)


class LinearEstimator(Estimator):
    def __init__(self, head, feature_columns, model_dir=None, optimizer="Ftrl", config=None, warm_start_from=None,
                 learning_rate: float = 0.2):
        logits_fn = dnn_logits_fn(linear_columns(checked_columns(feature_columns)), [],
                                  checked_head(head).logits_dimension, None, None)
        super().__init__(head_model_fn(head, logits_fn, minimize_fn(optimizer, learning_rate)), model_dir=model_dir,
                         config=config, warm_start_from=warm_start_from)


class DNNLinearCombinedEstimator(Estimator):
    def __init__(self, head, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None, dnn_activation_fn=nn.relu,
                 dnn_dropout=None, config=None, warm_start_from=None, linear_learning_rate: float = 0.2,
                 dnn_learning_rate: float = 0.05):
        linear, dnn = wide_and_deep_columns("DNNLinearCombinedEstimator", linear_feature_columns, dnn_feature_columns,
                                            dnn_hidden_units)
        logits_fn = wide_and_deep_logits_fn(linear, dnn, list(dnn_hidden_units or ()),
                                            checked_head(head).logits_dimension, dnn_activation_fn, dnn_dropout)
        train_fn = minimize_each_fn({"linear": (linear_optimizer, linear_learning_rate),
                                     "dnn": (dnn_optimizer, dnn_learning_rate)})
        super().__init__(head_model_fn(head, logits_fn, train_fn), model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


def baseline_logits_fn(units: int) -> Callable:
    """Logits that are the ``baseline/bias`` variable ([units], zeros at first) for every example."""
    def logits_fn(features, mode):
        if not isinstance(features, dict) or not features:
            raise ValueError("Baseline estimators need a non-empty features dict (its batch size sets the logits')")
        first = features[sorted(features)[0]]
        first = first.dense_shape if hasattr(first, "dense_shape") else shape(convert_to_tensor(first))
        with variable_scope("baseline"):
            bias = get_variable("bias", (units,), dtype=np.float32,
                                initializer=lambda s, dtype=np.float32, **_: np.zeros(s, dtype))
        return ones(stack([first[0], np.int64(units)]), np.float32) * bias

    return logits_fn


class BaselineEstimator(Estimator):
    """The head's loss minimized by one bias per output: what a model learns from the labels alone."""

    def __init__(self, head, model_dir=None, optimizer="Ftrl", config=None, warm_start_from=None,
                 learning_rate: float = 0.3):
        super().__init__(head_model_fn(head, baseline_logits_fn(checked_head(head).logits_dimension),
                                       minimize_fn(optimizer, learning_rate)), model_dir=model_dir, config=config,
                         warm_start_from=warm_start_from)


class BaselineClassifier(BaselineEstimator):
    def __init__(self, model_dir=None, n_classes: int = 2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, loss_reduction=SUM, warm_start_from=None, learning_rate: float = 0.3):
        head = (BinaryClassHead(weight_column, label_vocabulary=label_vocabulary, loss_reduction=loss_reduction)
                if n_classes == 2 else MultiClassHead(n_classes, weight_column, label_vocabulary, loss_reduction))
        super().__init__(head, model_dir, optimizer, config, warm_start_from, learning_rate)


class BaselineRegressor(BaselineEstimator):
    def __init__(self, model_dir=None, label_dimension: int = 1, weight_column=None, optimizer="Ftrl", config=None,
                 loss_reduction=SUM, warm_start_from=None, learning_rate: float = 0.3):
        super().__init__(RegressionHead(label_dimension, weight_column, loss_reduction), model_dir, optimizer, config,
                         warm_start_from, learning_rate)
