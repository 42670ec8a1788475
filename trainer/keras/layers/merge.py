"""Merge layers (Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate, Dot) and their
functional forms (``add([a, b])``, ...)."""

from __future__ import annotations

import functools

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer

__all__ = ["Add", "Average", "Concatenate", "Dot", "Maximum", "Minimum", "Multiply", "Subtract", "add", "average",
           "concatenate", "dot", "maximum", "minimum", "multiply", "subtract"]


class Merge(Layer):
    """Elementwise ``combine`` over a list of same-shaped inputs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    @staticmethod
    def combine(inputs: list):
        raise NotImplementedError

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise ValueError(f"A merge layer ({type(self).__name__}) should be called on a list of at least 2 inputs. "
                             f"Got: {inputs}")
        return self.combine(list(inputs))

    def compute_mask(self, inputs, mask=None):
        if mask is None or all(m is None for m in mask):
            return None
        masks = [m for m in mask if m is not None]
        return functools.reduce(tf.logical_and, masks)


class Add(Merge):
    @staticmethod
    def combine(inputs):
        return tf.add_n(inputs)


class Subtract(Merge):
    @staticmethod
    def combine(inputs):
        if len(inputs) != 2:
            raise ValueError("A `Subtract` layer should be called on exactly 2 inputs")
        return inputs[0] - inputs[1]


class Multiply(Merge):
    @staticmethod
    def combine(inputs):
        return functools.reduce(tf.multiply, inputs)


class Average(Merge):
    @staticmethod
    def combine(inputs):
        return tf.add_n(inputs) / float(len(inputs))


class Maximum(Merge):
    @staticmethod
    def combine(inputs):
        return functools.reduce(tf.maximum, inputs)


class Minimum(Merge):
    @staticmethod
    def combine(inputs):
        return functools.reduce(tf.minimum, inputs)


class Concatenate(Merge):
    def __init__(self, axis: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, inputs):
        if not isinstance(inputs, (list, tuple)) or len(inputs) < 2:
            raise ValueError("A `Concatenate` layer should be called on a list of at least 2 inputs")
        return K.concatenate(list(inputs), self.axis)

    def compute_mask(self, inputs, mask=None):
        if mask is None or all(m is None for m in mask):
            return None
        if self.axis in (-1, len(K.int_shape(inputs[0])) - 1):  # features joined: a timestep is masked in any
            masks = [m if m is not None else tf.ones_like(K.max(x, axis=-1), dtype=tf.bool)
                     for m, x in zip(mask, inputs)]
            return functools.reduce(tf.logical_and, masks)
        raise NotImplementedError("Concatenate of masked inputs along a non-feature axis is not built in flowstack")


class Dot(Merge):
    """Dot product of two [batch, ...] tensors along ``axes``; ``normalize`` gives cosine proximity."""

    def __init__(self, axes, normalize: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.axes, self.normalize = axes, normalize

    def call(self, inputs):
        if len(inputs) != 2:
            raise ValueError("A `Dot` layer should be called on exactly 2 inputs")
        x, y = inputs
        axes = [self.axes, self.axes] if isinstance(self.axes, int) else list(self.axes)
        axes = [a % len(K.int_shape(t)) for a, t in zip(axes, inputs)]
        if self.normalize:
            x, y = tf.nn.l2_normalize(x, axis=axes[0]), tf.nn.l2_normalize(y, axis=axes[1])
        return K.batch_dot(x, y, axes)


def _functional(cls):
    def merge(inputs, **kwargs):
        return cls(**kwargs)(inputs)
    merge.__name__ = cls.__name__.lower()
    merge.__doc__ = f"``{cls.__name__}(**kwargs)(inputs)``."
    return merge


add, subtract, multiply = _functional(Add), _functional(Subtract), _functional(Multiply)
average, maximum, minimum = _functional(Average), _functional(Maximum), _functional(Minimum)


def concatenate(inputs, axis: int = -1, **kwargs) -> "tf.Tensor":
    return Concatenate(axis=axis, **kwargs)(inputs)


def dot(inputs, axes, normalize: bool = False, **kwargs) -> "tf.Tensor":
    return Dot(axes=axes, normalize=normalize, **kwargs)(inputs)
