"""``BatchNormalization`` (and ``LayerNormalization``) with Keras' defaults (momentum 0.99, epsilon 1e-3):
batch statistics while training (the learning phase, or ``training=``), moving averages otherwise. The
moving-average assignments are the layer's ``updates``, which ``fit`` runs; weights are gamma, beta,
moving_mean, moving_variance, in Keras' order."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K, constraints, initializers, regularizers
from trainer.keras.engine.base_layer import Layer

__all__ = ["BatchNormalization", "LayerNormalization"]


class BatchNormalization(Layer):
    def __init__(self, axis: int = -1, momentum: float = 0.99, epsilon: float = 1e-3, center: bool = True,
                 scale: bool = True, beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, beta_constraint=None, gamma_constraint=None, renorm: bool = False,
                 fused=None, virtual_batch_size=None, **kwargs):
        if renorm or virtual_batch_size is not None:
            raise NotImplementedError("BatchNormalization: renorm and virtual_batch_size are not built in flowstack")
        super().__init__(**kwargs)
        self.axis, self.momentum, self.epsilon = axis, float(momentum), float(epsilon)
        self.center, self.scale = center, scale
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.moving_mean_initializer = initializers.get(moving_mean_initializer)
        self.moving_variance_initializer = initializers.get(moving_variance_initializer)
        self.beta_regularizer = regularizers.get(beta_regularizer)
        self.gamma_regularizer = regularizers.get(gamma_regularizer)
        self.beta_constraint = constraints.get(beta_constraint)
        self.gamma_constraint = constraints.get(gamma_constraint)
        self.supports_masking = True

    def build(self, input_shape):
        rank = len(input_shape)
        self.axis_index = self.axis % rank
        dim = input_shape[self.axis_index]
        if dim is None:
            raise ValueError(f"Axis {self.axis} of input tensor should have a defined dimension but the layer "
                             f"received an input with shape {input_shape}.")
        shape = (dim,)
        self.gamma = self.add_weight("gamma", shape, initializer=self.gamma_initializer,
                                     regularizer=self.gamma_regularizer, constraint=self.gamma_constraint) \
            if self.scale else None
        self.beta = self.add_weight("beta", shape, initializer=self.beta_initializer,
                                    regularizer=self.beta_regularizer, constraint=self.beta_constraint) \
            if self.center else None
        self.moving_mean = self.add_weight("moving_mean", shape, initializer=self.moving_mean_initializer,
                                           trainable=False)
        self.moving_variance = self.add_weight("moving_variance", shape,
                                               initializer=self.moving_variance_initializer, trainable=False)
        self.built = True

    def _broadcast(self, v, rank: int):
        if v is None or self.axis_index == rank - 1:
            return v
        shape = [1] * rank
        shape[self.axis_index] = -1
        return tf.reshape(v, shape)

    def _normalize(self, x, mean, variance, rank: int):
        b = self._broadcast
        return tf.nn.batch_normalization(x, b(mean, rank), b(variance, rank), b(self.beta, rank),
                                         b(self.gamma, rank), self.epsilon)

    def call(self, inputs, training=None):
        rank = len(K.int_shape(inputs))
        inference = self._normalize(inputs, self.moving_mean, self.moving_variance, rank)
        if training is False or training == 0 or (training is None and not K.learning_phase_is_fed()
                                                  and K.learning_phase() == 0):
            return inference
        axes = [i for i in range(rank) if i != self.axis_index]
        mean, variance = tf.nn.moments(inputs, axes)
        trained = self._normalize(inputs, mean, variance, rank)
        # Keras corrects the batch variance towards the unbiased one for the moving average
        count = tf.cast(tf.reduce_prod(tf.gather(tf.shape(inputs), axes)), inputs.dtype)
        unbiased = variance * count / tf.maximum(count - 1.0, 1.0)
        self.add_update([K.moving_average_update(self.moving_mean, mean, self.momentum),
                         K.moving_average_update(self.moving_variance, unbiased, self.momentum)])
        return K.in_train_phase(trained, inference, training=training)


class LayerNormalization(Layer):
    """Normalizes each example over ``axis`` (the last by default), then scales by gamma and shifts by beta."""

    def __init__(self, axis=-1, epsilon: float = 1e-3, center: bool = True, scale: bool = True,
                 beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None, gamma_regularizer=None,
                 beta_constraint=None, gamma_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.axis = list(axis) if isinstance(axis, (list, tuple)) else axis
        self.epsilon, self.center, self.scale = float(epsilon), center, scale
        self.beta_initializer = initializers.get(beta_initializer)
        self.gamma_initializer = initializers.get(gamma_initializer)
        self.beta_regularizer = regularizers.get(beta_regularizer)
        self.gamma_regularizer = regularizers.get(gamma_regularizer)
        self.beta_constraint = constraints.get(beta_constraint)
        self.gamma_constraint = constraints.get(gamma_constraint)
        self.supports_masking = True

    def build(self, input_shape):
        rank = len(input_shape)
        self.axes = sorted(a % rank for a in (self.axis if isinstance(self.axis, list) else [self.axis]))
        shape = tuple(input_shape[a] for a in self.axes)
        self.gamma = self.add_weight("gamma", shape, initializer=self.gamma_initializer,
                                     regularizer=self.gamma_regularizer, constraint=self.gamma_constraint) \
            if self.scale else None
        self.beta = self.add_weight("beta", shape, initializer=self.beta_initializer,
                                    regularizer=self.beta_regularizer, constraint=self.beta_constraint) \
            if self.center else None
        self.built = True

    def call(self, inputs):
        rank = len(K.int_shape(inputs))
        mean, variance = tf.nn.moments(inputs, self.axes, keep_dims=True)
        shape = [K.int_shape(inputs)[a] if a in self.axes else 1 for a in range(rank)]
        gamma = tf.reshape(self.gamma, shape) if self.gamma is not None else None
        beta = tf.reshape(self.beta, shape) if self.beta is not None else None
        return tf.nn.batch_normalization(inputs, mean, variance, beta, gamma, self.epsilon)
