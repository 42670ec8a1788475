"""``tf.keras.losses``: per-sample losses ``f(y_true, y_pred)`` (the mean over the last axis, as
Keras reduces them), by name, as functions and as ``Loss`` classes."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.serialization import deserialize as deserialize_object

__all__ = ["BinaryCrossentropy", "CategoricalCrossentropy", "CategoricalHinge", "CosineSimilarity", "Hinge",
           "Huber", "KLD", "KLDivergence", "LogCosh", "Loss", "MAE", "MAPE", "MSE", "MSLE", "MeanAbsoluteError",
           "MeanAbsolutePercentageError", "MeanSquaredError", "MeanSquaredLogarithmicError", "Poisson",
           "SparseCategoricalCrossentropy", "SquaredHinge", "binary_crossentropy", "categorical_crossentropy",
           "categorical_hinge", "cosine", "cosine_proximity", "cosine_similarity", "deserialize", "get", "hinge",
           "kld", "kullback_leibler_divergence", "logcosh", "mae", "mape", "mean_absolute_error",
           "mean_absolute_percentage_error", "mean_squared_error", "mean_squared_logarithmic_error", "mse", "msle",
           "poisson", "serialize", "sparse_categorical_crossentropy", "squared_hinge"]


def mean_squared_error(y_true, y_pred) -> "tf.Tensor":
    return K.mean(K.square(y_pred - y_true), axis=-1)


def mean_absolute_error(y_true, y_pred) -> "tf.Tensor":
    return K.mean(K.abs(y_pred - y_true), axis=-1)


def mean_absolute_percentage_error(y_true, y_pred) -> "tf.Tensor":
    diff = K.abs((y_true - y_pred) / K.clip(K.abs(y_true), K.epsilon(), None))
    return 100.0 * K.mean(diff, axis=-1)


def mean_squared_logarithmic_error(y_true, y_pred) -> "tf.Tensor":
    first = K.log(K.clip(y_pred, K.epsilon(), None) + 1.0)
    second = K.log(K.clip(y_true, K.epsilon(), None) + 1.0)
    return K.mean(K.square(first - second), axis=-1)


def squared_hinge(y_true, y_pred) -> "tf.Tensor":
    return K.mean(K.square(K.maximum(1.0 - y_true * y_pred, 0.0)), axis=-1)


def hinge(y_true, y_pred) -> "tf.Tensor":
    return K.mean(K.maximum(1.0 - y_true * y_pred, 0.0), axis=-1)


def categorical_hinge(y_true, y_pred) -> "tf.Tensor":
    pos = K.sum(y_true * y_pred, axis=-1)
    neg = K.max((1.0 - y_true) * y_pred, axis=-1)
    return K.maximum(0.0, neg - pos + 1.0)


def logcosh(y_true, y_pred) -> "tf.Tensor":
    x = y_pred - y_true
    return K.mean(x + tf.nn.softplus(-2.0 * x) - tf.log(2.0), axis=-1)


def categorical_crossentropy(y_true, y_pred, from_logits: bool = False, label_smoothing: float = 0) -> "tf.Tensor":
    if label_smoothing:
        classes = tf.cast(tf.shape(y_true)[-1], y_pred.dtype)
        y_true = y_true * (1.0 - label_smoothing) + label_smoothing / classes
    return K.categorical_crossentropy(y_true, y_pred, from_logits=from_logits)


def sparse_categorical_crossentropy(y_true, y_pred, from_logits: bool = False, axis: int = -1) -> "tf.Tensor":
    return K.sparse_categorical_crossentropy(y_true, y_pred, from_logits=from_logits, axis=axis)


def binary_crossentropy(y_true, y_pred, from_logits: bool = False, label_smoothing: float = 0) -> "tf.Tensor":
    if label_smoothing:
        y_true = y_true * (1.0 - label_smoothing) + 0.5 * label_smoothing
    return K.mean(K.binary_crossentropy(y_true, y_pred, from_logits=from_logits), axis=-1)


def kullback_leibler_divergence(y_true, y_pred) -> "tf.Tensor":
    y_true = K.clip(y_true, K.epsilon(), 1)
    y_pred = K.clip(y_pred, K.epsilon(), 1)
    return K.sum(y_true * K.log(y_true / y_pred), axis=-1)


def poisson(y_true, y_pred) -> "tf.Tensor":
    return K.mean(y_pred - y_true * K.log(y_pred + K.epsilon()), axis=-1)


def cosine_proximity(y_true, y_pred, axis: int = -1) -> "tf.Tensor":
    """Keras 2.2's ``cosine``: minus the cosine similarity (so lower is better)."""
    return -K.sum(K.l2_normalize(y_true, axis) * K.l2_normalize(y_pred, axis), axis=axis)


