"""``slim.losses`` (``tf.contrib.losses``): TensorFlow 1.x's older loss functions, which take the
predictions or logits FIRST (``softmax_cross_entropy(logits, onehot_labels)``), unlike ``tf.losses``.

Each returns the weighted mean over the examples with nonzero weight and joins the LOSSES
collection, so ``get_total_loss`` (which adds REGULARIZATION_LOSSES) sees it.
"""

from __future__ import annotations

from trainer import nn
from trainer import losses as tf_losses
from trainer.losses import (add_loss, compute_weighted_loss, get_losses, get_regularization_losses,
                            get_total_loss)
from trainer.ops import convert_to_tensor, square, subtract

__all__ = ["absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance", "get_losses",
           "get_regularization_losses", "get_total_loss", "hinge_loss", "log_loss", "mean_squared_error",
           "sigmoid_cross_entropy", "softmax_cross_entropy", "sparse_softmax_cross_entropy"]


def _smoothed(labels, label_smoothing: float, num_classes):
    if not label_smoothing:
        return labels
    return labels * (1.0 - label_smoothing) + label_smoothing / num_classes


def softmax_cross_entropy(logits, onehot_labels, weights=1.0, label_smoothing: float = 0, scope=None):
    """Softmax cross-entropy of [batch, classes] ``logits`` against one-hot labels."""
    logits = convert_to_tensor(logits)
    labels = _smoothed(convert_to_tensor(onehot_labels), label_smoothing, logits.shape[-1])
    return compute_weighted_loss(nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits), weights)


def sparse_softmax_cross_entropy(logits, labels, weights=1.0, scope=None):
    """Softmax cross-entropy of [batch, classes] ``logits`` against integer class ids."""
    return compute_weighted_loss(nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), weights)


def sigmoid_cross_entropy(logits, multi_class_labels, weights=1.0, label_smoothing: float = 0, scope=None):
    """Elementwise sigmoid cross-entropy of ``logits`` against 0/1 labels."""
    labels = _smoothed(convert_to_tensor(multi_class_labels), label_smoothing, 2)
    return compute_weighted_loss(nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits), weights)


def mean_squared_error(predictions, labels=None, weights=1.0, scope=None):
    return compute_weighted_loss(square(subtract(predictions, labels)), weights)


def absolute_difference(predictions, labels=None, weights=1.0, scope=None):
    from trainer.ops import abs as abs_

    return compute_weighted_loss(abs_(subtract(predictions, labels)), weights)


def log_loss(predictions, labels=None, weights=1.0, epsilon: float = 1e-7, scope=None):
    """Binary cross-entropy of probabilities ``predictions`` against 0/1 labels."""
    from trainer.ops import log

    p = convert_to_tensor(predictions)
    return compute_weighted_loss(-(labels * log(p + epsilon)) - (1.0 - labels) * log(1.0 - p + epsilon), weights)


def hinge_loss(logits, labels=None, scope=None):
    """``max(0, 1 - (2 labels - 1) logits)`` for 0/1 labels, averaged."""
    return tf_losses.hinge_loss(labels, logits)


def cosine_distance(predictions, labels=None, axis=None, weights=1.0, scope=None, dim=None):
    """``1 - sum(labels * predictions, axis)`` for unit-normalized inputs, averaged."""
    return tf_losses.cosine_distance(labels, predictions, axis=axis, weights=weights, dim=dim)


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.contrib.slim.losses", name, globals())
