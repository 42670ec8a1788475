"""``tf.keras.activations``: activation functions by name (``activation="relu"``)."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.serialization import deserialize as deserialize_object

__all__ = ["deserialize", "elu", "exponential", "get", "hard_sigmoid", "linear", "relu", "selu", "serialize",
           "sigmoid", "softmax", "softplus", "softsign", "swish", "tanh"]


def softmax(x, axis: int = -1) -> "tf.Tensor":
    return K.softmax(x, axis)


def elu(x, alpha: float = 1.0) -> "tf.Tensor":
    return K.elu(x, alpha)


def selu(x) -> "tf.Tensor":
    return tf.nn.selu(x)


def softplus(x) -> "tf.Tensor":
    return K.softplus(x)


def softsign(x) -> "tf.Tensor":
    return K.softsign(x)


def relu(x, alpha: float = 0.0, max_value=None, threshold: float = 0) -> "tf.Tensor":
    return K.relu(x, alpha, max_value, threshold)


def tanh(x) -> "tf.Tensor":
    return K.tanh(x)


def sigmoid(x) -> "tf.Tensor":
    return K.sigmoid(x)


def exponential(x) -> "tf.Tensor":
    return K.exp(x)


def hard_sigmoid(x) -> "tf.Tensor":
    return K.hard_sigmoid(x)


def linear(x) -> "tf.Tensor":
    return x


def swish(x) -> "tf.Tensor":
    return tf.nn.swish(x)


ACTIVATIONS = {f.__name__: f for f in (softmax, elu, selu, softplus, softsign, relu, tanh, sigmoid, exponential,
                                      hard_sigmoid, linear, swish)}


def is_registered(fn) -> bool:
    return any(fn is f for f in ACTIVATIONS.values())


def serialize(activation) -> str:
    for name, fn in ACTIVATIONS.items():
        if fn is activation:
            return name
    return getattr(activation, "__name__", repr(activation))


def deserialize(name, custom_objects=None) -> object:
    return deserialize_object(name, ACTIVATIONS, "activation function", custom_objects)


def get(identifier) -> object:
    """A function from a name, a function, or None (linear)."""
    if identifier is None:
        return linear
    if isinstance(identifier, (str, dict)):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret activation function identifier: {identifier!r}")


def __getattr__(name: str):
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.keras.activations", name, globals())
