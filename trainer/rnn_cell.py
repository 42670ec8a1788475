"""TensorFlow 1.x's recurrent cells (``tf.nn.rnn_cell``, ``tf.contrib.rnn``).

A cell maps ``(inputs [batch, depth], state) -> (output, new_state)``. It makes its variables
with ``get_variable`` the first time it is called (or when ``build`` is called, as ``dynamic_rnn``
does before its loop), in the variable scope current at that moment plus the cell's own name
(``rnn/basic_lstm_cell/kernel``), and reuses them on every later call, so one cell unrolled over
many steps shares one set of weights. LSTM cells run each step as one fused LSTMBlockCell op (TF's
equations as ops where LSTMCell's peepholes, clipping or projection are on); their
state is ``LSTMStateTuple(c, h)`` as in TensorFlow, and their ``kernel`` and ``bias`` hold the gates'
column blocks in TensorFlow's order i, j, f, o (input, candidate, forget, output), so a TensorFlow 1.x
checkpoint restores as it is. (flowstack checkpoints written before this layout held i, f, j, o.)
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from trainer import initializers, nn
from trainer.array_ops import clip_by_value, split, zeros
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import concat, convert_to_tensor, make_op, matmul, multiply, sigmoid, subtract, tanh
from trainer.variable_scopes import get_variable, variable_scope

__all__ = [
    "BasicLSTMCell", "BasicRNNCell", "DeviceWrapper", "DropoutWrapper", "InputProjectionWrapper",
    "OutputProjectionWrapper", "GRUCell", "LSTMCell", "LSTMStateTuple", "MultiRNNCell",
    "RNNCell", "ResidualWrapper",
]


class LSTMStateTuple(namedtuple("LSTMStateTuple", ("c", "h"))):
    """An LSTM's state: cell ``c`` and output ``h``."""

    __slots__ = ()

    @property
    def dtype(self):
        return self.c.dtype


def _zeros_of(size, batch_size, dtype):
    if isinstance(size, tuple):
        return type(size)(*(_zeros_of(s, batch_size, dtype) for s in size)) if hasattr(size, "_fields") else \
            tuple(_zeros_of(s, batch_size, dtype) for s in size)
    if isinstance(batch_size, (int, np.integer)):
        return zeros([int(batch_size), size], dtype)
    from trainer.array_ops import fill, stack

    return fill(stack([convert_to_tensor(batch_size), np.asarray(size, np.int32)]), np.zeros((), dtype))


class RNNCell:
    """Base cell: ``state_size``, ``output_size``, ``zero_state``, lazy ``build``, ``__call__``."""

    default_name = "rnn_cell"

    def __init__(self, num_units: int = 0, activation=None, reuse=None, name: str | None = None, dtype=None):
        self._num_units = num_units
        self._activation = activation or tanh
        self._name = name or self.default_name
        self._dtype = dtype
        self.built = False
        self.variables: list = []

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units

    def zero_state(self, batch_size, dtype=np.float32):
        """Zeros shaped like the state for ``batch_size`` (an int or a scalar tensor)."""
        return _zeros_of(self.state_size, batch_size, dtype)

    def build(self, input_depth: int, dtype=np.float32) -> None:
        """Make the variables (once), in the current variable scope under the cell's name."""
        if self.built:
            return
        if input_depth is None:
            raise ValueError(f"{type(self).__name__}: the inputs' last dimension must be known to build the cell")
        with variable_scope(None, default_name=self._name):
            self._make_variables(int(input_depth), np.dtype(self._dtype or dtype))
        self.built = True

    def _make_variables(self, input_depth: int, dtype: np.dtype) -> None:
        raise NotImplementedError

    def _variable(self, name, shape, dtype, initializer=None):
        v = get_variable(name, shape, dtype=dtype, initializer=initializer)
        self.variables.append(v)
        return v

    @property
    def trainable_variables(self) -> list:
        return list(self.variables)

    def __call__(self, inputs, state, scope=None):
        x = convert_to_tensor(inputs)
        self.build(x.shape[-1], x.dtype)
        return self.call(x, state)

    def call(self, inputs: Tensor, state):
        raise NotImplementedError


