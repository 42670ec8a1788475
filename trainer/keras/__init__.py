"""``tf.keras`` in graph mode, as TensorFlow 1.13-1.15 ship it: Keras layers usable inside classic
graph code (their variables are ordinary graph variables), and the Model API (``Sequential``,
functional ``Model``, subclassed models) with ``compile``/``fit``/``evaluate``/``predict`` running in
``tf.keras.backend.get_session()``.

``tf.keras.datasets`` is not provided: it downloads data, and flowstack makes no downloads.
"""

from __future__ import annotations

from trainer.keras import (activations, backend, callbacks, constraints, initializers, layers, losses, metrics,
                           models, optimizers, preprocessing, regularizers, utils, wrappers)
from trainer.keras.engine.input_layer import Input
from trainer.keras.engine.sequential import Sequential
from trainer.keras.engine.training import Model

__all__ = ["Input", "Model", "Sequential", "activations", "backend", "callbacks", "constraints", "initializers",
           "layers", "losses", "metrics", "models", "optimizers", "preprocessing", "regularizers", "utils",
           "wrappers"]

LAZY_ATTRIBUTES = {"estimator": ("trainer.keras.estimator", None),  # these import tf.estimator and
                   "experimental": ("trainer.keras.experimental", None)}  # tf.saved_model: on first use


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    from trainer.compat import missing_symbol, resolve_lazy

    if name in LAZY_ATTRIBUTES:
        return resolve_lazy(name, LAZY_ATTRIBUTES)
    if name == "datasets":
        raise AttributeError("tf.keras.datasets downloads its data, and flowstack makes no downloads: load the "
                             "arrays yourself (e.g. sklearn.datasets.load_digits) and pass them to fit")
    raise missing_symbol("tf.keras", name, globals())
