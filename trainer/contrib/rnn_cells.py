"""More of ``tf.contrib.rnn``'s cells, composed from graph ops with TensorFlow 1.15's variable names
(so a TF1 checkpoint's variables line up): ``CoupledInputForgetGateLSTMCell`` (``W_0``, ``B``),
``LayerNormBasicLSTMCell`` (``kernel`` and ``input/gamma``...), ``NASCell``, ``UGRNNCell``,
``IntersectionRNNCell``, and the wrappers ``HighwayWrapper`` (``carry_w``/``carry_b`` in the
scope the wrapper is called in) and ``EmbeddingWrapper`` (``embedding``).

Each cell's scope is its class name in snake case (``rnn/ugrnn_cell/kernel``), as TF's layers name
themselves. Layer normalization is contrib's ``layer_norm`` over the last axis (epsilon 1e-12).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from trainer import initializers, nn
from trainer.array_ops import clip_by_value, split, stack, unstack
from trainer.contrib.fused_rnn import FusedRNNCell
from trainer.graph import Tensor
from trainer.ops import concat, convert_to_tensor, matmul, reshape, sigmoid, tanh
from trainer.rnn_cell import CellWrapper, GRUCell, LSTMBlockCell, LSTMStateTuple, RNNCell
from trainer.variable_scopes import get_variable, variable_scope

__all__ = ["AttentionCellWrapper", "Conv1DLSTMCell", "Conv2DLSTMCell", "Conv3DLSTMCell", "ConvLSTMCell",
           "CoupledInputForgetGateLSTMCell", "EmbeddingWrapper", "GRUBlockCell", "GRUBlockCellV2", "HighwayWrapper",
           "IntersectionRNNCell", "LSTMBlockFusedCell", "LayerNormBasicLSTMCell", "LayerRNNCell", "NASCell",
           "UGRNNCell"]


def _layer_norm(x: Tensor, gamma, beta) -> Tensor:
    mean, variance = nn.moments(x, [1], keep_dims=True)
    return nn.batch_normalization(x, mean, variance, beta, gamma, 1e-12)


def _tuple_state_only(state_is_tuple: bool, cell: str) -> None:
    if not state_is_tuple:
        raise ValueError(f"{cell}: state_is_tuple=False (concatenated states) is not supported")


class _ProjectedLSTMState:
    """``state_size`` and ``output_size`` of an LSTM whose output may be projected to ``num_proj``."""

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self._num_proj or self._num_units)

    @property
    def output_size(self):
        return self._num_proj or self._num_units


class _NormedCell(RNNCell):
    """A cell with layer-norm gains and shifts ``<scope>/gamma`` and ``<scope>/beta``."""

    def _norm_variables(self, scopes, size: int, dtype, gain: float, shift: float) -> dict:
        made = {}
        for scope in scopes:
            with variable_scope(scope):
                made[scope] = (self._variable("gamma", [size], dtype, initializers.Constant(gain)),
                               self._variable("beta", [size], dtype, initializers.Constant(shift)))
        return made

    def _norm(self, x, scope):
        return _layer_norm(x, *self._norms[scope])


class CoupledInputForgetGateLSTMCell(_ProjectedLSTMState, _NormedCell):
    """An LSTM whose input gate is one minus its forget gate (Greff et al.): c = f c' + (1 - f) g,
    optional peepholes (``W_F_diag``, ``W_O_diag``), projection (``W_P_0``) and layer norm."""

    default_name = "coupled_input_forget_gate_lstm_cell"

    def __init__(self, num_units: int, use_peepholes: bool = False, initializer=None, num_proj=None, proj_clip=None,
                 num_unit_shards: int = 1, num_proj_shards: int = 1, forget_bias: float = 1.0,
                 state_is_tuple: bool = True, activation=tanh, reuse=None, layer_norm: bool = False,
                 norm_gain: float = 1.0, norm_shift: float = 0.0):
        _tuple_state_only(state_is_tuple, "CoupledInputForgetGateLSTMCell")
        super().__init__(num_units, activation, reuse)
        self._peepholes, self._initializer = use_peepholes, initializer
        self._num_proj, self._proj_clip = num_proj, proj_clip
        self._shards, self._proj_shards = int(num_unit_shards), int(num_proj_shards)
        self._forget_bias, self._layer_norm = float(forget_bias), layer_norm
        self._gain, self._shift = norm_gain, norm_shift

    def _sharded(self, name: str, shape: list, shards: int, dtype):
        """TF's ``_get_concat_variable``: ``name_0``... row blocks of one matrix (``name_0`` alone for one shard)."""
        if shards > shape[0]:
            raise ValueError(f"Too many shards: shape={shape}, num_shards={shards}")
        base, extra = divmod(shape[0], shards)
        parts = [self._variable(f"{name}_{i}", [base + (1 if i < extra else 0)] + shape[1:], dtype,
                                self._initializer) for i in range(shards)]
        return parts[0] if len(parts) == 1 else concat(parts, axis=0)

    def _make_variables(self, input_depth, dtype):
        n, proj = self._num_units, self._num_proj or self._num_units
        self.kernel = self._sharded("W", [input_depth + proj, 3 * n], self._shards, dtype)
        self.bias = self._variable("B", [3 * n], dtype, initializers.Zeros())
        if self._layer_norm:
            self._norms = self._norm_variables(("transform", "forget", "output", "state"), n, dtype, self._gain,
                                               self._shift)
        if self._peepholes:
            self.w_f_diag = self._variable("W_F_diag", [n], dtype, self._initializer)
            self.w_o_diag = self._variable("W_O_diag", [n], dtype, self._initializer)
        if self._num_proj is not None:
            self.projection = self._sharded("W_P", [n, self._num_proj], self._proj_shards, dtype)

    def call(self, inputs, state):
        c_prev, m_prev = state
        matrix = matmul(concat([inputs, m_prev], axis=1), self.kernel)
        if not self._layer_norm:
            matrix = nn.bias_add(matrix, self.bias)
        j, f, o = split(matrix, 3, axis=1)
        if self._layer_norm:
            j, f, o = self._norm(j, "transform"), self._norm(f, "forget"), self._norm(o, "output")
        forget = f + self._forget_bias + (self.w_f_diag * c_prev if self._peepholes else 0.0)
        f_act = sigmoid(forget)
        c = f_act * c_prev + (1.0 - f_act) * self._activation(j)
        if self._layer_norm:
            c = self._norm(c, "state")
        m = sigmoid(o + self.w_o_diag * c if self._peepholes else o) * self._activation(c)
        if self._num_proj is not None:
            m = matmul(m, self.projection)
            if self._proj_clip is not None:
                m = clip_by_value(m, -self._proj_clip, self._proj_clip)
        return m, LSTMStateTuple(c, m)


