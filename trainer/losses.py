"""Losses: each returns a scalar (the batch mean) and is added to the LOSSES collection."""

from __future__ import annotations

from trainer import nn
from trainer.graph import GraphKeys
from trainer.ops import reduce_mean, square, subtract

__all__ = ["mean_squared_error", "softmax_cross_entropy", "sparse_softmax_cross_entropy"]


def _add(loss):
    loss.graph.add_to_collection(GraphKeys.LOSSES, loss)
    return loss


def sparse_softmax_cross_entropy(labels, logits, name=None):
    return _add(reduce_mean(nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), name=name))


def softmax_cross_entropy(onehot_labels, logits, name=None):
    return _add(reduce_mean(nn.softmax_cross_entropy_with_logits(labels=onehot_labels, logits=logits), name=name))


def mean_squared_error(labels, predictions, name=None):
    return _add(reduce_mean(square(subtract(predictions, labels)), name=name))
