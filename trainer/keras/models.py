"""``tf.keras.models``: Model, Sequential, saving and loading, and ``clone_model``."""

from __future__ import annotations

from trainer.keras.engine.sequential import Sequential
from trainer.keras.engine.training import Model
from trainer.keras.saving import load_model, model_from_config, model_from_json, model_from_yaml, save_model

__all__ = ["Model", "Sequential", "clone_model", "load_model", "model_from_config", "model_from_json",
           "model_from_yaml", "save_model"]


def clone_model(model, input_tensors=None, clone_function=None) -> Model:
    """A new model of the same architecture with fresh weights (built from ``model.get_config()``)."""
    if input_tensors is not None or clone_function is not None:
        raise NotImplementedError("clone_model(input_tensors=/clone_function=) is not built in flowstack")
    return type(model).from_config(model.get_config())


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.models", name, globals())