class BasicRNNCell(RNNCell):
    """``h = activation([x, h] @ kernel + bias)``."""

    default_name = "basic_rnn_cell"

    def _make_variables(self, input_depth, dtype):
        self.kernel = self._variable("kernel", [input_depth + self._num_units, self._num_units], dtype)
        self.bias = self._variable("bias", [self._num_units], dtype, initializers.Zeros())

    def call(self, inputs, state):
        h = self._activation(make_op("Gemm", [concat([inputs, state], axis=1), self.kernel, self.bias]).outputs[0])
        return h, h


class BasicLSTMCell(RNNCell):
    """An LSTM step; ``forget_bias`` is added to the forget gate: ``i, j, f, o = split([x, h] @ kernel
    + bias, 4)``, ``c' = c sigmoid(f + forget_bias) + sigmoid(i) act(j)``, ``h' = act(c') sigmoid(o)``.
    With tanh (the default) a step is one LSTMBlockCell op; another activation composes it of ops."""

    default_name = "basic_lstm_cell"

    def __init__(self, num_units: int, forget_bias: float = 1.0, state_is_tuple: bool = True, activation=None,
                 reuse=None, name: str | None = None, dtype=None):
        if not state_is_tuple:
            raise ValueError(f"{type(self).__name__}: state_is_tuple=False (concatenated states) is not supported")
        if activation is not None and not callable(activation):
            raise ValueError(f"{type(self).__name__}: activation must be a function, got {activation!r}")
        super().__init__(num_units, activation, reuse, name, dtype)
        self.forget_bias = float(forget_bias)

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self._num_units)

    @property
    def runs_block_op(self) -> bool:
        """Whether a step is exactly the LSTMBlockCell op (dynamic_rnn then runs the whole sequence
        as one LSTMBlockFused op): tanh, and none of LSTMCell's peepholes, clipping or projection."""
        return self._activation is tanh or self._activation is nn.tanh

    def _make_variables(self, input_depth, dtype):
        self.kernel = self._variable("kernel", [input_depth + self._num_units, 4 * self._num_units], dtype)
        self.bias = self._variable("bias", [4 * self._num_units], dtype, initializers.Zeros())

    def call(self, inputs, state):
        c, h = state
        if self.runs_block_op:
            h, c = make_op("LSTMBlockCell", [inputs, h, c, self.kernel, self.bias], {"forget_bias": self.forget_bias},
                           domain=TRAINER_DOMAIN).outputs[:2]
            return h, LSTMStateTuple(c, h)
        return self._composed_step(inputs, c, h)

    def _composed_step(self, inputs, c_prev, h_prev):
        """TF's step equations as ops (LSTMCell adds its options between them)."""
        act = self._activation
        z = nn.bias_add(matmul(concat([inputs, h_prev], axis=1), self.kernel), self.bias)
        i, j, f, o = split(z, 4, axis=1)
        c = sigmoid(self._peephole(f + self.forget_bias, "f", c_prev)) * c_prev + \
            sigmoid(self._peephole(i, "i", c_prev)) * act(j)
        c = self._clip_cell(c)
        h = self._project(sigmoid(self._peephole(o, "o", c)) * act(c))
        return h, LSTMStateTuple(c, h)

    # LSTMCell's options, between the equations' steps; a BasicLSTMCell has none.
    def _peephole(self, gate, name, c):
        return gate

    def _clip_cell(self, c):
        return c

    def _project(self, h):
        return h


