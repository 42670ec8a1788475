"""``tf.keras.experimental``: Keras models as SavedModels (``export_saved_model`` /
``load_from_saved_model``) and the cosine learning-rate schedules.

The SavedModel holds the session's graph and variables with a ``serving_default`` signature from the
model's inputs to its outputs (by layer name), so tf.saved_model loaders and flowstack's exporter
read it like any other; ``assets.extra/keras_model.json`` adds the model's config and the checkpoint
names of its weights, in order, from which ``load_from_saved_model`` rebuilds the Keras model."""

from __future__ import annotations

import json
import os

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.schedules import LearningRateSchedule
from trainer.saved_model.layout import variables_prefix

__all__ = ["CosineDecay", "CosineDecayRestarts", "LinearCosineDecay", "export_saved_model",
           "load_from_saved_model"]

KERAS_MODEL_FILE = os.path.join("assets.extra", "keras_model.json")


def export_saved_model(model, saved_model_path, custom_objects=None, as_text: bool = False, input_signature=None,
                       serving_only: bool = False) -> None:
    """``model`` (built) as a SavedModel at ``saved_model_path``, tagged ``serve``."""
    if as_text or input_signature is not None:
        raise NotImplementedError("export_saved_model(as_text=/input_signature=) is not built in flowstack")
    if not model.outputs:
        raise ValueError("export_saved_model: the model is not built yet (call it, or fit/predict it, first)")
    path = os.fspath(saved_model_path)
    inputs = dict(zip(model.input_names, model.inputs)) if model.is_graph_network else \
        {f"input_{i + 1}": x for i, x in enumerate(model.inputs)}
    outputs = dict(zip(model.output_names, model.outputs)) if model.is_graph_network else \
        {f"output_{i + 1}": o for i, o in enumerate(model.outputs)}
    tf.saved_model.simple_save(K.get_session(), path, inputs, outputs)
    document = {"model_config": json.loads(model.to_json()) if model.is_graph_network else None,
                "weights": [w.op.name for w in model.weights]}
    os.makedirs(os.path.join(path, "assets.extra"), exist_ok=True)
    with open(os.path.join(path, KERAS_MODEL_FILE), "w") as f:
        json.dump(document, f)


def load_from_saved_model(saved_model_path, custom_objects=None):
    """The Keras model ``export_saved_model`` wrote, rebuilt from its config with the saved weights."""
    from trainer.keras.saving import ModelFileError, model_from_config

    path = os.fspath(saved_model_path)
    config_path = os.path.join(path, KERAS_MODEL_FILE)
    try:
        with open(config_path) as f:
            document = json.load(f)
    except FileNotFoundError:
        raise ModelFileError(f"{config_path}: missing; {path} was not written by export_saved_model") from None
    except ValueError as e:
        raise ModelFileError(f"{config_path}: not a Keras model description: {e}") from None
    if document.get("model_config") is None:
        raise ModelFileError(f"{config_path}: a subclassed model was exported; its architecture is Python code and "
                             "cannot be rebuilt from the SavedModel")
    model = model_from_config(document["model_config"], custom_objects)
    reader = tf.train.load_checkpoint(variables_prefix(path))
    missing = [n for n in document["weights"] if not reader.has_tensor(n)]
    if missing:
        raise ModelFileError(f"{path}: the SavedModel's variables lack {missing}")
    model.set_weights([reader.get_tensor(n) for n in document["weights"]])
    return model


class CosineDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate: float, decay_steps: int, alpha: float = 0.0, name=None):
        self.initial_learning_rate, self.decay_steps, self.alpha, self.name = (initial_learning_rate, decay_steps,
                                                                               alpha, name)

    def __call__(self, step):
        return tf.train.cosine_decay(self.initial_learning_rate, step, self.decay_steps, self.alpha)


class CosineDecayRestarts(LearningRateSchedule):
    def __init__(self, initial_learning_rate: float, first_decay_steps: int, t_mul: float = 2.0, m_mul: float = 1.0,
                 alpha: float = 0.0, name=None):
        self.initial_learning_rate, self.first_decay_steps = initial_learning_rate, first_decay_steps
        self.t_mul, self.m_mul, self.alpha, self.name = t_mul, m_mul, alpha, name

    def __call__(self, step):
        return tf.train.cosine_decay_restarts(self.initial_learning_rate, step, self.first_decay_steps, self.t_mul,
                                              self.m_mul, self.alpha)


class LinearCosineDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate: float, decay_steps: int, num_periods: float = 0.5, alpha: float = 0.0,
                 beta: float = 0.001, name=None):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.num_periods, self.alpha, self.beta, self.name = num_periods, alpha, beta, name

    def __call__(self, step):
        return tf.train.linear_cosine_decay(self.initial_learning_rate, step, self.decay_steps, self.num_periods,
                                            self.alpha, self.beta)
