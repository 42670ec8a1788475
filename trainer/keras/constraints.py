"""``tf.keras.constraints``: projections applied to a weight after each optimizer step."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.serialization import config_from_attributes, deserialize as deserialize_object, get_object

__all__ = ["Constraint", "MaxNorm", "MinMaxNorm", "NonNeg", "UnitNorm", "deserialize", "get", "max_norm",
           "min_max_norm", "non_neg", "serialize", "unit_norm"]


class Constraint:
    def __call__(self, w):
        return w

    def get_config(self) -> dict:
        return config_from_attributes(self)

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


def _norms(w, axis):
    return tf.sqrt(tf.reduce_sum(tf.square(w), axis=axis, keepdims=True))


class MaxNorm(Constraint):
    def __init__(self, max_value: float = 2, axis: int = 0):
        self.max_value, self.axis = max_value, axis

    def __call__(self, w):
        norms = _norms(w, self.axis)
        desired = tf.clip_by_value(norms, 0.0, float(self.max_value))
        return w * (desired / (K.epsilon() + norms))


class NonNeg(Constraint):
    def __call__(self, w):
        return w * tf.cast(tf.greater_equal(w, 0.0), w.dtype)


class UnitNorm(Constraint):
    def __init__(self, axis: int = 0):
        self.axis = axis

    def __call__(self, w):
        return w / (K.epsilon() + _norms(w, self.axis))


class MinMaxNorm(Constraint):
    def __init__(self, min_value: float = 0.0, max_value: float = 1.0, rate: float = 1.0, axis: int = 0):
        self.min_value, self.max_value, self.rate, self.axis = min_value, max_value, rate, axis

    def __call__(self, w):
        norms = _norms(w, self.axis)
        desired = self.rate * tf.clip_by_value(norms, float(self.min_value), float(self.max_value)) + \
            (1 - self.rate) * norms
        return w * (desired / (K.epsilon() + norms))


max_norm, non_neg, unit_norm, min_max_norm = MaxNorm, NonNeg, UnitNorm, MinMaxNorm

CONSTRAINTS = {"MaxNorm": MaxNorm, "max_norm": MaxNorm, "NonNeg": NonNeg, "non_neg": NonNeg,
               "UnitNorm": UnitNorm, "unit_norm": UnitNorm, "MinMaxNorm": MinMaxNorm, "min_max_norm": MinMaxNorm}


def serialize(constraint) -> dict:
    from trainer.keras.serialization import to_json_value

    return to_json_value(constraint)


def deserialize(config, custom_objects=None) -> object:
    return deserialize_object(config, CONSTRAINTS, "constraint", custom_objects)


def get(identifier) -> object:
    """An constraint from a name, a config dict, an constraint object or a function."""
    return get_object(identifier, CONSTRAINTS, "constraint")


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.constraints", name, globals())
