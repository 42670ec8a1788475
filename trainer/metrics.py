"""Metrics computed in the graph."""

from __future__ import annotations

import numpy as np

from trainer.ops import argmax, cast, convert_to_tensor, equal, reduce_mean

__all__ = ["accuracy"]


def accuracy(labels, predictions, name=None):
    """Fraction of ``labels`` equal to ``predictions``; logits (rank labels+1) are argmax-ed first."""
    labels = convert_to_tensor(labels)
    predictions = convert_to_tensor(predictions)
    if predictions.shape is not None and labels.shape is not None and len(predictions.shape) == len(labels.shape) + 1:
        predictions = argmax(predictions, axis=-1)
    if predictions.dtype != labels.dtype:
        predictions = cast(predictions, labels.dtype)
    return reduce_mean(cast(equal(predictions, labels), np.float32), name=name)
