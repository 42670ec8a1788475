"""``tf.estimator.export``: what a served model takes (a receiver) and gives (export outputs)."""

from __future__ import annotations

from typing import Callable

from trainer.graph import Tensor
from trainer.ops import placeholder

__all__ = [
    "ClassificationOutput", "ExportOutput", "FinalExporter", "LatestExporter", "PredictOutput", "RegressionOutput", "ServingInputReceiver",
    "build_raw_serving_input_receiver_fn",
]


class ServingInputReceiver:
    """``features`` for the model_fn, and ``receiver_tensors`` (placeholders) the served model is fed."""

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        if isinstance(receiver_tensors, Tensor):
            receiver_tensors = {"input": receiver_tensors}
        if not isinstance(receiver_tensors, dict) or not receiver_tensors:
            raise ValueError("ServingInputReceiver: receiver_tensors must be a Tensor or a non-empty dict of them")
        for name, t in receiver_tensors.items():
            if not isinstance(t, Tensor):
                raise ValueError(f"ServingInputReceiver: receiver_tensors[{name!r}] is {type(t).__name__}, not a Tensor")
        self.features = features
        self.receiver_tensors = receiver_tensors


def build_raw_serving_input_receiver_fn(features: dict, default_batch_size: int | None = None) -> Callable:
    """A receiver fn whose served inputs are ``features``' own placeholders (one per feature name)."""

    def serving_input_receiver_fn() -> ServingInputReceiver:
        receivers = {}
        for name, t in features.items():
            shape = (default_batch_size,) + tuple(t.shape[1:]) if t.shape is not None else None
            receivers[name] = placeholder(t.dtype, shape, name=name)
        return ServingInputReceiver(receivers, receivers)

    return serving_input_receiver_fn


class ExportOutput:
    """Named output tensors of a served model."""

    def __init__(self, outputs: dict):
        for name, t in outputs.items():
            if not isinstance(t, Tensor):
                raise ValueError(f"{type(self).__name__}: output {name!r} is {type(t).__name__}, not a Tensor")
        self.outputs = outputs


class PredictOutput(ExportOutput):
    def __init__(self, outputs):
        super().__init__(outputs if isinstance(outputs, dict) else {"output": outputs})


class ClassificationOutput(ExportOutput):
    def __init__(self, scores=None, classes=None):
        if scores is None and classes is None:
            raise ValueError("ClassificationOutput needs scores or classes")
        super().__init__({k: v for k, v in (("scores", scores), ("classes", classes)) if v is not None})


class RegressionOutput(ExportOutput):
    def __init__(self, value):
        super().__init__({"outputs": value})


def __getattr__(name: str):
    # tf.estimator.export.FinalExporter / LatestExporter live with train_and_evaluate (which uses them).
    if name in ("FinalExporter", "LatestExporter"):
        from trainer.estimator import training

        return getattr(training, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
