"""``tf.keras.metrics``: per-batch metric functions by name (the metric classes: metric_objects.py).
``"accuracy"``/``"acc"`` resolve by the loss and the output's width, as Keras resolves them (``resolve``)."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.losses import (KLD, MAE, MAPE, MSE, MSLE, binary_crossentropy, categorical_crossentropy,
                                  categorical_hinge, cosine, cosine_proximity, hinge, kld,
                                  kullback_leibler_divergence, logcosh, mae, mape, mean_absolute_error,
                                  mean_absolute_percentage_error, mean_squared_error, mean_squared_logarithmic_error,
                                  mse, msle, poisson, sparse_categorical_crossentropy, squared_hinge)
from trainer.keras.serialization import deserialize as deserialize_object

__all__ = ["KLD", "MAE", "MAPE", "MSE", "MSLE", "binary_accuracy", "binary_crossentropy", "categorical_accuracy",
           "categorical_crossentropy", "categorical_hinge", "cosine", "cosine_proximity", "deserialize", "get",
           "hinge", "kld", "kullback_leibler_divergence", "logcosh", "mae", "mape", "mean_absolute_error",
           "mean_absolute_percentage_error", "mean_squared_error", "mean_squared_logarithmic_error", "mse", "msle",
           "poisson", "resolve", "serialize", "sparse_categorical_accuracy", "sparse_categorical_crossentropy",
           "sparse_top_k_categorical_accuracy", "squared_hinge", "top_k_categorical_accuracy"]


def binary_accuracy(y_true, y_pred, threshold: float = 0.5) -> "tf.Tensor":
    return K.mean(tf.cast(tf.equal(y_true, tf.cast(y_pred > threshold, y_true.dtype)), K.floatx()), axis=-1)


def categorical_accuracy(y_true, y_pred) -> "tf.Tensor":
    return tf.cast(tf.equal(K.argmax(y_true, -1), K.argmax(y_pred, -1)), K.floatx())


def sparse_categorical_accuracy(y_true, y_pred) -> "tf.Tensor":
    labels = tf.cast(y_true, tf.int64)
    if len(K.int_shape(labels)) == len(K.int_shape(y_pred)):
        labels = tf.squeeze(labels, [-1])
    return tf.cast(tf.equal(labels, K.argmax(y_pred, -1)), K.floatx())


def top_k_categorical_accuracy(y_true, y_pred, k: int = 5) -> "tf.Tensor":
    return tf.cast(tf.nn.in_top_k(y_pred, K.argmax(y_true, -1), k), K.floatx())


def sparse_top_k_categorical_accuracy(y_true, y_pred, k: int = 5) -> "tf.Tensor":
    labels = tf.cast(tf.reshape(y_true, [-1]), tf.int64)
    return tf.cast(tf.nn.in_top_k(y_pred, labels, k), K.floatx())


METRICS = {f.__name__: f for f in (
    binary_accuracy, categorical_accuracy, sparse_categorical_accuracy, top_k_categorical_accuracy,
    sparse_top_k_categorical_accuracy, mean_squared_error, mean_absolute_error, mean_absolute_percentage_error,
    mean_squared_logarithmic_error, squared_hinge, hinge, categorical_hinge, logcosh, categorical_crossentropy,
    sparse_categorical_crossentropy, binary_crossentropy, kullback_leibler_divergence, poisson, cosine_proximity)}
METRICS.update({"mse": mse, "mae": mae, "mape": mape, "msle": msle, "kld": kld, "cosine": cosine})

# accuracy by the loss it goes with; any other loss picks by the output's width
_ACCURACY_BY_LOSS = {"binary_crossentropy": binary_accuracy, "categorical_crossentropy": categorical_accuracy,
                     "sparse_categorical_crossentropy": sparse_categorical_accuracy}
_CROSSENTROPY_BY_LOSS = {"binary_crossentropy": binary_crossentropy,
                         "categorical_crossentropy": categorical_crossentropy,
                         "sparse_categorical_crossentropy": sparse_categorical_crossentropy}


def resolve(metric, loss_fn, output_shape) -> object:
    """``metric`` as a function; "accuracy"/"acc" and "crossentropy"/"ce" pick the variant matching
    ``loss_fn`` (else the output's width: 1 means binary)."""
    loss_name = getattr(loss_fn, "__name__", "") or getattr(getattr(type(loss_fn), "fn", None), "__name__", "")
    if metric in ("accuracy", "acc"):
        if loss_name in _ACCURACY_BY_LOSS:
            return _ACCURACY_BY_LOSS[loss_name]
        return binary_accuracy if output_shape[-1] == 1 else categorical_accuracy
    if metric in ("crossentropy", "ce"):
        if loss_name in _CROSSENTROPY_BY_LOSS:
            return _CROSSENTROPY_BY_LOSS[loss_name]
        return binary_crossentropy if output_shape[-1] == 1 else categorical_crossentropy
    return get(metric)


def serialize(metric) -> object:
    if hasattr(metric, "get_config") and not isinstance(metric, type):
        return {"class_name": type(metric).__name__, "config": metric.get_config()}
    return getattr(metric, "__name__", metric)


def deserialize(config, custom_objects=None) -> object:
    from trainer.keras.metric_objects import METRIC_CLASSES

    table = METRICS if not isinstance(config, dict) else {**METRICS, **METRIC_CLASSES}
    return deserialize_object(config, table, "metric function", custom_objects)


def get(identifier) -> object:
    if isinstance(identifier, (str, dict)):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret metric function identifier: {identifier!r}")


def __getattr__(name: str):
    """The metric classes (``tf.keras.metrics.Mean``, ...) live in trainer.keras.metric_objects, which
    imports this module's functions; they are looked up there on first use."""
    from trainer.compat import missing_symbol
    from trainer.keras import metric_objects

    if name in metric_objects.__all__:
        return getattr(metric_objects, name)
    raise missing_symbol("tf.keras.metrics", name, globals())

