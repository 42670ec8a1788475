"""Regularizing noise active only while training: GaussianNoise, GaussianDropout, AlphaDropout."""

from __future__ import annotations

import math

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer

__all__ = ["AlphaDropout", "GaussianDropout", "GaussianNoise"]


class GaussianNoise(Layer):
    """Adds N(0, stddev^2) noise while training."""

    def __init__(self, stddev: float, **kwargs):
        super().__init__(**kwargs)
        self.stddev = float(stddev)
        self.supports_masking = True

    def call(self, inputs, training=None):
        return K.in_train_phase(lambda: inputs + K.random_normal(tf.shape(inputs), 0.0, self.stddev), inputs,
                                training=training)


class GaussianDropout(Layer):
    """Multiplies by N(1, rate / (1 - rate)) noise while training."""

    def __init__(self, rate: float, **kwargs):
        super().__init__(**kwargs)
        self.rate = float(rate)
        self.supports_masking = True

    def call(self, inputs, training=None):
        if not 0.0 < self.rate < 1.0:
            return inputs
        stddev = math.sqrt(self.rate / (1.0 - self.rate))
        return K.in_train_phase(lambda: inputs * K.random_normal(tf.shape(inputs), 1.0, stddev), inputs,
                                training=training)


class AlphaDropout(Layer):
    """Dropout that keeps SELU's self-normalization: dropped units take SELU's negative saturation, then an
    affine correction restores the mean and variance (Klambauer et al., as Keras computes it)."""

    def __init__(self, rate: float, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.noise_shape, self.seed = float(rate), noise_shape, seed
        self.supports_masking = True

    def call(self, inputs, training=None):
        if not 0.0 < self.rate < 1.0:
            return inputs
        alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
        alpha_p = -alpha * scale
        keep = 1.0 - self.rate

        def dropped():
            kept = tf.cast(tf.greater_equal(K.random_uniform(tf.shape(inputs), seed=self.seed), self.rate),
                           inputs.dtype)
            a = (keep * (1 + self.rate * alpha_p ** 2)) ** -0.5
            b = -a * alpha_p * self.rate
            return a * (inputs * kept + alpha_p * (1.0 - kept)) + b
        return K.in_train_phase(dropped, inputs, training=training)