class LSTMCell(BasicLSTMCell):
    """TensorFlow 1.x's ``LSTMCell``: BasicLSTMCell's step plus optional peepholes (``w_f_diag``,
    ``w_i_diag``, ``w_o_diag``: the gates i and f also see c_prev, o the new c), ``cell_clip`` on c,
    and a projection of h to ``num_proj`` (``projection/kernel``, clipped to ``proj_clip``). Without
    those options a step is one LSTMBlockCell op, with them the ops of TF's equations."""

    default_name = "lstm_cell"
    _peephole_order = ("f", "i", "o")  # the order TF's LSTMCell makes them in (checkpoints list them so)

    def __init__(self, num_units: int, use_peepholes: bool = False, cell_clip=None, initializer=None, num_proj=None,
                 proj_clip=None, num_unit_shards=None, num_proj_shards=None, forget_bias: float = 1.0,
                 state_is_tuple: bool = True, activation=None, reuse=None, name: str | None = None, dtype=None):
        super().__init__(num_units, forget_bias, state_is_tuple, activation, reuse, name, dtype)
        if num_proj is not None and int(num_proj) <= 0:
            raise ValueError(f"LSTMCell: num_proj must be a positive int or None, got {num_proj!r}")
        for arg, value in (("cell_clip", cell_clip), ("proj_clip", proj_clip)):
            if value is not None and not float(value) >= 0:
                raise ValueError(f"LSTMCell: {arg} must be a non-negative number or None, got {value!r}")
        self._initializer = initializer
        self._use_peepholes = bool(use_peepholes)
        self._cell_clip = None if cell_clip is None else float(cell_clip)
        self._num_proj = None if num_proj is None else int(num_proj)
        self._proj_clip = None if proj_clip is None else float(proj_clip)

    @property
    def state_size(self):
        return LSTMStateTuple(self._num_units, self.output_size)

    @property
    def output_size(self):
        return self._num_proj or self._num_units

    @property
    def runs_block_op(self) -> bool:
        plain = not self._use_peepholes and self._cell_clip is None and self._num_proj is None
        return plain and super().runs_block_op

    def _make_variables(self, input_depth, dtype):
        n = self._num_units
        self.kernel = self._variable("kernel", [input_depth + self.output_size, 4 * n], dtype, self._initializer)
        self.bias = self._variable("bias", [4 * n], dtype, initializers.Zeros())
        if self._use_peepholes:
            self.peepholes = {g: self._variable(f"w_{g}_diag", [n], dtype, self._initializer)
                              for g in self._peephole_order}
        if self._num_proj is not None:
            with variable_scope("projection"):
                self.projection = self._variable("kernel", [n, self._num_proj], dtype, self._initializer)

    def _peephole(self, gate, name, c):
        return gate + self.peepholes[name] * c if self._use_peepholes else gate

    def _clip_cell(self, c):
        return c if self._cell_clip is None else clip_by_value(c, -self._cell_clip, self._cell_clip)

    def _project(self, h):
        if self._num_proj is None:
            return h
        h = matmul(h, self.projection)
        return h if self._proj_clip is None else clip_by_value(h, -self._proj_clip, self._proj_clip)


class LSTMBlockCell(LSTMCell):
    """``tf.contrib.rnn.LSTMBlockCell``: TF's argument order and variables (``lstm_cell/kernel``,
    ``lstm_cell/bias``, with ``use_peephole`` ``w_i_diag``, ``w_f_diag``, ``w_o_diag``: LSTMCell's
    names, so either restores the other's checkpoint). ``cell_clip`` clips c where it is > 0 (TF's
    op takes -1, the default, for none)."""

    _peephole_order = ("i", "f", "o")

    def __init__(self, num_units: int, forget_bias: float = 1.0, cell_clip=None, use_peephole: bool = False,
                 dtype=None, reuse=None, name: str = "lstm_cell"):
        clip = cell_clip if cell_clip is not None and cell_clip > 0 else None
        super().__init__(num_units, use_peepholes=use_peephole, cell_clip=clip, forget_bias=forget_bias, reuse=reuse,
                         name=name, dtype=dtype)


