"""Recurrent layers: ``SimpleRNN``, ``GRU``, ``LSTM`` (and their cells, and the generic ``RNN``),
unrolled over a known number of timesteps, looped (``K.rnn``) over an unknown one. Weights are laid out as Keras stores them, so
``set_weights`` with a Keras model's arrays gives the same outputs:

- LSTM: kernel [in, 4u], recurrent_kernel [u, 4u], bias [4u], gates in the order i, f, c, o;
- GRU (reset_after=False, TF 1.15's default): kernel [in, 3u], recurrent_kernel [u, 3u], bias [3u],
  gates z, r, h; reset_after=True: bias [2, 3u] and the reset gate applied after the recurrent matmul;
- SimpleRNN: kernel [in, u], recurrent_kernel [u, u], bias [u].

A mask (``Embedding(mask_zero=True)``, ``Masking``) holds the state and repeats the last output at
masked steps, as Keras does. ``dropout`` and ``recurrent_dropout`` draw one mask for the inputs and one
for the recurrent state per sequence, used at every timestep while training (Keras' implementation 2;
its implementation 1 draws one per gate, the same in distribution). ``stateful`` is not built.
"""

from __future__ import annotations

import trainer as tf
from trainer.keras import activations, backend as K, constraints, initializers, regularizers
from trainer.keras.engine.base_layer import Layer

__all__ = ["AbstractRNNCell", "GRU", "GRUCell", "LSTM", "LSTMCell", "RNN", "SimpleRNN", "SimpleRNNCell",
           "StackedRNNCells", "state_sizes"]


def state_sizes(cell) -> list[int]:
    """A cell's ``state_size`` as a list (a Keras cell may give one int)."""
    size = cell.state_size
    return list(size) if isinstance(size, (list, tuple)) else [size]


def output_width(cell) -> int:
    """A cell's output width: its ``output_size``, else its first state's (Keras' rule)."""
    size = getattr(cell, "output_size", None)
    return size if size is not None else state_sizes(cell)[0]


class AbstractRNNCell(Layer):
    """The base of a user's cell: ``call(inputs, states) -> (output, new_states)`` for one timestep, with
    ``state_size`` (an int or a list) and ``output_size``; weights made in ``build((batch, input_dim))``."""

    @property
    def state_size(self):
        raise NotImplementedError(f"{type(self).__name__} must define state_size")

    @property
    def output_size(self):
        raise NotImplementedError(f"{type(self).__name__} must define output_size")


