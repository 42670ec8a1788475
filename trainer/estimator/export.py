"""``tf.estimator.export``: what a served model takes (a receiver) and gives (export outputs)."""

from __future__ import annotations

import os
from typing import Callable

from trainer.graph import Tensor
from trainer.ops import placeholder

__all__ = [
    "ClassificationOutput", "ExportOutput", "Exporter", "FinalExporter", "LatestExporter", "PredictOutput",
    "RegressionOutput", "ServingInputReceiver", "build_raw_serving_input_receiver_fn",
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
                raise ValueError(f"ServingInputReceiver: receiver_tensors[{name!r}] is {type(t).__name__}, "
                                 "not a Tensor")
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



# -- exporters for train_and_evaluate's EvalSpec -----------------------------------------------------
class Exporter:
    """Base of EvalSpec's exporters: ``name`` and ``export(estimator, export_path, checkpoint_path,
    eval_result, is_the_final_export)`` returning the export's path (or None)."""

    name: str = "exporter"

    def export(self, estimator, export_path: str, checkpoint_path: str | None, eval_result: dict,
               is_the_final_export: bool):
        raise NotImplementedError(f"{type(self).__name__} must define export()")


class FinalExporter(Exporter):
    """Exports the trained model to ``<model_dir>/export/<name>/<version>/model.flow``."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable, assets_extra=None, as_text: bool = False):
        self.name = name
        self.serving_input_receiver_fn = serving_input_receiver_fn

    def export(self, estimator, export_path: str, checkpoint_path: str | None, eval_result: dict,
               is_the_final_export: bool):
        if not is_the_final_export:
            return None
        return estimator.export_saved_model(export_path, self.serving_input_receiver_fn,
                                           checkpoint_path=checkpoint_path)


class LatestExporter(FinalExporter):
    """Exports after every evaluation (here: the one), keeping the newest ``exports_to_keep``."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable, assets_extra=None, as_text: bool = False,
                 exports_to_keep: int = 5):
        super().__init__(name, serving_input_receiver_fn)
        self.exports_to_keep = exports_to_keep

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        import shutil

        path = estimator.export_saved_model(export_path, self.serving_input_receiver_fn,
                                            checkpoint_path=checkpoint_path)
        versions = sorted((d for d in os.listdir(export_path) if d.isdigit()), key=int)
        for old in versions[:-self.exports_to_keep] if self.exports_to_keep else []:
            shutil.rmtree(os.path.join(export_path, old))
        return path