def huber(y_true, y_pred, delta: float = 1.0) -> "tf.Tensor":
    error = y_pred - y_true
    abs_error = K.abs(error)
    quadratic = K.minimum(abs_error, delta)
    return K.mean(0.5 * K.square(quadratic) + delta * (abs_error - quadratic), axis=-1)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
mape = MAPE = mean_absolute_percentage_error
msle = MSLE = mean_squared_logarithmic_error
kld = KLD = kullback_leibler_divergence
cosine = cosine_similarity = cosine_proximity

LOSSES = {f.__name__: f for f in (
    mean_squared_error, mean_absolute_error, mean_absolute_percentage_error, mean_squared_logarithmic_error,
    squared_hinge, hinge, categorical_hinge, logcosh, categorical_crossentropy, sparse_categorical_crossentropy,
    binary_crossentropy, kullback_leibler_divergence, poisson, cosine_proximity)}
LOSSES.update({"mse": mse, "MSE": mse, "mae": mae, "MAE": mae, "mape": mape, "MAPE": mape, "msle": msle,
               "MSLE": msle, "kld": kld, "KLD": kld, "cosine": cosine, "cosine_similarity": cosine})


class Loss:
    """A loss object: ``loss(y_true, y_pred)`` is the mean of ``fn`` over the batch."""

    fn = staticmethod(mean_squared_error)

    def __init__(self, reduction: str = "sum_over_batch_size", name: str | None = None, **kwargs):
        self.reduction, self.name = reduction, name or type(self).__name__
        self.fn_kwargs = kwargs

    def call(self, y_true, y_pred):
        return type(self).fn(y_true, y_pred, **self.fn_kwargs)

    def __call__(self, y_true, y_pred, sample_weight=None):
        per_sample = self.call(y_true, y_pred)
        if sample_weight is not None:
            per_sample = per_sample * sample_weight
        return K.sum(per_sample) if self.reduction == "sum" else K.mean(per_sample)

    def get_config(self) -> dict:
        return {"reduction": self.reduction, "name": self.name, **self.fn_kwargs}

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


def _loss_class(name: str, fn, **defaults) -> type:
    def __init__(self, reduction="sum_over_batch_size", name=None, **kwargs):
        Loss.__init__(self, reduction, name, **{**defaults, **kwargs})
    return type(name, (Loss,), {"fn": staticmethod(fn), "__init__": __init__, "__module__": __name__,
                                "__doc__": f"``{fn.__name__}`` as a Loss object."})


MeanSquaredError = _loss_class("MeanSquaredError", mean_squared_error)
MeanAbsoluteError = _loss_class("MeanAbsoluteError", mean_absolute_error)
MeanAbsolutePercentageError = _loss_class("MeanAbsolutePercentageError", mean_absolute_percentage_error)
MeanSquaredLogarithmicError = _loss_class("MeanSquaredLogarithmicError", mean_squared_logarithmic_error)
BinaryCrossentropy = _loss_class("BinaryCrossentropy", binary_crossentropy, from_logits=False)
CategoricalCrossentropy = _loss_class("CategoricalCrossentropy", categorical_crossentropy, from_logits=False)
SparseCategoricalCrossentropy = _loss_class("SparseCategoricalCrossentropy", sparse_categorical_crossentropy,
                                            from_logits=False)
Hinge = _loss_class("Hinge", hinge)
SquaredHinge = _loss_class("SquaredHinge", squared_hinge)
CategoricalHinge = _loss_class("CategoricalHinge", categorical_hinge)
KLDivergence = _loss_class("KLDivergence", kullback_leibler_divergence)
Poisson = _loss_class("Poisson", poisson)
LogCosh = _loss_class("LogCosh", logcosh)
CosineSimilarity = _loss_class("CosineSimilarity", cosine_proximity)
Huber = _loss_class("Huber", huber)

LOSS_CLASSES = {cls.__name__: cls for cls in (
    MeanSquaredError, MeanAbsoluteError, MeanAbsolutePercentageError, MeanSquaredLogarithmicError, BinaryCrossentropy,
    CategoricalCrossentropy, SparseCategoricalCrossentropy, Hinge, SquaredHinge, CategoricalHinge, KLDivergence,
    Poisson, LogCosh, CosineSimilarity, Huber)}


def per_sample(loss) -> object:
    """The per-sample function behind ``loss`` (a name, a function, or a Loss object)."""
    if isinstance(loss, Loss):
        return loss.call
    return get(loss)


def serialize(loss) -> object:
    if isinstance(loss, Loss):
        return {"class_name": type(loss).__name__, "config": loss.get_config()}
    return getattr(loss, "__name__", loss)


def deserialize(name, custom_objects=None) -> object:
    return deserialize_object(name, {**LOSSES, **LOSS_CLASSES}, "loss function", custom_objects)


def get(identifier) -> object:
    if identifier is None:
        return None
    if isinstance(identifier, (str, dict)):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret loss function identifier: {identifier!r}")


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.losses", name, globals())
