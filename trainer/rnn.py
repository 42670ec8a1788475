"""Running cells over sequences: ``static_rnn`` (unrolled), ``dynamic_rnn`` (a while_loop) and
``bidirectional_dynamic_rnn``, as TensorFlow 1.x.

With ``sequence_length`` each example stops at its own length: its outputs past the end are zeros
and its state is carried through unchanged, so the final state is the state at the last valid step.
``dynamic_rnn`` builds the cell's variables before its loop, then writes each step's output into a
[time, batch, units] buffer (ScatterND), so its gradient runs through the loop's gradient machinery;
an LSTM cell over full-length sequences runs instead as one fused LSTMBlockFused op.

>>> import numpy as np, trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     cell = tf.nn.rnn_cell.BasicLSTMCell(4)
...     x = tf.placeholder(tf.float32, [2, 5, 3]); lengths = tf.constant([5, 2])
...     outputs, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
>>> outputs.shape, state.h.shape
((2, 5, 4), (2, 4))
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import expand_dims, reverse, zeros
from trainer.control_flow import while_loop
from trainer.graph import Tensor
from trainer.ops import cast, concat, constant, convert_to_tensor, gather, less, make_op, transpose, where
from trainer.rnn_cell import BasicLSTMCell, LSTMBlockCell, LSTMCell, LSTMStateTuple, flatten_state, pack_state
from trainer.variable_scopes import variable_scope

__all__ = ["FUSED_CELLS", "bidirectional_dynamic_rnn", "dynamic_rnn", "stack_bidirectional_dynamic_rnn",
           "static_bidirectional_rnn", "static_rnn", "transpose_batch_time"]

# Cells whose whole-sequence run is one LSTMBlockFused op when no sequence_length masks steps.
FUSED_CELLS = (BasicLSTMCell, LSTMBlockCell, LSTMCell)


def _initial_state(cell, batch, dtype, initial_state, what: str):
    if initial_state is not None:
        return initial_state
    if dtype is None:
        raise ValueError(f"{what}: give initial_state or dtype")
    return cell.zero_state(batch, dtype)


def _masked(step_mask, new, old):
    """``new`` where the example is still running at this step, else ``old`` ([batch, ...] tensors)."""
    rank = len(new.shape) if new.shape is not None else 2
    mask = step_mask
    for _ in range(rank - 1):
        mask = expand_dims(mask, -1)
    return where(mask, new, old)


def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
    """Unroll ``cell`` over ``inputs``, a list of [batch, depth] tensors: (outputs list, final state)."""
    inputs = [convert_to_tensor(x) for x in inputs]
    if not inputs:
        raise ValueError("static_rnn: inputs must be a non-empty list of tensors")
    first = inputs[0]
    with variable_scope(scope or "rnn"):
        batch = first.shape[0] if first.shape[0] is not None else make_op("Shape", [first]).outputs[0][0]
        state = _initial_state(cell, batch, dtype, initial_state, "static_rnn")
        cell.build(first.shape[-1], first.dtype)
        lengths = None if sequence_length is None else cast(convert_to_tensor(sequence_length), np.int64)
        outputs = []
        for t, x in enumerate(inputs):
            y, new_state = cell.call(x, state)
            if lengths is not None:
                running = less(constant(np.asarray(t, np.int64)), lengths)
                y = _masked(running, y, zeros_like_tensor(y))
                new_state = pack_state(new_state, [_masked(running, n, o) for n, o in
                                                   zip(flatten_state(new_state), flatten_state(state))])
            outputs.append(y)
            state = new_state
    return outputs, state


def zeros_like_tensor(t: Tensor) -> Tensor:
    return make_op("ZerosLike", [t], domain="flowstack").outputs[0]


def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None, parallel_iterations=None,
                swap_memory=False, time_major=False, scope=None):
    """Run ``cell`` over ``inputs`` [batch, time, depth] (or [time, batch, depth] with ``time_major``)
    in a while_loop: (outputs in the inputs' layout, final state)."""
    x = convert_to_tensor(inputs)
    if x.shape is None or len(x.shape) < 3:
        raise ValueError(f"dynamic_rnn: inputs must be at least rank 3, got shape {x.shape}")
    swap = [1, 0] + list(range(2, len(x.shape)))  # [batch, time, ...] <-> [time, batch, ...]
    xt = x if time_major else transpose(x, swap)
    steps, batch, depth = xt.shape[0], xt.shape[1], xt.shape[-1]  # a ConvLSTM's step is [batch, h, w, c]
    with variable_scope(scope or "rnn"):
        # a batch or a length known only at run time (placeholders of [None, None, depth]) is read
        # from the input's shape in the graph, as TensorFlow does
        dynamic = make_op("Shape", [xt]).outputs[0] if steps is None or batch is None else None
        if batch is None:
            batch = gather(dynamic, constant(np.asarray(1, np.int64)))
        state0 = _initial_state(cell, batch, dtype, initial_state, "dynamic_rnn")
        cell.build(depth, xt.dtype)  # variables before the loop: their initializers must run outside it
        n_time = constant(np.asarray(steps, np.int64)) if steps is not None else gather(
            dynamic, constant(np.asarray(0, np.int64)))
        units = cell.output_size
        if sequence_length is None and type(cell) in FUSED_CELLS and cell.runs_block_op:
            outputs, state = _fused_lstm(cell, xt, state0)
            return (outputs if time_major else transpose(outputs, [1, 0, 2])), state
        lengths = None if sequence_length is None else cast(convert_to_tensor(sequence_length), np.int64)
        flat0 = flatten_state(state0)
        # outputs take the state's dtype, as TF's (the inputs may be ids an EmbeddingWrapper looks up)
        unit_dims = [units] if isinstance(units, (int, np.integer)) else [int(d) for d in units]
        out0 = zeros([steps if steps is not None else n_time, batch] + unit_dims, flat0[0].dtype)

        def cond_fn(t, out, *flat):
            return less(t, n_time)

        def body_fn(t, out, *flat):
            state = pack_state(state0, list(flat))
            y, new_state = cell.call(gather(xt, t, axis=0), state)
            new_flat = flatten_state(new_state)
            if lengths is not None:
                running = less(t, lengths)
                y = _masked(running, y, zeros_like_tensor(y))
                new_flat = [_masked(running, n, o) for n, o in zip(new_flat, flat)]
            index = make_op("Reshape", [t, constant(np.asarray([1, 1], np.int64))]).outputs[0]
            out = make_op("ScatterND", [out, index, expand_dims(y, 0)]).outputs[0]
            return [t + np.asarray(1, np.int64), out] + new_flat

        t0 = constant(np.asarray(0, np.int64))
        results = while_loop(cond_fn, body_fn, [t0, out0] + flat0, name="while")
    outputs = results[1] if time_major else transpose(results[1], [1, 0] + list(range(2, len(results[1].shape))))
    return outputs, pack_state(state0, list(results[2:]))


def _fused_lstm(cell, xt, state0):
    """The whole sequence as one LSTMBlockFused op (a few large GEMMs instead of a loop of cells)."""
    c0, h0 = state0
    y, h, c = make_op("LSTMBlockFused", [xt, h0, c0, cell.kernel, cell.bias], {"forget_bias": cell.forget_bias},
                      domain="flowstack").outputs[:3]
    return y, LSTMStateTuple(c, h)


def _reverse_sequences(x, lengths, time_major: bool):
    """Each example's first ``lengths[b]`` steps reversed (all steps when lengths is None)."""
    time_axis = 0 if time_major else 1
    if lengths is None:
        return reverse(x, [time_axis])
    return make_op("ReverseSequence", [x, cast(convert_to_tensor(lengths), np.int64)],
                   {"time_axis": time_axis, "batch_axis": 1 - time_axis}).outputs[0]


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None, initial_state_fw=None,
                              initial_state_bw=None, dtype=None, parallel_iterations=None, swap_memory=False,
                              time_major=False, scope=None):
    """((outputs_fw, outputs_bw), (state_fw, state_bw)); the backward cell reads each sequence from
    its own end, and its outputs are returned in forward time order."""
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw"):
            out_fw, state_fw = dynamic_rnn(cell_fw, inputs, sequence_length, initial_state_fw, dtype,
                                           time_major=time_major)
        with variable_scope("bw"):
            rev = _reverse_sequences(convert_to_tensor(inputs), sequence_length, time_major)
            out_bw, state_bw = dynamic_rnn(cell_bw, rev, sequence_length, initial_state_bw, dtype,
                                           time_major=time_major)
            out_bw = _reverse_sequences(out_bw, sequence_length, time_major)
    return (out_fw, out_bw), (state_fw, state_bw)