class GRUCell(RNNCell):
    """Gated recurrent unit: update/reset gates (``gates/``) and the candidate (``candidate/``)."""

    default_name = "gru_cell"

    def __init__(self, num_units: int, activation=None, reuse=None, kernel_initializer=None, bias_initializer=None,
                 name: str | None = None, dtype=None):
        super().__init__(num_units, activation, reuse, name, dtype)
        self._kernel_init, self._bias_init = kernel_initializer, bias_initializer

    def _make_variables(self, input_depth, dtype):
        n = self._num_units
        with variable_scope("gates"):
            self.gates_kernel = self._variable("kernel", [input_depth + n, 2 * n], dtype, self._kernel_init)
            self.gates_bias = self._variable("bias", [2 * n], dtype, self._bias_init or initializers.Ones())
        with variable_scope("candidate"):
            self.candidate_kernel = self._variable("kernel", [input_depth + n, n], dtype, self._kernel_init)
            self.candidate_bias = self._variable("bias", [n], dtype, self._bias_init or initializers.Zeros())

    def call(self, inputs, state):
        zr = nn.sigmoid(make_op("Gemm", [concat([inputs, state], axis=1), self.gates_kernel, self.gates_bias])
                        .outputs[0])
        r, u = make_op("Split", [zr], {"axis": 1, "num_outputs": 2}, num_outputs=2).outputs
        cand = self._activation(make_op("Gemm", [concat([inputs, multiply(r, state)], axis=1), self.candidate_kernel,
                                                 self.candidate_bias]).outputs[0])
        h = multiply(u, state) + multiply(subtract(1.0, u), cand)
        return h, h


class MultiRNNCell(RNNCell):
    """Cells stacked: each step runs every layer; the state is a tuple of the layers' states."""

    default_name = "multi_rnn_cell"

    def __init__(self, cells, state_is_tuple: bool = True):
        if not state_is_tuple:
            raise ValueError("MultiRNNCell: state_is_tuple=False is not supported")
        super().__init__(0)
        self.cells = list(cells)
        if not self.cells:
            raise ValueError("MultiRNNCell needs at least one cell")

    @property
    def state_size(self):
        return tuple(c.state_size for c in self.cells)

    @property
    def output_size(self):
        return self.cells[-1].output_size

    def build(self, input_depth, dtype=np.float32):
        if self.built:
            return
        with variable_scope(None, default_name=self._name):
            depth = input_depth
            for i, cell in enumerate(self.cells):
                with variable_scope(f"cell_{i}"):
                    cell.build(depth, dtype)
                depth = cell.output_size
        self.variables = [v for c in self.cells for v in c.variables]
        self.built = True

    def call(self, inputs, state):
        new = []
        x = inputs
        for cell, s in zip(self.cells, state):
            x, s = cell.call(x, s)
            new.append(s)
        return x, tuple(new)


class CellWrapper(RNNCell):
    """A cell around another: the same state and output sizes and the same variables."""

    def __init__(self, cell):
        super().__init__(0)
        self.cell = cell

    state_size = property(lambda self: self.cell.state_size)
    output_size = property(lambda self: self.cell.output_size)

    def build(self, input_depth, dtype=np.float32):
        self.cell.build(input_depth, dtype)
        self.variables = self.cell.variables
        self.built = True


class DropoutWrapper(CellWrapper):
    """Dropout on a cell's inputs, outputs and/or state (``*_keep_prob``, numbers or tensors)."""

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0, state_keep_prob=1.0,
                 variational_recurrent=False, input_size=None, dtype=None, seed=None):
        if variational_recurrent:
            raise ValueError("DropoutWrapper: variational_recurrent=True is not supported")
        super().__init__(cell)
        self._keep = (input_keep_prob, output_keep_prob, state_keep_prob)
        self._seed = seed

    def _drop(self, x, keep):
        if isinstance(keep, (int, float)) and keep == 1.0:
            return x
        return nn.dropout(x, keep_prob=keep, seed=self._seed)

    def call(self, inputs, state):
        keep_in, keep_out, keep_state = self._keep
        output, new_state = self.cell.call(self._drop(inputs, keep_in), state)
        if not (isinstance(keep_state, (int, float)) and keep_state == 1.0):
            new_state = _map_state(new_state, lambda s: self._drop(s, keep_state))
        return self._drop(output, keep_out), new_state


