"""Losses: each returns a scalar (the batch mean) and is added to the LOSSES collection."""

from __future__ import annotations

from trainer import nn
from trainer.array_ops import reduce_mean
from trainer.graph import GraphKeys
from trainer.ops import square, subtract

__all__ = [
    "Reduction", "absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance", "hinge_loss",
    "huber_loss", "get_losses", "get_regularization_loss", "get_regularization_losses",
    "get_total_loss", "log_loss", "mean_squared_error", "sigmoid_cross_entropy", "softmax_cross_entropy",
    "sparse_softmax_cross_entropy",
]


def _add(loss):
    loss.graph.add_to_collection(GraphKeys.LOSSES, loss)
    return loss


def sparse_softmax_cross_entropy(labels, logits, name=None):
    return _add(reduce_mean(nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), name=name))


def softmax_cross_entropy(onehot_labels, logits, name=None):
    return _add(reduce_mean(nn.softmax_cross_entropy_with_logits(labels=onehot_labels, logits=logits), name=name))


def mean_squared_error(labels, predictions, name=None):
    return _add(reduce_mean(square(subtract(predictions, labels)), name=name))


def add_loss(loss, loss_collection=GraphKeys.LOSSES):
    loss.graph.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=GraphKeys.LOSSES):
    from trainer.graph import get_default_graph

    return get_default_graph().get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
    """The penalties get_variable's regularizers added (GraphKeys.REGULARIZATION_LOSSES)."""
    from trainer.graph import get_default_graph

    return get_default_graph().get_collection(GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """Their sum (a scalar 0 when there are none)."""
    import numpy as np

    from trainer.ops import add_n, constant

    losses = get_regularization_losses(scope)
    return add_n(losses, name=name) if losses else constant(np.float32(0), name=name)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
    from trainer.ops import add_n

    losses = get_losses(scope) + (get_regularization_losses(scope) if add_regularization_losses else [])
    if not losses:
        raise ValueError("get_total_loss: no losses in the LOSSES or REGULARIZATION_LOSSES collections")
    return add_n(losses, name=name)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None):
    """Mean elementwise sigmoid cross-entropy of ``logits`` against 0/1 labels."""
    labels = multi_class_labels
    if label_smoothing:
        labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
    xent = nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    return _add(reduce_mean(xent * weights if not (isinstance(weights, float) and weights == 1.0) else xent))


def absolute_difference(labels, predictions, weights=1.0, scope=None):
    from trainer.ops import abs as abs_

    diff = abs_(subtract(predictions, labels))
    return _add(reduce_mean(diff * weights if not (isinstance(weights, float) and weights == 1.0) else diff))


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None):
    from trainer.ops import log

    p = predictions
    ll = -(labels * log(p + epsilon)) - (1.0 - labels) * log(1.0 - p + epsilon)
    return _add(reduce_mean(ll * weights if not (isinstance(weights, float) and weights == 1.0) else ll))


def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.losses", name, globals())


class Reduction:
    """How ``compute_weighted_loss`` reduces the weighted losses."""

    NONE = "none"
    SUM = "weighted_sum"
    MEAN = "weighted_mean"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    SUM_OVER_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_BY_NONZERO_WEIGHTS = SUM_OVER_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS)


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``losses * weights`` reduced as ``reduction`` says, added to ``loss_collection``."""
    import numpy as np

    from trainer.array_ops import count_nonzero, reduce_sum
    from trainer.ops import cast, convert_to_tensor, divide, maximum, multiply, ones_like

    losses = convert_to_tensor(losses)
    weighted = multiply(losses, weights)
    if reduction == Reduction.NONE:
        out = weighted
    elif reduction == Reduction.SUM:
        out = reduce_sum(weighted)
    elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
        out = reduce_mean(weighted)
    elif reduction == Reduction.MEAN:
        out = divide(reduce_sum(weighted), reduce_sum(multiply(ones_like(losses), weights)))
    elif reduction == Reduction.SUM_OVER_NONZERO_WEIGHTS:
        present = cast(count_nonzero(multiply(ones_like(losses), weights)), losses.dtype)
        out = divide(reduce_sum(weighted), maximum(present, np.asarray(1, losses.dtype)))
    else:
        raise ValueError(f"compute_weighted_loss: unknown reduction {reduction!r}; use one of {Reduction.all()}")
    if loss_collection:
        out.graph.add_to_collection(loss_collection, out)
    return out


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``0.5 e^2`` for ``|e| <= delta``, ``delta (|e| - 0.5 delta)`` beyond (e = predictions - labels)."""
    from trainer.ops import abs as abs_, minimum

    err = abs_(subtract(predictions, labels))
    quadratic = minimum(err, delta)
    linear = subtract(err, quadratic)
    losses = quadratic * quadratic * 0.5 + linear * delta
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """``max(0, 1 - (2 labels - 1) logits)`` for 0/1 labels."""
    from trainer.nn import relu

    signs = labels * 2.0 - 1.0
    return compute_weighted_loss(relu(1.0 - signs * logits), weights, scope, loss_collection, reduction)


def cosine_distance(labels, predictions, axis=None, weights=1.0, scope=None, loss_collection=GraphKeys.LOSSES,
                    reduction=Reduction.SUM_BY_NONZERO_WEIGHTS, dim=None):
    """``1 - sum(labels * predictions, axis)`` for unit-normalized inputs."""
    from trainer.array_ops import reduce_sum

    axis = dim if axis is None else axis
    if axis is None:
        raise ValueError("cosine_distance needs axis")
    losses = 1.0 - reduce_sum(labels * predictions, axis=axis, keepdims=True)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction)
