"""``ConvLSTM2D``: an LSTM whose input and recurrent transforms are convolutions, over a
[batch, time, rows, cols, channels] input. Weights as Keras stores them: kernel [kh, kw, in, 4f],
recurrent_kernel [kh, kw, f, 4f], bias [4f], gates i, f, c, o; the recurrent convolution is "same"."""

from __future__ import annotations

import trainer as tf
from trainer.keras import activations, backend as K, constraints, initializers, regularizers
from trainer.keras.layers.conv import check_channels_last, check_padding, normalize_tuple
from trainer.keras.layers.recurrent import RNN, AbstractRNNCell

__all__ = ["ConvLSTM2D", "ConvLSTM2DCell"]


class ConvLSTM2DCell(AbstractRNNCell):
    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid", data_format=None,
                 dilation_rate=(1, 1), activation="tanh", recurrent_activation="hard_sigmoid", use_bias: bool = True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias: bool = True, kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 dropout: float = 0.0, recurrent_dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        check_channels_last("ConvLSTM2D", data_format)
        for argument, value in (("dropout", dropout), ("recurrent_dropout", recurrent_dropout)):
            if value:
                raise NotImplementedError(f"ConvLSTM2D({argument}={value}) is not built in flowstack")
        self.filters = int(filters)
        self.kernel_size = normalize_tuple(kernel_size, 2, "kernel_size")
        self.strides = normalize_tuple(strides, 2, "strides")
        self.padding = check_padding("ConvLSTM2D", padding)
        self.dilation_rate = normalize_tuple(dilation_rate, 2, "dilation_rate")
        self.data_format = data_format
        self.activation = activations.get(activation)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.use_bias, self.unit_forget_bias = use_bias, unit_forget_bias
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.dropout, self.recurrent_dropout = dropout, recurrent_dropout

    @property
    def state_size(self) -> list[int]:
        return [self.filters, self.filters]

    @property
    def output_size(self) -> int:
        return self.filters

    def build(self, input_shape):
        channels, f = input_shape[-1], self.filters
        self.kernel = self.add_weight("kernel", self.kernel_size + (channels, 4 * f),
                                      initializer=self.kernel_initializer, regularizer=self.kernel_regularizer,
                                      constraint=self.kernel_constraint)
        self.recurrent_kernel = self.add_weight("recurrent_kernel", self.kernel_size + (f, 4 * f),
                                                initializer=self.recurrent_initializer,
                                                regularizer=self.recurrent_regularizer,
                                                constraint=self.recurrent_constraint)
        if self.use_bias:
            base = self.bias_initializer

            def bias_values(shape, dtype=None):
                if not self.unit_forget_bias:
                    return base(shape, dtype=dtype)
                return tf.concat([base((f,), dtype=dtype), tf.ones((f,), dtype=dtype), base((2 * f,), dtype=dtype)], 0)
            self.bias = self.add_weight("bias", (4 * f,), initializer=bias_values, regularizer=self.bias_regularizer,
                                        constraint=self.bias_constraint)
        else:
            self.bias = None
        self.built = True

    def zero_states(self, inputs) -> list:
        """Zeros of the input convolution's output shape [batch, rows', cols', filters] (Keras' trick)."""
        first = tf.zeros_like(inputs[:, 0])
        kernel = tf.zeros(self.kernel_size + (K.int_shape(inputs)[-1], self.filters), dtype=inputs.dtype)
        zeros = K.conv2d(first, kernel, self.strides, self.padding, dilation_rate=self.dilation_rate)
        return [zeros, zeros]

    def call(self, inputs, states):
        h_prev, c_prev = states
        f = self.filters
        x = K.conv2d(inputs, self.kernel, self.strides, self.padding, dilation_rate=self.dilation_rate)
        if self.use_bias:
            x = tf.nn.bias_add(x, self.bias)
        z = x + K.conv2d(h_prev, self.recurrent_kernel, (1, 1), "same")
        i = self.recurrent_activation(z[..., :f])
        forget = self.recurrent_activation(z[..., f:2 * f])
        c = forget * c_prev + i * self.activation(z[..., 2 * f:3 * f])
        h = self.recurrent_activation(z[..., 3 * f:]) * self.activation(c)
        return h, [h, c]


class ConvLSTM2D(RNN):
    def __init__(self, filters: int, kernel_size, strides=(1, 1), padding: str = "valid", data_format=None,
                 dilation_rate=(1, 1), activation="tanh", recurrent_activation="hard_sigmoid", use_bias: bool = True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias: bool = True, kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, return_sequences: bool = False, go_backwards: bool = False,
                 stateful: bool = False, dropout: float = 0.0, recurrent_dropout: float = 0.0, **kwargs):
        cell = ConvLSTM2DCell(filters, kernel_size, strides, padding, data_format, dilation_rate, activation,
                              recurrent_activation, use_bias, kernel_initializer, recurrent_initializer,
                              bias_initializer, unit_forget_bias, kernel_regularizer, recurrent_regularizer,
                              bias_regularizer, kernel_constraint, recurrent_constraint, bias_constraint, dropout,
                              recurrent_dropout, name="conv_lstm2d_cell")
        super().__init__(cell, return_sequences, False, go_backwards, stateful,
                         activity_regularizer=activity_regularizer, **kwargs)

    def build(self, input_shape):
        with tf.name_scope(self.cell.name):
            self.cell.build((input_shape[0],) + tuple(input_shape[2:]))  # one timestep: [batch, rows, cols, ch]
            self.cell.built = True
        self.built = True


for _name in ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "activation",
              "recurrent_activation", "use_bias", "kernel_initializer", "recurrent_initializer", "bias_initializer",
              "unit_forget_bias", "kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
              "kernel_constraint", "recurrent_constraint", "bias_constraint", "dropout", "recurrent_dropout"):
    setattr(ConvLSTM2D, _name, property(lambda self, n=_name: getattr(self.cell, n)))