class ResidualWrapper(CellWrapper):
    """``output = inputs + cell(inputs)`` (input and output depths must agree)."""

    def call(self, inputs, state):
        output, new_state = self.cell.call(inputs, state)
        return inputs + output, new_state


class DeviceWrapper(CellWrapper):
    """Runs the wrapped cell's ops on ``device``."""

    def __init__(self, cell, device: str):
        super().__init__(cell)
        self._device = device

    def zero_state(self, batch_size, dtype=np.float32):
        return self.cell.zero_state(batch_size, dtype)

    def build(self, input_depth, dtype=np.float32):
        from trainer.graph import device

        with device(self._device):
            self.cell.build(input_depth, dtype)
        self.variables = self.cell.variables
        self.built = True

    def call(self, inputs, state):
        from trainer.graph import device

        with device(self._device):
            return self.cell.call(inputs, state)


class _ProjectionWrapper(RNNCell):
    def __init__(self, cell, size: int, activation=None, name: str = "projection"):
        super().__init__(0)
        self.cell, self._size, self._projection_activation, self._scope = cell, size, activation, name

    state_size = property(lambda self: self.cell.state_size)

    def zero_state(self, batch_size, dtype=np.float32):
        return self.cell.zero_state(batch_size, dtype)

    def _projection(self, depth, dtype):
        with variable_scope(self._scope):
            self.kernel = self._variable("kernel", [depth, self._size], dtype)
            self.bias = self._variable("bias", [self._size], dtype, initializers.Zeros())

    def _project(self, x):
        y = make_op("Gemm", [x, self.kernel, self.bias]).outputs[0]
        return y if self._projection_activation is None else self._projection_activation(y)


class OutputProjectionWrapper(_ProjectionWrapper):
    """The cell's output projected to ``output_size`` units by a dense layer."""

    output_size = property(lambda self: self._size)

    def __init__(self, cell, output_size: int, activation=None, reuse=None):
        super().__init__(cell, output_size, activation, "output_projection_wrapper")

    def build(self, input_depth, dtype=np.float32):
        if self.built:
            return
        self.cell.build(input_depth, dtype)
        self._projection(self.cell.output_size, np.dtype(dtype))
        self.variables = self.cell.variables + self.variables
        self.built = True

    def call(self, inputs, state):
        output, new_state = self.cell.call(inputs, state)
        return self._project(output), new_state


class InputProjectionWrapper(_ProjectionWrapper):
    """The inputs projected to ``num_proj`` units before the cell."""

    output_size = property(lambda self: self.cell.output_size)

    def __init__(self, cell, num_proj: int, activation=None, input_size=None, reuse=None):
        super().__init__(cell, num_proj, activation, "input_projection_wrapper")

    def build(self, input_depth, dtype=np.float32):
        if self.built:
            return
        self._projection(input_depth, np.dtype(dtype))
        self.cell.build(self._size, dtype)
        self.variables = self.variables + self.cell.variables
        self.built = True

    def call(self, inputs, state):
        return self.cell.call(self._project(inputs), state)


def _map_state(state, fn):
    if isinstance(state, LSTMStateTuple):
        return LSTMStateTuple(fn(state.c), fn(state.h))
    if isinstance(state, tuple):
        return tuple(_map_state(s, fn) for s in state)
    return fn(state)


def flatten_state(state) -> list:
    """The state's tensors in order (nested tuples and LSTMStateTuples flattened)."""
    if isinstance(state, tuple):
        return [t for s in state for t in flatten_state(s)]
    return [state]


def pack_state(like, flat: list):
    """``like``'s structure filled from ``flat`` (consumed from the front)."""
    if isinstance(like, LSTMStateTuple):
        return LSTMStateTuple(pack_state(like.c, flat), pack_state(like.h, flat))
    if isinstance(like, tuple):
        return tuple(pack_state(s, flat) for s in like)
    return flat.pop(0)



def __getattr__(name: str):
    if name.startswith("__"):  # import machinery probes (__path__): no TF1 lookup
        raise AttributeError(name)
    from trainer.compat import missing_symbol

    raise missing_symbol("tf.nn.rnn_cell", name, globals())