class RecurrentCell(AbstractRNNCell):
    """Keras' cells: ``call(x_t, states) -> (output, new_states)``; ``state_size`` lists the state widths."""

    gates = 1

    def __init__(self, units: int, activation="tanh", recurrent_activation="hard_sigmoid", use_bias: bool = True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout: float = 0.0,
                 recurrent_dropout: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        for argument, value in (("dropout", dropout), ("recurrent_dropout", recurrent_dropout)):
            if not 0.0 <= float(value) < 1.0:
                raise ValueError(f"{type(self).__name__}({argument}={value}): a rate in [0, 1)")
        self.units = int(units)
        self.activation = activations.get(activation)
        self.recurrent_activation = activations.get(recurrent_activation)
        self.use_bias = use_bias
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.dropout, self.recurrent_dropout = float(dropout), float(recurrent_dropout)
        # Set by the RNN layer for one pass over a sequence: the same masks at every timestep.
        self.input_mask = self.recurrent_mask = None

    def set_dropout_masks(self, step_input, state, training) -> None:
        """Draw this pass's dropout masks (one for the inputs, one for the recurrent state), kept for
        every timestep as Keras keeps them; outside training they are ones (no dropout)."""
        def mask(like, rate):
            if not rate:
                return None
            ones = tf.ones_like(like)
            return K.in_train_phase(lambda: K.dropout(ones, rate), ones, training=training)
        self.input_mask, self.recurrent_mask = mask(step_input, self.dropout), mask(state, self.recurrent_dropout)

    def clear_dropout_masks(self) -> None:
        self.input_mask = self.recurrent_mask = None

    def dropped(self, x, states: list):
        """(``x`` under the input mask, the first state under the recurrent mask) for the products."""
        x = x if self.input_mask is None else x * self.input_mask
        h = states[0] if self.recurrent_mask is None else states[0] * self.recurrent_mask
        return x, h

    @property
    def state_size(self) -> list[int]:
        return [self.units]

    @property
    def output_size(self) -> int:
        return self.units

    def bias_shape(self) -> tuple:
        return (self.gates * self.units,)

    def bias_initial_value(self):
        return self.bias_initializer

    def build(self, input_shape):
        width = self.gates * self.units
        self.kernel = self.add_weight("kernel", (input_shape[-1], width), initializer=self.kernel_initializer,
                                      regularizer=self.kernel_regularizer, constraint=self.kernel_constraint)
        self.recurrent_kernel = self.add_weight("recurrent_kernel", (self.units, width),
                                                initializer=self.recurrent_initializer,
                                                regularizer=self.recurrent_regularizer,
                                                constraint=self.recurrent_constraint)
        self.bias = self.add_weight("bias", self.bias_shape(), initializer=self.bias_initial_value(),
                                    regularizer=self.bias_regularizer, constraint=self.bias_constraint) \
            if self.use_bias else None
        self.built = True

    def gate_slices(self, m, k: int):
        """Columns ``[k*u, (k+1)*u)`` of ``m`` (a [.., gates*u] tensor)."""
        u = self.units
        return m[:, k * u:(k + 1) * u]


class SimpleRNNCell(RecurrentCell):
    def __init__(self, units: int, activation="tanh", use_bias: bool = True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout: float = 0.0,
                 recurrent_dropout: float = 0.0, **kwargs):
        super().__init__(units, activation, None, use_bias, kernel_initializer, recurrent_initializer,
                         bias_initializer, kernel_regularizer, recurrent_regularizer, bias_regularizer,
                         kernel_constraint, recurrent_constraint, bias_constraint, dropout, recurrent_dropout, **kwargs)

    def call(self, x, states):
        x, h_prev = self.dropped(x, states)
        h = tf.matmul(x, self.kernel)
        if self.use_bias:
            h = h + self.bias
        out = self.activation(h + tf.matmul(h_prev, self.recurrent_kernel))
        return out, [out]


class GRUCell(RecurrentCell):
    gates = 3

    def __init__(self, units: int, activation="tanh", recurrent_activation="hard_sigmoid", use_bias: bool = True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout: float = 0.0,
                 recurrent_dropout: float = 0.0, implementation: int = 1, reset_after: bool = False, **kwargs):
        super().__init__(units, activation, recurrent_activation, use_bias, kernel_initializer,
                         recurrent_initializer, bias_initializer, kernel_regularizer, recurrent_regularizer,
                         bias_regularizer, kernel_constraint, recurrent_constraint, bias_constraint, dropout,
                         recurrent_dropout, **kwargs)
        self.implementation, self.reset_after = implementation, reset_after

    def bias_shape(self) -> tuple:
        return (2, 3 * self.units) if self.reset_after else (3 * self.units,)

    def call(self, x, states):
        h_prev = states[0]
        x, h_used = self.dropped(x, states)  # the products read the dropped state; the update keeps h_prev
        s = self.gate_slices
        xw = tf.matmul(x, self.kernel)
        if self.use_bias:
            input_bias = self.bias[0] if self.reset_after else self.bias
            xw = xw + input_bias
        u = self.recurrent_kernel
        if self.reset_after:  # r applied to (h @ U_h + b_rh)
            hu = tf.matmul(h_used, u)
            if self.use_bias:
                hu = hu + self.bias[1]
            z = self.recurrent_activation(s(xw, 0) + s(hu, 0))
            r = self.recurrent_activation(s(xw, 1) + s(hu, 1))
            hh = self.activation(s(xw, 2) + r * s(hu, 2))
        else:
            n = self.units
            z = self.recurrent_activation(s(xw, 0) + tf.matmul(h_used, u[:, :n]))
            r = self.recurrent_activation(s(xw, 1) + tf.matmul(h_used, u[:, n:2 * n]))
            hh = self.activation(s(xw, 2) + tf.matmul(r * h_used, u[:, 2 * n:]))
        h = z * h_prev + (1.0 - z) * hh
        return h, [h]


class LSTMCell(RecurrentCell):
    gates = 4

    def __init__(self, units: int, activation="tanh", recurrent_activation="hard_sigmoid", use_bias: bool = True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias: bool = True, kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, kernel_constraint=None, recurrent_constraint=None, bias_constraint=None,
                 dropout: float = 0.0, recurrent_dropout: float = 0.0, implementation: int = 1, **kwargs):
        super().__init__(units, activation, recurrent_activation, use_bias, kernel_initializer,
                         recurrent_initializer, bias_initializer, kernel_regularizer, recurrent_regularizer,
                         bias_regularizer, kernel_constraint, recurrent_constraint, bias_constraint, dropout,
                         recurrent_dropout, **kwargs)
        self.unit_forget_bias, self.implementation = unit_forget_bias, implementation

    @property
    def state_size(self) -> list[int]:
        return [self.units, self.units]

    def bias_initial_value(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        base, units = self.bias_initializer, self.units

        def forget_ones(shape, dtype=None):  # the forget gate's bias starts at one (Jozefowicz et al.)
            b = base((units,), dtype=dtype)
            return tf.concat([b, tf.ones((units,), dtype=dtype), base((2 * units,), dtype=dtype)], 0)
        return forget_ones

    def call(self, x, states):
        _, c_prev = states
        x, h_prev = self.dropped(x, states)
        z = tf.matmul(x, self.kernel) + tf.matmul(h_prev, self.recurrent_kernel)
        if self.use_bias:
            z = z + self.bias
        s = self.gate_slices
        i = self.recurrent_activation(s(z, 0))
        f = self.recurrent_activation(s(z, 1))
        c = f * c_prev + i * self.activation(s(z, 2))
        o = self.recurrent_activation(s(z, 3))
        h = o * self.activation(c)
        return h, [h, c]


class StackedRNNCells(Layer):
    """Cells applied in turn at each step; the state is every cell's state, in order."""

    def __init__(self, cells, **kwargs):
        super().__init__(**kwargs)
        self.cells = list(cells)

    @property
    def state_size(self) -> list[int]:
        return [s for cell in self.cells for s in state_sizes(cell)]

    @property
    def output_size(self) -> int:
        return output_width(self.cells[-1])

    def build(self, input_shape):
        width = input_shape[-1]
        for cell in self.cells:
            with tf.name_scope(cell.name):
                cell.build((None, width))
                cell.built = True
            width = output_width(cell)
        self.built = True

    def call(self, x, states):
        new_states, at = [], 0
        for cell in self.cells:
            n = len(state_sizes(cell))
            x, cell_states = cell.call(x, states[at:at + n])
            new_states += list(cell_states) if isinstance(cell_states, (list, tuple)) else [cell_states]
            at += n
        return x, new_states

    @property
    def trainable_weights(self) -> list:
        return [w for c in self.cells for w in c.trainable_weights] if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        own = [w for c in self.cells for w in c.non_trainable_weights]
        return own if self.trainable else [w for c in self.cells for w in c.weights]


class RNN(Layer):
    """Runs ``cell`` over the time axis of a [batch, time, features] input: unrolled when the number of
    timesteps is known, a while_loop when it is not (``K.rnn``)."""

    def __init__(self, cell, return_sequences: bool = False, return_state: bool = False, go_backwards: bool = False,
                 stateful: bool = False, unroll: bool = False, time_major: bool = False, **kwargs):
        if stateful:
            raise NotImplementedError(f"{type(self).__name__}(stateful=True) is not built in flowstack")
        if time_major:
            raise NotImplementedError(f"{type(self).__name__}(time_major=True) is not built in flowstack")
        super().__init__(**kwargs)
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        self.cell = cell
        self.return_sequences, self.return_state, self.go_backwards = return_sequences, return_state, go_backwards
        self.stateful, self.unroll, self.time_major = stateful, unroll, time_major
        self.supports_masking = True

    def __call__(self, inputs, initial_state=None, constants=None, **kwargs):
        """Initial states given as an argument become inputs of the layer's node (as Keras folds them),
        so the layers computing them (an encoder) belong to the model."""
        if constants is not None:
            raise NotImplementedError(f"{type(self).__name__}(..., constants=...) is not built in flowstack")
        if initial_state is None:
            return super().__call__(inputs, **kwargs)
        states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
        return super().__call__([inputs] + states, **kwargs)

    def build(self, input_shape):
        if isinstance(input_shape, list) and input_shape and isinstance(input_shape[0], (list, tuple)):
            input_shape = input_shape[0]  # the sequence's shape; the rest are initial states'
        with tf.name_scope(self.cell.name):
            self.cell.build((input_shape[0], input_shape[-1]))  # a cell sees one timestep
            self.cell.built = True
        self.built = True

    @property
    def trainable_weights(self) -> list:
        return self.cell.trainable_weights if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        return self.cell.non_trainable_weights if self.trainable else self.cell.weights

    @property
    def losses(self) -> list:
        return self.cell.losses + list(self._losses)

    def call(self, inputs, mask=None, training=None, initial_state=None):
        if isinstance(inputs, (list, tuple)):  # [sequence, *initial states], folded by __call__
            inputs, initial_state = inputs[0], list(inputs[1:])
            mask = mask[0] if isinstance(mask, (list, tuple)) else mask
        if initial_state is not None:
            states = list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
        elif hasattr(self.cell, "zero_states"):  # a cell whose states are not [batch, size] (ConvLSTM2D)
            states = self.cell.zero_states(inputs)
        else:
            batch = tf.shape(inputs)[0]
            states = [tf.zeros(tf.stack([batch, size]), dtype=inputs.dtype) for size in state_sizes(self.cell)]
        dropping = [c for c in getattr(self.cell, "cells", [self.cell])
                    if isinstance(c, RecurrentCell) and (c.dropout or c.recurrent_dropout)]
        if dropping and dropping != [self.cell]:
            raise NotImplementedError(f"{type(self).__name__} {self.name!r}: dropout inside stacked cells is not built "
                                      "in flowstack; give each recurrent layer its own dropout")
        if dropping:
            self.cell.set_dropout_masks(inputs[:, 0], states[0], training)
        try:
            output, outputs, states = K.rnn(self.cell.call, inputs, states, go_backwards=self.go_backwards, mask=mask)
        finally:
            if dropping:
                self.cell.clear_dropout_masks()
        result = outputs if self.return_sequences else output
        if self.return_state:
            return [result] + list(states)
        return result

    def compute_mask(self, inputs, mask=None):
        mask = mask[0] if isinstance(mask, list) else mask
        out_mask = mask if self.return_sequences else None
        if self.return_state:
            return [out_mask] + [None] * len(state_sizes(self.cell))
        return out_mask

    def get_config(self) -> dict:
        config = super().get_config()
        if type(self) is RNN:
            from trainer.keras.serialization import to_json_value

            config["cell"] = to_json_value(self.cell)
        return config

    @classmethod
    def from_config(cls, config: dict):
        if cls is RNN and isinstance(config.get("cell"), dict):
            from trainer.keras.layers import deserialize

            config = {**config, "cell": deserialize(config["cell"])}
        return cls(**config)


def _cell_property(name: str):
    return property(lambda self: getattr(self.cell, name))


class SimpleRNN(RNN):
    cell_class = SimpleRNNCell

    def __init__(self, units: int, activation="tanh", use_bias: bool = True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros", kernel_regularizer=None,
                 recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, recurrent_constraint=None, bias_constraint=None, dropout: float = 0.0,
                 recurrent_dropout: float = 0.0, return_sequences: bool = False, return_state: bool = False,
                 go_backwards: bool = False, stateful: bool = False, unroll: bool = False, **kwargs):
        cell = SimpleRNNCell(units, activation, use_bias, kernel_initializer, recurrent_initializer,
                             bias_initializer, kernel_regularizer, recurrent_regularizer, bias_regularizer,
                             kernel_constraint, recurrent_constraint, bias_constraint, dropout, recurrent_dropout,
                             name="simple_rnn_cell")
        super().__init__(cell, return_sequences, return_state, go_backwards, stateful, unroll,
                         activity_regularizer=activity_regularizer, **kwargs)


class GRU(RNN):
    def __init__(self, units: int, activation="tanh", recurrent_activation="hard_sigmoid", use_bias: bool = True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, recurrent_constraint=None, bias_constraint=None, dropout: float = 0.0,
                 recurrent_dropout: float = 0.0, implementation: int = 1, return_sequences: bool = False,
                 return_state: bool = False, go_backwards: bool = False, stateful: bool = False, unroll: bool = False,
                 reset_after: bool = False, **kwargs):
        cell = GRUCell(units, activation, recurrent_activation, use_bias, kernel_initializer, recurrent_initializer,
                       bias_initializer, kernel_regularizer, recurrent_regularizer, bias_regularizer,
                       kernel_constraint, recurrent_constraint, bias_constraint, dropout, recurrent_dropout,
                       implementation, reset_after, name="gru_cell")
        super().__init__(cell, return_sequences, return_state, go_backwards, stateful, unroll,
                         activity_regularizer=activity_regularizer, **kwargs)


class LSTM(RNN):
    def __init__(self, units: int, activation="tanh", recurrent_activation="hard_sigmoid", use_bias: bool = True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias: bool = True, kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, recurrent_constraint=None,
                 bias_constraint=None, dropout: float = 0.0, recurrent_dropout: float = 0.0, implementation: int = 1,
                 return_sequences: bool = False, return_state: bool = False, go_backwards: bool = False,
                 stateful: bool = False, unroll: bool = False, **kwargs):
        cell = LSTMCell(units, activation, recurrent_activation, use_bias, kernel_initializer, recurrent_initializer,
                        bias_initializer, unit_forget_bias, kernel_regularizer, recurrent_regularizer,
                        bias_regularizer, kernel_constraint, recurrent_constraint, bias_constraint, dropout,
                        recurrent_dropout, implementation, name="lstm_cell")
        super().__init__(cell, return_sequences, return_state, go_backwards, stateful, unroll,
                         activity_regularizer=activity_regularizer, **kwargs)


# The wrapping layers' config reads the cell's arguments (units, activation, ...) off the layer.
_CELL_ARGUMENTS = ("units", "activation", "recurrent_activation", "use_bias", "kernel_initializer",
                   "recurrent_initializer", "bias_initializer", "unit_forget_bias", "kernel_regularizer",
                   "recurrent_regularizer", "bias_regularizer", "kernel_constraint", "recurrent_constraint",
                   "bias_constraint", "dropout", "recurrent_dropout", "implementation", "reset_after")
for _layer in (SimpleRNN, GRU, LSTM):
    for _name in _CELL_ARGUMENTS:
        setattr(_layer, _name, _cell_property(_name))
