"""``tf.keras.regularizers``: penalties on weights (``kernel_regularizer=l2(1e-4)``) that join the
model's losses."""

from __future__ import annotations

import trainer as tf
from trainer.keras.serialization import config_from_attributes, deserialize as deserialize_object, get_object

__all__ = ["L1L2", "Regularizer", "deserialize", "get", "l1", "l1_l2", "l2", "serialize"]


class Regularizer:
    def __call__(self, x):
        return 0.0

    def get_config(self) -> dict:
        return config_from_attributes(self)

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


class L1L2(Regularizer):
    """``l1 * sum(|x|) + l2 * sum(x**2)``."""

    def __init__(self, l1: float = 0.0, l2: float = 0.0):
        self.l1, self.l2 = float(l1), float(l2)

    def __call__(self, x):
        penalty = tf.constant(0.0, dtype=x.dtype)
        if self.l1:
            penalty = penalty + self.l1 * tf.reduce_sum(tf.abs(x))
        if self.l2:
            penalty = penalty + self.l2 * tf.reduce_sum(tf.square(x))
        return penalty


def l1(l: float = 0.01) -> L1L2:  # noqa: E741 - Keras' argument name
    return L1L2(l1=l)


def l2(l: float = 0.01) -> L1L2:  # noqa: E741
    return L1L2(l2=l)


def l1_l2(l1: float = 0.01, l2: float = 0.01) -> L1L2:  # noqa: E741
    return L1L2(l1=l1, l2=l2)


REGULARIZERS = {"L1L2": L1L2, "l1": l1, "l2": l2, "l1_l2": l1_l2}


def serialize(regularizer) -> dict:
    from trainer.keras.serialization import to_json_value

    return to_json_value(regularizer)


def deserialize(config, custom_objects=None) -> object:
    return deserialize_object(config, REGULARIZERS, "regularizer", custom_objects)


def get(identifier) -> object:
    """An regularizer from a name, a config dict, an regularizer object or a function."""
    return get_object(identifier, REGULARIZERS, "regularizer")


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.regularizers", name, globals())