def stack_bidirectional_dynamic_rnn(cells_fw, cells_bw, inputs, initial_states_fw=None, initial_states_bw=None,
                                    dtype=None, sequence_length=None, parallel_iterations=None, time_major=False,
                                    scope=None, swap_memory=False):
    """Bidirectional layers stacked, each reading the previous layer's [fw; bw] outputs:
    (outputs, final forward states, final backward states)."""
    if len(cells_fw) != len(cells_bw) or not cells_fw:
        raise ValueError("stack_bidirectional_dynamic_rnn: cells_fw and cells_bw must be equally long, non-empty")
    states_fw, states_bw = [], []
    layer = inputs
    with variable_scope(scope or "stack_bidirectional_rnn"):
        for i, (fw, bw) in enumerate(zip(cells_fw, cells_bw)):
            init_fw = initial_states_fw[i] if initial_states_fw else None
            init_bw = initial_states_bw[i] if initial_states_bw else None
            with variable_scope(f"cell_{i}"):
                (out_fw, out_bw), (s_fw, s_bw) = bidirectional_dynamic_rnn(
                    fw, bw, layer, sequence_length, init_fw, init_bw, dtype, time_major=time_major)
            layer = concat([out_fw, out_bw], axis=2)
            states_fw.append(s_fw)
            states_bw.append(s_bw)
    return layer, tuple(states_fw), tuple(states_bw)


def transpose_batch_time(x):
    """[batch, time, ...] <-> [time, batch, ...]."""
    x = convert_to_tensor(x)
    return transpose(x, [1, 0] + list(range(2, len(x.shape))))


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None, initial_state_bw=None, dtype=None,
                             sequence_length=None, scope=None):
    """(outputs [fw; bw concatenated per step], state_fw, state_bw) over a list of steps."""
    if sequence_length is not None:
        raise ValueError("static_bidirectional_rnn: sequence_length is not supported; use bidirectional_dynamic_rnn")
    with variable_scope(scope or "bidirectional_rnn"):
        # each direction runs in its own scope itself, as TF's (bidirectional_rnn/fw/<cell>/kernel)
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            out_bw, state_bw = static_rnn(cell_bw, list(reversed(inputs)), initial_state_bw, dtype, scope=bw_scope)
    outputs = [concat([f, b], axis=1) for f, b in zip(out_fw, reversed(out_bw))]
    return outputs, state_fw, state_bw


