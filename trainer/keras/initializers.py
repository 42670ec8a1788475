"""``tf.keras.initializers``: Keras' names for trainer's initializers, plus Keras' defaults
(``RandomUniform`` in [-0.05, 0.05], ``RandomNormal`` with stddev 0.05)."""

from __future__ import annotations

import numpy as np

from trainer import initializers as tf_init
from trainer.keras.serialization import config_from_attributes, deserialize as deserialize_object, get_object

__all__ = ["Constant", "Identity", "Initializer", "Ones", "Orthogonal", "RandomNormal", "RandomUniform",
           "TruncatedNormal", "VarianceScaling", "Zeros", "constant", "deserialize", "get", "glorot_normal",
           "glorot_uniform", "he_normal", "he_uniform", "identity", "lecun_normal", "lecun_uniform", "normal", "ones",
           "orthogonal", "random_normal", "random_uniform", "serialize", "truncated_normal", "uniform", "zeros"]


class Initializer(tf_init.Initializer):
    def get_config(self) -> dict:
        return config_from_attributes(self)

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)


class Zeros(tf_init.Zeros, Initializer):
    pass


class Ones(tf_init.Ones, Initializer):
    pass


class Constant(tf_init.Constant, Initializer):
    def __init__(self, value=0, dtype=np.float32, verify_shape=False):
        super().__init__(value, dtype)


class RandomUniform(tf_init.RandomUniform, Initializer):
    def __init__(self, minval=-0.05, maxval=0.05, seed=None, dtype=np.float32):
        super().__init__(minval, maxval, seed, dtype)


class RandomNormal(tf_init.RandomNormal, Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None, dtype=np.float32):
        super().__init__(mean, stddev, seed, dtype)


class TruncatedNormal(tf_init.TruncatedNormal, Initializer):
    def __init__(self, mean=0.0, stddev=0.05, seed=None, dtype=np.float32):
        super().__init__(mean, stddev, seed, dtype)


class VarianceScaling(tf_init.VarianceScaling, Initializer):
    pass


class Orthogonal(tf_init.Orthogonal, Initializer):
    pass


class Identity(tf_init.Identity, Initializer):
    pass


def _scaled(scale: float, mode: str, distribution: str, name: str):
    def make(seed=None, dtype=np.float32) -> VarianceScaling:
        return VarianceScaling(scale, mode, distribution, seed, dtype)
    make.__name__ = name
    return make


glorot_uniform = _scaled(1.0, "fan_avg", "uniform", "glorot_uniform")
glorot_normal = _scaled(1.0, "fan_avg", "truncated_normal", "glorot_normal")
he_uniform = _scaled(2.0, "fan_in", "uniform", "he_uniform")
he_normal = _scaled(2.0, "fan_in", "truncated_normal", "he_normal")
lecun_uniform = _scaled(1.0, "fan_in", "uniform", "lecun_uniform")
lecun_normal = _scaled(1.0, "fan_in", "truncated_normal", "lecun_normal")
zeros, ones, constant, identity, orthogonal = Zeros, Ones, Constant, Identity, Orthogonal
uniform = random_uniform = RandomUniform
normal = random_normal = RandomNormal
truncated_normal = TruncatedNormal

# name (Keras' snake_case and CamelCase) -> a class or factory taking the config's arguments
INITIALIZERS = {
    "Zeros": Zeros, "zeros": Zeros, "zero": Zeros, "Ones": Ones, "ones": Ones, "one": Ones,
    "Constant": Constant, "constant": Constant, "RandomUniform": RandomUniform, "random_uniform": RandomUniform,
    "uniform": RandomUniform, "RandomNormal": RandomNormal, "random_normal": RandomNormal, "normal": RandomNormal,
    "TruncatedNormal": TruncatedNormal, "truncated_normal": TruncatedNormal, "VarianceScaling": VarianceScaling,
    "Orthogonal": Orthogonal, "orthogonal": Orthogonal, "Identity": Identity, "identity": Identity,
    "glorot_uniform": glorot_uniform, "glorot_normal": glorot_normal, "he_uniform": he_uniform,
    "he_normal": he_normal, "lecun_uniform": lecun_uniform, "lecun_normal": lecun_normal,
    # the class names of tf.*_initializer objects (tf.glorot_uniform_initializer(), ...), saved with a model
    "GlorotUniform": glorot_uniform, "GlorotNormal": glorot_normal, "UniformUnitScaling": tf_init.UniformUnitScaling,
}


def serialize(initializer) -> dict:
    from trainer.keras.serialization import to_json_value

    return to_json_value(initializer)


def deserialize(config, custom_objects=None) -> object:
    return deserialize_object(config, INITIALIZERS, "initializer", custom_objects)


def get(identifier) -> object:
    """An initializer from a name, a config dict, an initializer object or a function."""
    return get_object(identifier, INITIALIZERS, "initializer")


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.initializers", name, globals())
