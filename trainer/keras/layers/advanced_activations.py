"""Activation layers with parameters: LeakyReLU, ReLU, PReLU, ELU, Softmax, ThresholdedReLU."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K, constraints, initializers, regularizers
from trainer.keras.engine.base_layer import Layer

__all__ = ["ELU", "LeakyReLU", "PReLU", "ReLU", "Softmax", "ThresholdedReLU"]


class LeakyReLU(Layer):
    def __init__(self, alpha: float = 0.3, **kwargs):
        super().__init__(**kwargs)
        self.alpha = float(alpha)
        self.supports_masking = True

    def call(self, inputs):
        return K.relu(inputs, alpha=self.alpha)


class ReLU(Layer):
    def __init__(self, max_value=None, negative_slope: float = 0.0, threshold: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.max_value, self.negative_slope, self.threshold = max_value, float(negative_slope), float(threshold)
        self.supports_masking = True

    def call(self, inputs):
        return K.relu(inputs, alpha=self.negative_slope, max_value=self.max_value, threshold=self.threshold)


class ELU(Layer):
    def __init__(self, alpha: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = float(alpha)
        self.supports_masking = True

    def call(self, inputs):
        return K.elu(inputs, self.alpha)


class ThresholdedReLU(Layer):
    def __init__(self, theta: float = 1.0, **kwargs):
        super().__init__(**kwargs)
        self.theta = float(theta)

    def call(self, inputs):
        return inputs * tf.cast(tf.greater(inputs, self.theta), inputs.dtype)


class Softmax(Layer):
    def __init__(self, axis: int = -1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis
        self.supports_masking = True

    def call(self, inputs):
        return K.softmax(inputs, self.axis)


class PReLU(Layer):
    """``max(x, 0) + alpha * min(x, 0)`` with a learned ``alpha`` per unit (shared along ``shared_axes``)."""

    def __init__(self, alpha_initializer="zeros", alpha_regularizer=None, alpha_constraint=None, shared_axes=None,
                 **kwargs):
        super().__init__(**kwargs)
        self.alpha_initializer = initializers.get(alpha_initializer)
        self.alpha_regularizer = regularizers.get(alpha_regularizer)
        self.alpha_constraint = constraints.get(alpha_constraint)
        self.shared_axes = None if shared_axes is None else \
            list(shared_axes) if isinstance(shared_axes, (list, tuple)) else [shared_axes]

    def build(self, input_shape):
        shape = list(input_shape[1:])
        for axis in self.shared_axes or []:
            shape[axis - 1] = 1
        self.alpha = self.add_weight("alpha", shape, initializer=self.alpha_initializer,
                                     regularizer=self.alpha_regularizer, constraint=self.alpha_constraint)
        self.built = True

    def call(self, inputs):
        return tf.nn.relu(inputs) - self.alpha * tf.nn.relu(-inputs)