class LayerNormBasicLSTMCell(_NormedCell):
    """A basic LSTM with layer norm on each gate's pre-activation and on the new cell state, and
    recurrent dropout on the candidate (``dropout_keep_prob``, Semeniuta et al.)."""

    default_name = "layer_norm_basic_lstm_cell"

    def __init__(self, num_units: int, forget_bias: float = 1.0, input_size=None, activation=tanh,
                 layer_norm: bool = True, norm_gain: float = 1.0, norm_shift: float = 0.0,
                 dropout_keep_prob=1.0, dropout_prob_seed=None, reuse=None):
        super().__init__(num_units, activation, reuse)
        self._forget_bias, self._layer_norm = float(forget_bias), layer_norm
        self._gain, self._shift = norm_gain, norm_shift
        self._keep_prob, self._seed = dropout_keep_prob, dropout_prob_seed

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self._num_units)

    def _make_variables(self, input_depth, dtype):
        n = self._num_units
        self.kernel = self._variable("kernel", [input_depth + n, 4 * n], dtype)
        if self._layer_norm:
            self._norms = self._norm_variables(("input", "transform", "forget", "output", "state"), n, dtype,
                                               self._gain, self._shift)
        else:
            self.bias = self._variable("bias", [4 * n], dtype)

    def call(self, inputs, state):
        c, h = state
        gates = matmul(concat([inputs, h], axis=1), self.kernel)
        if not self._layer_norm:
            gates = nn.bias_add(gates, self.bias)
        i, j, f, o = split(gates, 4, axis=1)
        if self._layer_norm:
            i, j, f, o = (self._norm(t, s) for t, s in zip((i, j, f, o), ("input", "transform", "forget", "output")))
        g = self._activation(j)
        if not isinstance(self._keep_prob, (int, float)) or self._keep_prob < 1:
            g = nn.dropout(g, keep_prob=self._keep_prob, seed=self._seed)
        new_c = c * sigmoid(f + self._forget_bias) + sigmoid(i) * g
        if self._layer_norm:
            new_c = self._norm(new_c, "state")
        new_h = self._activation(new_c) * sigmoid(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class NASCell(_ProjectedLSTMState, RNNCell):
    """The recurrent cell found by Neural Architecture Search (Zoph & Le 2017): eight input and
    eight recurrent projections combined in a fixed tree; optional output projection."""

    default_name = "nas_cell"

    def __init__(self, num_units: int, num_proj=None, use_biases: bool = False, reuse=None):
        super().__init__(num_units, None, reuse)
        self._num_proj, self._use_biases = num_proj, use_biases

    def _make_variables(self, input_depth, dtype):
        n, proj = self._num_units, self._num_proj or self._num_units
        self.recurrent_kernel = self._variable("recurrent_kernel", [proj, 8 * n], dtype)
        self.kernel = self._variable("kernel", [input_depth, 8 * n], dtype)
        if self._use_biases:
            self.bias = self._variable("bias", [8 * n], dtype, initializers.Zeros())
        if self._num_proj is not None:
            self.projection = self._variable("projection_weights", [n, self._num_proj], dtype)

    def call(self, inputs, state):
        c_prev, m_prev = state
        m_matrix = matmul(m_prev, self.recurrent_kernel)
        if self._use_biases:
            m_matrix = nn.bias_add(m_matrix, self.bias)
        m_parts, x_parts = split(m_matrix, 8, axis=1), split(matmul(inputs, self.kernel), 8, axis=1)
        relu = nn.relu
        layer1 = [sigmoid(x_parts[0] + m_parts[0]), relu(x_parts[1] + m_parts[1]),
                  sigmoid(x_parts[2] + m_parts[2]), relu(x_parts[3] * m_parts[3]),
                  tanh(x_parts[4] + m_parts[4]), sigmoid(x_parts[5] + m_parts[5]),
                  tanh(x_parts[6] + m_parts[6]), sigmoid(x_parts[7] + m_parts[7])]
        l2_0 = tanh(tanh(layer1[0] * layer1[1]) + c_prev)
        l2_1 = tanh(layer1[2] + layer1[3])
        l2_2 = tanh(layer1[4] * layer1[5])
        l2_3 = sigmoid(layer1[6] + layer1[7])
        new_c = l2_0 * l2_1
        new_m = tanh(new_c * tanh(l2_2 + l2_3))
        if self._num_proj is not None:
            new_m = matmul(new_m, self.projection)
        return new_m, LSTMStateTuple(new_c, new_m)


class UGRNNCell(RNNCell):
    """Update-gate RNN (Collins et al. 2017): g = sigmoid(Wg [x, h] + b + forget_bias),
    h' = g h + (1 - g) activation(Wc [x, h] + b)."""

    default_name = "ugrnn_cell"

    def __init__(self, num_units: int, initializer=None, forget_bias: float = 1.0, activation=tanh, reuse=None):
        super().__init__(num_units, activation, reuse)
        self._initializer, self._forget_bias = initializer, float(forget_bias)

    def _make_variables(self, input_depth, dtype):
        n = self._num_units
        self.kernel = self._variable("kernel", [input_depth + n, 2 * n], dtype, self._initializer)
        self.bias = self._variable("bias", [2 * n], dtype, initializers.Zeros())

    def call(self, inputs, state):
        matrix = nn.bias_add(matmul(concat([inputs, state], axis=1), self.kernel), self.bias)
        g_act, c_act = split(matrix, 2, axis=1)
        g = sigmoid(g_act + self._forget_bias)
        new_state = g * state + (1.0 - g) * self._activation(c_act)
        return new_state, new_state


class IntersectionRNNCell(RNNCell):
    """The +RNN (Collins et al. 2017): a gated state through time and a gated output through depth
    (``num_in_proj`` projects the first layer's inputs to ``num_units``, ``in_projection/``)."""

    default_name = "intersection_rnn_cell"

    def __init__(self, num_units: int, num_in_proj=None, initializer=None, forget_bias: float = 1.0,
                 y_activation=None, reuse=None):
        super().__init__(num_units, None, reuse)
        self._num_in_proj, self._initializer = num_in_proj, initializer
        self._forget_bias, self._y_activation = float(forget_bias), y_activation or nn.relu

    def _make_variables(self, input_depth, dtype):
        n = self._num_units
        self.in_projection = None
        if input_depth != n:
            if not self._num_in_proj:
                raise ValueError("Must have input size == output size for Intersection RNN. To fix, num_in_proj "
                                 "should be set to num_units at cell init.")
            with variable_scope("in_projection"):
                self.in_projection = (self._variable("kernel", [input_depth, n], dtype, self._initializer),
                                      self._variable("bias", [n], dtype, initializers.Zeros()))
        self.kernel = self._variable("kernel", [2 * n, 4 * n], dtype, self._initializer)
        self.bias = self._variable("bias", [4 * n], dtype, initializers.Zeros())

    def call(self, inputs, state):
        if self.in_projection is not None:
            inputs = nn.bias_add(matmul(inputs, self.in_projection[0]), self.in_projection[1])
        matrix = nn.bias_add(matmul(concat([inputs, state], axis=1), self.kernel), self.bias)
        gh_act, h_act, gy_act, y_act = split(matrix, 4, axis=1)
        gh, gy = sigmoid(gh_act + self._forget_bias), sigmoid(gy_act + self._forget_bias)
        new_state = gh * state + (1.0 - gh) * tanh(h_act)
        new_y = gy * inputs + (1.0 - gy) * self._y_activation(y_act)
        return new_y, new_state


class HighwayWrapper(CellWrapper):
    """``output = inputs * carry + cell_output * transform`` with carry = sigmoid(inputs carry_w +
    carry_b) and transform = 1 - carry (or its own ``transform_w``/``transform_b``); the highway's
    variables sit in the scope the wrapper is called in, as TF's."""

    def __init__(self, cell, couple_carry_transform_gates: bool = True, carry_bias_init: float = 1.0):
        super().__init__(cell)
        self._coupled, self._carry_bias = couple_carry_transform_gates, float(carry_bias_init)

    def build(self, input_depth, dtype=np.float32):
        if self.built:
            return
        self.cell.build(input_depth, dtype)
        if self.cell.output_size != input_depth:
            raise ValueError(f"HighwayWrapper: the cell's output size {self.cell.output_size} must equal its input "
                             f"size {input_depth}")
        dtype = np.dtype(dtype)
        self.variables = list(self.cell.variables)
        self.carry_w = self._variable("carry_w", [input_depth, input_depth], dtype)
        self.carry_b = self._variable("carry_b", [input_depth], dtype, initializers.Constant(self._carry_bias))
        if not self._coupled:
            self.transform_w = self._variable("transform_w", [input_depth, input_depth], dtype)
            self.transform_b = self._variable("transform_b", [input_depth], dtype,
                                              initializers.Constant(-self._carry_bias))
        self.built = True

    def call(self, inputs, state):
        output, new_state = self.cell.call(inputs, state)
        carry = sigmoid(nn.xw_plus_b(inputs, self.carry_w, self.carry_b))
        transform = 1.0 - carry if self._coupled else sigmoid(nn.xw_plus_b(inputs, self.transform_w,
                                                                          self.transform_b))
        return inputs * carry + output * transform, new_state


class AttentionCellWrapper(RNNCell):
    """Bahdanau-style attention over the cell's last ``attn_length`` outputs (TF's LSTMA): the input
    is mixed with the previous attention (``kernel``/``bias``), the cell runs (its own scope
    inside), the concatenated new state queries the window (``attention/attn_w``, ``attn_v``,
    ``kernel``, ``bias``) and the output is projected with the attention read
    (``attn_output_projection/``); the output then joins the window. State: (cell state, attention
    read [batch, attn_size], window [batch, attn_length * attn_size])."""

    default_name = "attention_cell_wrapper"

    def __init__(self, cell, attn_length: int, attn_size=None, attn_vec_size=None, input_size=None,
                 state_is_tuple: bool = True, reuse=None):
        if not isinstance(cell, RNNCell):
            raise TypeError("The parameter cell is not RNNCell.")
        _tuple_state_only(state_is_tuple, "AttentionCellWrapper")
        if attn_length <= 0:
            raise ValueError(f"attn_length should be greater than zero, got {attn_length}")
        super().__init__(0, None, reuse)
        self.cell, self._length = cell, int(attn_length)
        self._attn_size = int(attn_size if attn_size is not None else cell.output_size)
        self._vec_size = int(attn_vec_size if attn_vec_size is not None else self._attn_size)
        self._input_size = input_size

    @property
    def state_size(self):
        return (self.cell.state_size, self._attn_size, self._attn_size * self._length)

    @property
    def output_size(self):
        return self._attn_size

    def _make_variables(self, input_depth, dtype):
        from trainer.rnn_cell import flatten_state

        size, vec = self._attn_size, self._vec_size
        mixed = int(self._input_size or input_depth)
        self.in_kernel = self._variable("kernel", [input_depth + size, mixed], dtype)
        self.in_bias = self._variable("bias", [mixed], dtype, initializers.Zeros())
        self.cell.build(mixed, dtype)
        self.variables += self.cell.variables
        query = sum(int(s) for s in flatten_state(self.cell.state_size))
        with variable_scope("attention"):
            self.attn_w = self._variable("attn_w", [1, 1, size, vec], dtype)
            self.attn_v = self._variable("attn_v", [vec], dtype)
            self.query_kernel = self._variable("kernel", [query, vec], dtype)
            self.query_bias = self._variable("bias", [vec], dtype, initializers.Zeros())
        with variable_scope("attn_output_projection"):
            self.out_kernel = self._variable("kernel", [self.cell.output_size + size, size], dtype)
            self.out_bias = self._variable("bias", [size], dtype, initializers.Zeros())

    def call(self, inputs, state):
        from trainer.array_ops import expand_dims, reduce_sum
        from trainer.rnn_cell import flatten_state

        cell_state, attns, window = state
        window = reshape(window, [-1, self._length, self._attn_size])
        mixed = nn.bias_add(matmul(concat([inputs, attns], axis=1), self.in_kernel), self.in_bias)
        cell_output, new_cell_state = self.cell(mixed, cell_state)
        query = concat(flatten_state(new_cell_state), axis=1)
        features = matmul(reshape(window, [-1, self._attn_size]), reshape(self.attn_w, [self._attn_size,
                                                                                       self._vec_size]))
        features = reshape(features, [-1, self._length, self._vec_size])
        y = nn.bias_add(matmul(query, self.query_kernel), self.query_bias)
        scores = reduce_sum(self.attn_v * tanh(features + expand_dims(y, 1)), axis=[2])
        weights = nn.softmax(scores)
        read = reduce_sum(expand_dims(weights, 2) * window, axis=[1])
        output = nn.bias_add(matmul(concat([cell_output, read], axis=1), self.out_kernel), self.out_bias)
        new_window = reshape(concat([window[:, 1:], expand_dims(output, 1)], axis=1),
                             [-1, self._length * self._attn_size])
        return output, (new_cell_state, read, new_window)


class ConvLSTMCell(RNNCell):
    """A convolutional LSTM (Shi et al. 2015): the gates are SAME convolutions of [inputs, h] with
    ``kernel`` (``kernel_shape`` + [in + out, 4 out]) plus ``biases``; inputs, state and output are
    [batch, *spatial, channels] (``input_shape`` excludes the batch). ``skip_connection`` appends
    the inputs to the output. TF's Conv1D/2D/3DLSTMCell do not pass their name on, so all of them
    make their variables under ``conv_lstm_cell``, as here."""

    default_name = "conv_lstm_cell"

    def __init__(self, conv_ndims: int, input_shape, output_channels: int, kernel_shape, use_bias: bool = True,
                 skip_connection: bool = False, forget_bias: float = 1.0, initializers=None,
                 name: str = "conv_lstm_cell"):
        if conv_ndims != len(input_shape) - 1:
            raise ValueError(f"Invalid input_shape {input_shape} for conv_ndims={conv_ndims}.")
        if len(kernel_shape) != conv_ndims:
            raise ValueError(f"ConvLSTMCell: kernel_shape {kernel_shape} must have {conv_ndims} entries")
        super().__init__(0, None, None, name)
        self._ndims, self._input_shape = conv_ndims, [int(d) for d in input_shape]
        self._out, self._kernel_shape = int(output_channels), [int(k) for k in kernel_shape]
        self._use_bias, self._skip, self._forget_bias = use_bias, skip_connection, float(forget_bias)

    @property
    def state_size(self):
        from trainer.tensor_shape import TensorShape

        shape = TensorShape(self._input_shape[:-1] + [self._out])
        return LSTMStateTuple(shape, shape)

    @property
    def output_size(self):
        from trainer.tensor_shape import TensorShape

        extra = self._input_shape[-1] if self._skip else 0
        return TensorShape(self._input_shape[:-1] + [self._out + extra])

    def zero_state(self, batch_size, dtype=np.float32):
        from trainer.array_ops import zeros

        shape = [batch_size] + self._input_shape[:-1] + [self._out]
        return LSTMStateTuple(zeros(shape, dtype), zeros(shape, dtype))

    def _make_variables(self, input_depth, dtype):
        self.kernel = self._variable("kernel", self._kernel_shape + [input_depth + self._out, 4 * self._out], dtype)
        if self._use_bias:
            self.biases = self._variable("biases", [4 * self._out], dtype, initializers.Zeros())

    def call(self, inputs, state):
        from trainer.nn_conv import convolution

        cell, hidden = state
        gates = convolution(concat([inputs, hidden], axis=self._ndims + 1), self.kernel, "SAME")
        if self._use_bias:
            gates = gates + self.biases
        input_gate, new_input, forget_gate, output_gate = split(gates, 4, axis=self._ndims + 1)
        new_cell = sigmoid(forget_gate + self._forget_bias) * cell + sigmoid(input_gate) * tanh(new_input)
        output = tanh(new_cell) * sigmoid(output_gate)
        new_state = LSTMStateTuple(new_cell, output)
        if self._skip:
            output = concat([output, inputs], axis=-1)
        return output, new_state


class Conv1DLSTMCell(ConvLSTMCell):
    """``ConvLSTMCell`` over [batch, width, channels] steps."""

    def __init__(self, name: str = "conv_1d_lstm_cell", **kwargs):
        super().__init__(conv_ndims=1, **kwargs)


class Conv2DLSTMCell(ConvLSTMCell):
    """``ConvLSTMCell`` over [batch, height, width, channels] steps."""

    def __init__(self, name: str = "conv_2d_lstm_cell", **kwargs):
        super().__init__(conv_ndims=2, **kwargs)


class Conv3DLSTMCell(ConvLSTMCell):
    """``ConvLSTMCell`` over [batch, depth, height, width, channels] steps."""

    def __init__(self, name: str = "conv_3d_lstm_cell", **kwargs):
        super().__init__(conv_ndims=3, **kwargs)


class EmbeddingWrapper(RNNCell):
    """Feeds the cell the embeddings of integer ``inputs`` ([batch] or [batch, 1] ids) from its
    ``embedding`` variable [embedding_classes, embedding_size] (uniform in +-sqrt(3) by default:
    unit variance), kept on the CPU as TF keeps it."""

    default_name = "embedding_wrapper"

    def __init__(self, cell, embedding_classes: int, embedding_size: int, initializer=None, reuse=None):
        if embedding_classes <= 0 or embedding_size <= 0:
            raise ValueError(f"Both embedding_classes and embedding_size must be > 0: "
                             f"{embedding_classes}, {embedding_size}.")
        super().__init__(0, None, reuse)
        self.cell, self._classes, self._size, self._initializer = cell, embedding_classes, embedding_size, initializer

    state_size = property(lambda self: self.cell.state_size)
    output_size = property(lambda self: self.cell.output_size)

    def zero_state(self, batch_size, dtype=np.float32):
        return self.cell.zero_state(batch_size, dtype)

    def build(self, input_depth, dtype=np.float32) -> None:
        """The inputs are ids: the embedding and the cell take the state's float dtype."""
        dtype = np.dtype(dtype)
        super().build(self._size, dtype if dtype.kind == "f" else np.dtype(np.float32))

    def _make_variables(self, input_depth, dtype):
        from trainer.graph import device

        bound = math.sqrt(3.0)
        with device("/cpu:0"):
            self.embedding = self._variable("embedding", [self._classes, self._size], dtype,
                                            self._initializer or initializers.RandomUniform(-bound, bound))
        self.cell.build(self._size, dtype)
        self.variables += self.cell.variables

    def __call__(self, inputs, state, scope=None):
        from trainer.rnn_cell import flatten_state

        dtype = flatten_state(state)[0].dtype
        self.build(self._size, dtype)
        return self.call(convert_to_tensor(inputs), state)

    def call(self, inputs, state):
        from trainer.embedding import embedding_lookup

        embedded = embedding_lookup(self.embedding, reshape(inputs, [-1]))
        return self.cell(embedded, state)


class GRUBlockCellV2(GRUCell):
    """``tf.contrib.rnn.GRUBlockCellV2``: GRUCell's step and variables (``gates/kernel``, ``gates/bias``,
    ``candidate/kernel``, ``candidate/bias``) with TF's arguments (``num_units`` or the old ``cell_size``)."""

    def __init__(self, num_units: int | None = None, cell_size: int | None = None, reuse=None,
                 name: str = "gru_cell"):
        if (cell_size is None) == (num_units is None):
            raise ValueError(f"{type(self).__name__}: exactly one of num_units or cell_size must be provided")
        super().__init__(num_units if num_units is not None else cell_size, reuse=reuse, name=name)


class GRUBlockCell(GRUBlockCellV2):
    """``tf.contrib.rnn.GRUBlockCell``: GRUBlockCellV2 under TF's first variable names, which swap the
    kernels' names: ``w_c`` [depth + units, 2 units] is the gates' (r, u) kernel with bias ``b_ru``
    (ones), ``w_ru`` [depth + units, units] the candidate's with bias ``b_c`` (zeros)."""

    def _make_variables(self, input_depth, dtype):
        n = self._num_units
        self.gates_kernel = self._variable("w_c", [input_depth + n, 2 * n], dtype)
        self.gates_bias = self._variable("b_ru", [2 * n], dtype, initializers.Ones())
        self.candidate_kernel = self._variable("w_ru", [input_depth + n, n], dtype)
        self.candidate_bias = self._variable("b_c", [n], dtype, initializers.Zeros())


class LSTMBlockFusedCell(FusedRNNCell):
    """TF's time-major fused LSTM: ``cell(inputs [time, batch, depth], initial_state=None,
    dtype=None, sequence_length=None)`` -> (outputs [time, batch, num_units], LSTMStateTuple(c, h)),
    variables ``lstm_fused_cell/kernel`` [depth + num_units, 4 num_units] and ``bias`` in TF's gate
    layout (i, j, f, o: a TF checkpoint's values), and with ``use_peephole`` ``w_i_diag``, ``w_f_diag``,
    ``w_o_diag``; ``cell_clip`` > 0 clips the cell state. Without ``sequence_length``, peepholes or
    clipping the sequence runs as one LSTMBlockFused op; otherwise as LSTMBlockCell's steps in a
    while_loop, with zero outputs and a kept state past each length."""

    def __init__(self, num_units: int, forget_bias: float = 1.0, cell_clip=None, use_peephole: bool = False,
                 reuse=None, dtype=None, name: str = "lstm_fused_cell"):
        self._num_units = num_units
        self._cell = LSTMBlockCell(num_units, forget_bias=forget_bias, cell_clip=cell_clip,
                                   use_peephole=use_peephole, name=name, dtype=dtype)

    @property
    def num_units(self) -> int:
        return self._num_units

    @property
    def variables(self) -> list:
        return self._cell.variables

    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
        """A list of ``time`` [batch, depth] steps in gives a list of outputs back, as in TF."""
        if isinstance(inputs, list):
            outputs, state = self(stack(inputs), initial_state, dtype, sequence_length, scope)
            return unstack(outputs), state
        return self._call_sequence(convert_to_tensor(inputs), initial_state, dtype, sequence_length, scope)

    def _call_sequence(self, x, initial_state, dtype, sequence_length, scope):
        from trainer.ops import make_op
        from trainer.rnn import dynamic_rnn

        if x.shape is None or len(x.shape) != 3 or x.shape[2] is None:
            raise ValueError(f"LSTMBlockFusedCell: inputs must be time-major [time, batch, depth] with a known "
                             f"depth, got shape {x.shape}")
        if initial_state is None and dtype is None:
            raise ValueError("Either initial_state or dtype needs to be specified")
        cell = self._cell
        with variable_scope(scope) if scope is not None else contextlib.nullcontext():
            cell.build(int(x.shape[2]), dtype or x.dtype)  # lstm_fused_cell/kernel where the cell is called
            if sequence_length is not None or not cell.runs_block_op:
                return dynamic_rnn(cell, x, sequence_length=sequence_length, initial_state=initial_state,
                                   dtype=dtype, time_major=True, scope="fused")
            if initial_state is None:
                batch = x.shape[1] if x.shape[1] is not None else make_op("Shape", [x]).outputs[0][1]
                initial_state = cell.zero_state(batch, dtype)
            c0, h0 = initial_state
            y, h, c = make_op("LSTMBlockFused", [x, h0, c0, cell.kernel, cell.bias],
                              {"forget_bias": cell.forget_bias}, domain="flowstack").outputs[:3]
            return y, LSTMStateTuple(c, h)


class LayerRNNCell(RNNCell):
    """TF's base class for user cells that make their variables in ``build(inputs_shape)`` with
    ``add_variable`` (or ``add_weight``) and set ``self.built = True``; ``call(inputs, state)``
    runs one step. The variables sit under the class name in snake case (``rnn/my_cell/kernel``) or
    ``name``. A subclass's ``build`` is adapted to the runners' ``build(input_depth, dtype)``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        user_build = cls.__dict__.get("build")
        if user_build is not None and user_build is not LayerRNNCell.build:
            cls.layer_build = user_build
            cls.build = LayerRNNCell.build

    def __init__(self, trainable: bool = True, name: str | None = None, dtype=None, **kwargs):
        import re

        snake = re.sub("([a-z])([A-Z])", r"\1_\2", re.sub("(.)([A-Z][a-z0-9]+)", r"\1_\2", type(self).__name__))
        super().__init__(0, None, kwargs.get("_reuse"), name or snake.lower(), dtype)
        self.trainable = trainable

    def layer_build(self, inputs_shape) -> None:
        """Override: make the variables with ``add_variable``; the input depth is ``inputs_shape[-1]``."""

    def build(self, input_depth, dtype=np.float32) -> None:
        from trainer.tensor_shape import TensorShape

        if isinstance(input_depth, (tuple, list)):  # super().build(inputs_shape) from a subclass's build
            self.built = True
            return
        if self.built:
            return
        if input_depth is None:
            raise ValueError(f"{type(self).__name__}: the inputs' last dimension must be known to build the cell")
        self._dtype = self._dtype or np.dtype(dtype)
        with variable_scope(None, default_name=self._name):
            self.layer_build(TensorShape([None, int(input_depth)]))
        self.built = True

    @property
    def dtype(self):
        return self._dtype

    def add_variable(self, name: str, shape, dtype=None, initializer=None, regularizer=None, trainable=None,
                     **kwargs):
        """A variable of this cell, made in its scope (``get_variable``)."""
        v = get_variable(name, list(shape), dtype=np.dtype(dtype or self._dtype or np.float32),
                         initializer=initializer, regularizer=regularizer,
                         trainable=self.trainable if trainable is None else trainable)
        self.variables.append(v)
        return v

    add_weight = add_variable

    @property
    def state_size(self):
        raise NotImplementedError(f"{type(self).__name__} must define state_size")

    @property
    def output_size(self):
        raise NotImplementedError(f"{type(self).__name__} must define output_size")
