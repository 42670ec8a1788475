"""``CuDNNLSTM`` and ``CuDNNGRU`` with their weight layouts, computed without a GPU: CuDNN keeps an input
and a recurrent bias (LSTM bias [8u], GRU bias [6u]), uses sigmoid gates, and applies the GRU's reset
gate after the recurrent matmul. A TF1 script trained on a GPU loads and runs its weights here."""

from __future__ import annotations

import trainer as tf
from trainer.keras.layers.recurrent import GRUCell, LSTMCell, RNN

__all__ = ["CuDNNGRU", "CuDNNLSTM"]


class CuDNNLSTMCell(LSTMCell):
    def bias_shape(self) -> tuple:
        return (8 * self.units,)

    def bias_initial_value(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        base, units = self.bias_initializer, self.units

        def forget_ones(shape, dtype=None):  # the input bias's forget gate starts at one, as Keras' CuDNNLSTM
            return tf.concat([base((units,), dtype=dtype), tf.ones((units,), dtype=dtype),
                              base((6 * units,), dtype=dtype)], 0)
        return forget_ones

    def call(self, x, states):
        u4 = 4 * self.units
        bias = self.bias[:u4] + self.bias[u4:]
        h_prev, c_prev = states
        z = tf.matmul(x, self.kernel) + tf.matmul(h_prev, self.recurrent_kernel) + bias
        s = self.gate_slices
        i, f = tf.sigmoid(s(z, 0)), tf.sigmoid(s(z, 1))
        c = f * c_prev + i * tf.tanh(s(z, 2))
        h = tf.sigmoid(s(z, 3)) * tf.tanh(c)
        return h, [h, c]


class CuDNNGRUCell(GRUCell):
    def bias_shape(self) -> tuple:
        return (6 * self.units,)

    def call(self, x, states):
        h_prev = states[0]
        n3 = 3 * self.units
        xw = tf.matmul(x, self.kernel) + self.bias[:n3]
        hu = tf.matmul(h_prev, self.recurrent_kernel) + self.bias[n3:]
        s = self.gate_slices
        z = tf.sigmoid(s(xw, 0) + s(hu, 0))
        r = tf.sigmoid(s(xw, 1) + s(hu, 1))
        hh = tf.tanh(s(xw, 2) + r * s(hu, 2))
        h = z * h_prev + (1.0 - z) * hh
        return h, [h]


class CuDNNLSTM(RNN):
    def __init__(self, units: int, kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", unit_forget_bias: bool = True, kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, return_sequences: bool = False,
                 return_state: bool = False, go_backwards: bool = False, stateful: bool = False, **kwargs):
        cell = CuDNNLSTMCell(units, "tanh", "sigmoid", True, kernel_initializer, recurrent_initializer,
                             bias_initializer, unit_forget_bias, kernel_regularizer, recurrent_regularizer,
                             bias_regularizer, kernel_constraint, recurrent_constraint, bias_constraint,
                             name="cudnn_lstm_cell")
        super().__init__(cell, return_sequences, return_state, go_backwards, stateful,
                         activity_regularizer=activity_regularizer, **kwargs)


class CuDNNGRU(RNN):
    def __init__(self, units: int, kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 return_sequences: bool = False, return_state: bool = False, go_backwards: bool = False,
                 stateful: bool = False, **kwargs):
        cell = CuDNNGRUCell(units, "tanh", "sigmoid", True, kernel_initializer, recurrent_initializer,
                            bias_initializer, kernel_regularizer, recurrent_regularizer, bias_regularizer,
                            kernel_constraint, recurrent_constraint, bias_constraint, name="cudnn_gru_cell")
        super().__init__(cell, return_sequences, return_state, go_backwards, stateful,
                         activity_regularizer=activity_regularizer, **kwargs)


for _layer in (CuDNNLSTM, CuDNNGRU):
    for _name in ("units", "kernel_initializer", "recurrent_initializer", "bias_initializer", "unit_forget_bias",
                  "kernel_regularizer", "recurrent_regularizer", "bias_regularizer", "kernel_constraint",
                  "recurrent_constraint", "bias_constraint"):
        setattr(_layer, _name, property(lambda self, n=_name: getattr(self.cell, n)))
