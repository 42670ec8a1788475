"""Locally connected layers: a convolution whose filters differ at every output position (no weight
sharing). Kernels as Keras stores them (implementation=1): LocallyConnected1D
[output_length, kernel_size * channels, filters], LocallyConnected2D [out_rows * out_cols,
kh * kw * channels, filters]; bias [output positions..., filters]."""

from __future__ import annotations

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.engine.base_layer import Layer
from trainer.keras.layers.core import set_kernel_options
from trainer.keras.layers.conv import check_channels_last, normalize_tuple

__all__ = ["LocallyConnected1D", "LocallyConnected2D"]


class LocallyConnected(Layer):
    rank = 1

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "valid", data_format=None,
                 activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, implementation: int = 1, **kwargs):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        name = type(self).__name__
        check_channels_last(name, data_format)
        if padding != "valid":
            raise ValueError(f'Invalid border mode for {name} (only "valid" is supported): {padding!r}')
        if implementation != 1:
            raise NotImplementedError(f"{name}(implementation={implementation}) is not built in flowstack")
        self.filters = int(filters)
        self.kernel_size = normalize_tuple(kernel_size, self.rank, "kernel_size")
        self.strides = normalize_tuple(strides, self.rank, "strides")
        self.padding, self.data_format, self.implementation = padding, data_format, implementation
        set_kernel_options(self, activation, use_bias, kernel_initializer, bias_initializer, kernel_regularizer,
                           bias_regularizer, kernel_constraint, bias_constraint)

    def build(self, input_shape):
        spatial, channels = input_shape[1:-1], input_shape[-1]
        if None in spatial or channels is None:
            raise ValueError(f"{type(self).__name__} {self.name!r} needs fully known input dimensions, got "
                             f"{input_shape}")
        self.output_positions = tuple((n - k) // s + 1 for n, k, s in zip(spatial, self.kernel_size, self.strides))
        count = 1
        for p in self.output_positions:
            count *= p
        patch = channels
        for k in self.kernel_size:
            patch *= k
        self.kernel = self.add_weight("kernel", (count, patch, self.filters), initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.bias = self.add_weight("bias", self.output_positions + (self.filters,),
                                    initializer=self.bias_initializer, regularizer=self.bias_regularizer,
                                    constraint=self.bias_constraint) if self.use_bias else None
        self.built = True

    def patches(self, inputs) -> list:
        """One flattened [batch, patch] input window per output position, in row-major order."""
        raise NotImplementedError

    def call(self, inputs):
        windows = tf.stack(self.patches(inputs), axis=0)  # [positions, batch, patch]
        y = tf.matmul(windows, self.kernel)  # [positions, batch, filters]
        y = tf.reshape(tf.transpose(y, [1, 0, 2]), (-1,) + self.output_positions + (self.filters,))
        if self.use_bias:
            y = y + self.bias
        return self.activation(y)


class LocallyConnected1D(LocallyConnected):
    rank = 1

    def patches(self, inputs) -> list:
        (k,), (s,) = self.kernel_size, self.strides
        return [K.batch_flatten(inputs[:, i * s:i * s + k, :]) for i in range(self.output_positions[0])]


class LocallyConnected2D(LocallyConnected):
    rank = 2

    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid", data_format=None,
                 activation=None, use_bias: bool = True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, implementation: int = 1, **kwargs):
        super().__init__(filters, kernel_size, strides, padding, data_format, activation, use_bias,
                         kernel_initializer, bias_initializer, kernel_regularizer, bias_regularizer,
                         activity_regularizer, kernel_constraint, bias_constraint, implementation, **kwargs)

    def patches(self, inputs) -> list:
        (kh, kw), (sh, sw) = self.kernel_size, self.strides
        rows, cols = self.output_positions
        return [K.batch_flatten(inputs[:, i * sh:i * sh + kh, j * sw:j * sw + kw, :])
                for i in range(rows) for j in range(cols)]
