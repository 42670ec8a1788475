"""``tf.estimator.export``: what a served model takes (a receiver) and gives (export outputs)."""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from trainer.graph import Tensor
from trainer.ops import placeholder
from trainer.parsing import parse_example
from trainer.sparse_tensor import SparseTensor

__all__ = [
    "ClassificationOutput", "ExportOutput", "Exporter", "FinalExporter", "LatestExporter", "PredictOutput",
    "RegressionOutput", "ServingInputReceiver", "TensorServingInputReceiver", "build_parsing_serving_input_receiver_fn",
    "build_raw_serving_input_receiver_fn",
]


def _receiver_dict(tensors, what: str, default_key: str) -> dict:
    """``tensors`` (a Tensor, SparseTensor or a non-empty dict of them) as a dict, a lone one under ``default_key``."""
    if isinstance(tensors, (Tensor, SparseTensor)):
        tensors = {default_key: tensors}
    if not isinstance(tensors, dict) or not tensors:
        raise ValueError(f"{what} must be a Tensor, a SparseTensor or a non-empty dict of them")
    for name, t in tensors.items():
        if not isinstance(name, (str, int)):
            raise ValueError(f"{what}: key {name!r} is {type(name).__name__}, not a string")
        if not isinstance(t, (Tensor, SparseTensor)):
            raise ValueError(f"{what}[{name!r}] is {type(t).__name__}, not a Tensor or SparseTensor")
    return dict(tensors)


def _alternatives(alternatives, what: str) -> dict:
    if alternatives is None:
        return {}
    if not isinstance(alternatives, dict):
        raise ValueError(f"{what}: receiver_tensors_alternatives must be a dict of name -> receiver tensors, got "
                         f"{type(alternatives).__name__}")
    return {name: _receiver_dict(tensors, f"{what}: receiver_tensors_alternatives[{name!r}]", "input")
            for name, tensors in alternatives.items()}


class ServingInputReceiver:
    """``features`` for the model_fn, and ``receiver_tensors`` (placeholders) the served model is fed.

    A lone features tensor becomes ``{"feature": tensor}`` and a lone receiver tensor
    ``{"input": tensor}``, as in TensorFlow. ``receiver_tensors_alternatives`` (name -> a tensor or
    dict of them, each feeding the same features another way) are checked and kept; a SavedModel
    gives each its own signature, but a ``.flow`` has one entry point, so ``export_saved_model``
    serves ``receiver_tensors`` only and the alternatives are not exported.
    """

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        what = type(self).__name__
        if not isinstance(features, dict):
            features = {"feature": features}
        self.features = _receiver_dict(features, f"{what}: features", "feature")
        self.receiver_tensors = _receiver_dict(receiver_tensors, f"{what}: receiver_tensors", "input")
        self.receiver_tensors_alternatives = _alternatives(receiver_tensors_alternatives, what)


class TensorServingInputReceiver(ServingInputReceiver):
    """A receiver whose ``features`` is one Tensor (or SparseTensor) handed to the model_fn as it is,
    not wrapped in a dict: for a model_fn that takes a single tensor."""

    def __init__(self, features, receiver_tensors, receiver_tensors_alternatives=None):
        if not isinstance(features, (Tensor, SparseTensor)):
            raise ValueError(f"TensorServingInputReceiver: features must be a Tensor or SparseTensor, got "
                             f"{type(features).__name__}")
        super().__init__(features, receiver_tensors, receiver_tensors_alternatives)
        self.features = features


def build_parsing_serving_input_receiver_fn(feature_spec: dict, default_batch_size: int | None = None) -> Callable:
    """A receiver fn fed serialized ``tf.train.Example`` records: a string placeholder named
    ``input_example_tensor`` of shape ``[default_batch_size]`` (None: any batch), received as
    ``"examples"`` and parsed with ``parse_example(feature_spec)`` into the model_fn's features."""
    if not isinstance(feature_spec, dict) or not feature_spec:
        raise ValueError("build_parsing_serving_input_receiver_fn: feature_spec must be a non-empty dict of "
                         "feature name -> FixedLenFeature / VarLenFeature")

    def serving_input_receiver_fn() -> ServingInputReceiver:
        serialized = placeholder(np.dtype(object), (default_batch_size,), name="input_example_tensor")
        return ServingInputReceiver(parse_example(serialized, feature_spec), {"examples": serialized})

    return serving_input_receiver_fn


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
