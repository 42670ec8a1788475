"""``EstimatorSpec`` and ``ModeKeys``: what a ``model_fn`` returns, checked field by field."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from trainer.graph import Node, Tensor

__all__ = ["EstimatorSpec", "EstimatorSpecError", "ModeKeys"]


class ModeKeys:
    """The three things a ``model_fn`` is asked to build."""

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


class EstimatorSpecError(ValueError):
    """A ``model_fn`` result that cannot drive the estimator; names the field and what is wrong."""


# What each mode needs from the spec (TensorFlow's rules).
_REQUIRED = {
    ModeKeys.TRAIN: ("loss", "train_op"),
    ModeKeys.EVAL: ("loss",),
    ModeKeys.PREDICT: ("predictions",),
}


def _is_tensor(x) -> bool:
    return isinstance(x, Tensor) or hasattr(x, "as_tensor")


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else x.as_tensor()


_FIELDS = ("mode", "predictions", "loss", "train_op", "eval_metric_ops", "export_outputs", "training_chief_hooks",
           "training_hooks", "scaffold", "evaluation_hooks", "prediction_hooks")


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """``EstimatorSpec(mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None, export_outputs=None)``.

    Checked in ``__new__`` (as TensorFlow does), so a bad field fails where the model_fn builds the
    spec, naming the field.
    """

    def __new__(cls, mode, predictions=None, loss=None, train_op=None, eval_metric_ops=None, export_outputs=None,
                training_chief_hooks=(), training_hooks=(), scaffold=None, evaluation_hooks=(), prediction_hooks=()):
        if mode not in _REQUIRED:
            raise EstimatorSpecError(f"EstimatorSpec.mode must be one of ModeKeys.TRAIN/EVAL/PREDICT "
                                     f"({sorted(_REQUIRED)}), got {mode!r}")
        given = {"loss": loss, "train_op": train_op, "predictions": predictions}
        for field in _REQUIRED[mode]:
            if given[field] is None:
                raise EstimatorSpecError(f"EstimatorSpec.{field} is required in mode {mode!r} (model_fn returned "
                                         f"a spec without it)")
        if loss is not None:
            if not _is_tensor(loss):
                raise EstimatorSpecError(f"EstimatorSpec.loss must be a scalar Tensor, got {type(loss).__name__}")
            t = _tensor(loss)
            if t.shape is not None and len(t.shape) != 0 and not all(d == 1 for d in t.shape):
                raise EstimatorSpecError(f"EstimatorSpec.loss must be a scalar, got {t.name} of shape {t.shape}")
            if t.dtype is not None and t.dtype.kind != "f":
                raise EstimatorSpecError(f"EstimatorSpec.loss must be a float tensor, got {t.dtype}")
            loss = t
        if train_op is not None and not (_is_tensor(train_op) or isinstance(train_op, Node)):
            raise EstimatorSpecError(f"EstimatorSpec.train_op must be an op or a tensor, got {type(train_op).__name__}")
        if predictions is not None:
            predictions = _checked_predictions(predictions)
        if eval_metric_ops is not None:
            eval_metric_ops = _checked_metrics(eval_metric_ops)
        if export_outputs is not None:
            from trainer.estimator.export import ExportOutput

            if not isinstance(export_outputs, dict) or not all(
                    isinstance(v, ExportOutput) for v in export_outputs.values()):
                raise EstimatorSpecError("EstimatorSpec.export_outputs must map names to ExportOutput objects "
                                         "(tf.estimator.export.PredictOutput, ClassificationOutput, ...)")
        return super().__new__(cls, mode, predictions, loss, train_op, eval_metric_ops, export_outputs,
                               tuple(training_chief_hooks or ()), tuple(training_hooks or ()), scaffold,
                               tuple(evaluation_hooks or ()), tuple(prediction_hooks or ()))


def _checked_predictions(predictions):
    if isinstance(predictions, dict):
        out = {}
        for k, v in predictions.items():
            # a MultiHead keys its heads' predictions by (head name, key)
            named = isinstance(k, str) or (isinstance(k, tuple) and all(isinstance(p, str) for p in k))
            if not named or not _is_tensor(v):
                raise EstimatorSpecError(f"EstimatorSpec.predictions[{k!r}] must be a Tensor under a string key, "
                                         f"got {type(v).__name__}")
            out[k] = _tensor(v)
        return out
    if not _is_tensor(predictions):
        raise EstimatorSpecError(f"EstimatorSpec.predictions must be a Tensor or a dict of Tensors, got "
                                 f"{type(predictions).__name__}")
    return _tensor(predictions)


def _checked_metrics(metric_ops):
    if not isinstance(metric_ops, dict):
        raise EstimatorSpecError(f"EstimatorSpec.eval_metric_ops must be a dict of name -> (value, update_op), got "
                                 f"{type(metric_ops).__name__}")
    out = {}
    for name, pair in metric_ops.items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and _is_tensor(pair[0])
                and (_is_tensor(pair[1]) or isinstance(pair[1], Node))):
            raise EstimatorSpecError(f"EstimatorSpec.eval_metric_ops[{name!r}] must be a (value, update_op) pair such "
                                     f"as tf.metrics.accuracy returns, got {type(pair).__name__}")
        out[name] = (_tensor(pair[0]), pair[1])
    return out


def scalar(value) -> Any:
    """A fetched metric as a NumPy scalar (what TensorFlow's evaluate returns)."""
    arr = np.asarray(value)
    return arr[()] if arr.ndim == 0 else arr
