"""Core layers: Dense, Activation, Dropout, Flatten, Reshape, Permute, RepeatVector, Lambda, Masking,
ActivityRegularization."""

from __future__ import annotations

import numpy as np

import trainer as tf
from trainer.keras import activations, backend as K, constraints, initializers, regularizers
from trainer.keras.engine.base_layer import Layer
from trainer.keras.serialization import custom_objects

__all__ = ["Activation", "ActivityRegularization", "Dense", "Dropout", "Flatten", "Lambda", "Masking", "Permute",
           "RepeatVector", "Reshape", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D"]


def set_kernel_options(layer, activation, use_bias: bool, kernel_initializer, bias_initializer, kernel_regularizer,
                       bias_regularizer, kernel_constraint, bias_constraint) -> None:
    """The activation and the kernel's and bias's initializers, regularizers and constraints of a layer
    with a kernel and a bias (Dense, the convolutions, LocallyConnected), resolved from Keras' identifiers."""
    layer.activation = activations.get(activation)
    layer.use_bias = use_bias
    layer.kernel_initializer = initializers.get(kernel_initializer)
    layer.bias_initializer = initializers.get(bias_initializer)
    layer.kernel_regularizer = regularizers.get(kernel_regularizer)
    layer.bias_regularizer = regularizers.get(bias_regularizer)
    layer.kernel_constraint = constraints.get(kernel_constraint)
    layer.bias_constraint = constraints.get(bias_constraint)


class Dense(Layer):
    """``activation(inputs @ kernel + bias)``; ``kernel`` is [input_dim, units] as Keras stores it."""

    def __init__(self, units: int, activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.units = int(units)
        set_kernel_options(self, activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                           bias_regularizer, kernel_constraint, bias_constraint)
        self.supports_masking = True

    def build(self, input_shape):
        if input_shape[-1] is None:
            raise ValueError(f"The last dimension of the inputs to `Dense` should be defined. Found `None` "
                             f"(layer {self.name}, input shape {input_shape}).")
        self.kernel = self.add_weight("kernel", (input_shape[-1], self.units), initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight("bias", (self.units,), initializer=self.bias_initializer,
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def call(self, inputs):
        if len(K.int_shape(inputs)) == 2:
            y = tf.matmul(inputs, self.kernel)
        else:
            y = tf.tensordot(inputs, self.kernel, [[len(K.int_shape(inputs)) - 1], [0]])
        if self.use_bias:
            y = tf.nn.bias_add(y, self.bias)
        return self.activation(y)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)


class Activation(Layer):
    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = activations.get(activation)
        self.supports_masking = True

    def call(self, inputs):
        return self.activation(inputs)


class Dropout(Layer):
    """Drops a fraction ``rate`` of the inputs while training (the learning phase, or ``training=``)."""

    def __init__(self, rate: float, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = min(1.0, max(0.0, float(rate)))
        self.noise_shape, self.seed = noise_shape, seed
        self.supports_masking = True

    def _noise_shape(self, inputs):
        if self.noise_shape is None:
            return None
        dynamic = tf.shape(inputs)
        return tf.stack([dynamic[i] if d is None else d for i, d in enumerate(self.noise_shape)])

    def call(self, inputs, training=None):
        if not 0.0 < self.rate < 1.0:
            return inputs
        return K.in_train_phase(lambda: K.dropout(inputs, self.rate, self._noise_shape(inputs), self.seed), inputs,
                                training=training)


class SpatialDropout1D(Dropout):
    def __init__(self, rate: float, **kwargs):
        super().__init__(rate, **kwargs)

    def _noise_shape(self, inputs):
        s = tf.shape(inputs)
        return tf.stack([s[0], 1, s[2]])


class SpatialDropout2D(Dropout):
    def __init__(self, rate: float, data_format=None, **kwargs):
        super().__init__(rate, **kwargs)
        self.data_format = data_format

    def _noise_shape(self, inputs):
        s = tf.shape(inputs)
        return tf.stack([s[0], 1, 1, s[3]])


class SpatialDropout3D(Dropout):
    def __init__(self, rate: float, data_format=None, **kwargs):
        super().__init__(rate, **kwargs)
        self.data_format = data_format

    def _noise_shape(self, inputs):
        s = tf.shape(inputs)
        return tf.stack([s[0], 1, 1, 1, s[4]])


class Flatten(Layer):
    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format

    def call(self, inputs):
        if self.data_format == "channels_first":
            inputs = tf.transpose(inputs, [0] + list(range(2, len(K.int_shape(inputs)))) + [1])
        return K.batch_flatten(inputs)


class Reshape(Layer):
    """Reshape to ``(batch,) + target_shape``; one entry of ``target_shape`` may be -1."""

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(target_shape)

    def call(self, inputs):
        return tf.reshape(inputs, (-1,) + self.target_shape) if -1 not in self.target_shape else \
            tf.reshape(inputs, tf.concat([tf.shape(inputs)[:1], tf.constant(np.asarray(self.target_shape,
                                                                                      np.int32))], 0))


class Permute(Layer):
    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        self.dims = tuple(dims)

    def call(self, inputs):
        return tf.transpose(inputs, (0,) + self.dims)


class RepeatVector(Layer):
    def __init__(self, n: int, **kwargs):
        super().__init__(**kwargs)
        self.n = int(n)

    def call(self, inputs):
        return K.repeat(inputs, self.n)


class Lambda(Layer):
    """Wraps ``function(inputs, **arguments)``. Serialized by the function's name only: flowstack never
    pickles code, so loading needs ``custom_objects={name: function}``."""

    def __init__(self, function, output_shape=None, mask=None, arguments=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(function, str):
            found = custom_objects().get(function)
            if found is None:
                raise ValueError(f"Lambda: unknown function {function!r}; pass it in custom_objects when loading "
                                 "(flowstack never pickles code)")
            function = found
        self.function = function
        self.output_shape_spec = output_shape
        self.arguments = arguments or {}
        self.mask = mask

    def call(self, inputs, mask=None):
        return self.function(inputs, **self.arguments)

    def compute_mask(self, inputs, mask=None):
        return self.mask(inputs, mask) if callable(self.mask) else self.mask

    def get_config(self) -> dict:
        name = getattr(self.function, "__name__", "<lambda>")
        if name == "<lambda>":
            raise ValueError(f"Lambda layer {self.name!r} wraps an anonymous function, which cannot be saved: "
                             "flowstack never pickles code; use a named function and custom_objects")
        return {"name": self.name, "trainable": self.trainable, "function": name, "arguments": self.arguments}


class Masking(Layer):
    """Masks timesteps whose features all equal ``mask_value`` (and zeroes them)."""

    def __init__(self, mask_value: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.mask_value = mask_value
        self.supports_masking = True

    def compute_mask(self, inputs, mask=None):
        return tf.reduce_any(tf.not_equal(inputs, self.mask_value), axis=-1)

    def call(self, inputs):
        keep = tf.reduce_any(tf.not_equal(inputs, self.mask_value), axis=-1, keepdims=True)
        return inputs * tf.cast(keep, inputs.dtype)


class ActivityRegularization(Layer):
    def __init__(self, l1: float = 0.0, l2: float = 0.0, **kwargs):
        super().__init__(activity_regularizer=regularizers.L1L2(l1=l1, l2=l2), **kwargs)
        self.l1, self.l2 = l1, l2
        self.supports_masking = True
