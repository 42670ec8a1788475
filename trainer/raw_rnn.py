"""``tf.nn.raw_rnn``: an RNN whose inputs, stopping and outputs a ``loop_fn`` decides step by step
(decoders feeding back their own predictions), as TensorFlow 1.15's.

``loop_fn(time, cell_output, cell_state, loop_state)`` returns ``(elements_finished, next_input,
next_cell_state, emit_output, next_loop_state)``; it is first called with ``(0, None, None, None)``
for the initial input, state and emit structure. The loop runs the cell until every batch entry is
finished; finished entries emit zeros and keep their state. Returns ``(emit_ta, final_state,
final_loop_state)``, ``emit_ta`` a TensorArray (or a nest of them) of the emitted outputs.
"""

from __future__ import annotations

import numpy as np

from trainer import nest
from trainer.array_ops import logical_or, reduce_all, zeros
from trainer.control_flow import while_loop
from trainer.ops import constant, convert_to_tensor, make_op, where
from trainer.rnn_cell import flatten_state
from trainer.tensor_array import TensorArray
from trainer.variable_scopes import variable_scope

__all__ = ["raw_rnn"]


def _rows_where(finished, old, new):
    """Per batch entry: ``old`` where ``finished``, else ``new`` (a scalar is always the new one)."""
    if isinstance(old, TensorArray) or old.shape is None or len(old.shape) == 0:
        return new
    mask = make_op("Reshape", [finished, constant(np.asarray([-1] + [1] * (len(old.shape) - 1), np.int64))])
    return where(mask.outputs[0], old, new)


def _map_pairs(fn, first, second):
    """``fn`` over the leaves of two nests of one structure, packed as ``first``."""
    return nest.pack_as(first, [fn(a, b) for a, b in zip(nest.flatten(first), nest.flatten(second))])


def _batch_size(flat_input):
    first = flat_input[0]
    if first.shape is not None and first.shape[0] is not None:
        return int(first.shape[0])
    return make_op("Shape", [first]).outputs[0][0]


def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory: bool = False, scope=None):
    """Run ``cell`` under ``loop_fn``'s control (see the module docstring)."""
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    with variable_scope(scope or "rnn"):
        time = constant(np.int32(0))
        finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(time, None, None, None)
        if initial_state is None:
            raise ValueError("raw_rnn: loop_fn(0, None, None, None) must return the initial cell state")
        flat_input = [convert_to_tensor(x) for x in nest.flatten(next_input)]
        loop_state = init_loop_state if init_loop_state is not None else constant(np.int32(0))
        batch = _batch_size(flat_input)
        state_dtype = flatten_state(initial_state)[0].dtype
        if emit_structure is not None:
            flat_emit = [convert_to_tensor(e) for e in nest.flatten(emit_structure)]
            sizes = [list(e.shape[1:]) for e in flat_emit]
            dtypes = [e.dtype for e in flat_emit]
        else:
            emit_structure = cell.output_size
            sizes = [[int(s)] for s in nest.flatten(emit_structure)]
            dtypes = [state_dtype] * len(sizes)
        zero_emit = nest.pack_as(emit_structure, [zeros([batch] + size, dtype)
                                                           for size, dtype in zip(sizes, dtypes)])
        emit_ta = nest.pack_as(emit_structure, [TensorArray(dtype, size=0, dynamic_size=True)
                                                         for dtype in dtypes])
        if hasattr(cell, "build"):  # the cell's variables are made before the loop, as the loop may not make any
            cell.build(flat_input[0].shape[-1], flat_input[0].dtype)

        def cond(t, elements_finished, *_):
            return make_op("Not", [reduce_all(elements_finished)]).outputs[0]

        def body(t, elements_finished, current_input, emit_arrays, state, loop_state):
            output, cell_state = cell(current_input, state)
            next_time = t + np.int32(1)
            next_finished, next_in, next_state, emit, next_loop_state = loop_fn(next_time, output, cell_state,
                                                                                loop_state)
            if next_loop_state is None:
                next_loop_state = loop_state
            emit = _map_pairs(lambda z, e: _rows_where(elements_finished, z, e), zero_emit, emit)
            next_state = _map_pairs(lambda s, n: _rows_where(elements_finished, s, n), state, next_state)
            emit_arrays = _map_pairs(lambda ta, e: ta.write(t, e), emit_arrays, emit)
            return (next_time, logical_or(elements_finished, next_finished), next_in, emit_arrays, next_state,
                    next_loop_state)

        result = while_loop(cond, body, (time, convert_to_tensor(finished), next_input, emit_ta, initial_state,
                                         loop_state), return_same_structure=True)
    final_loop_state = None if init_loop_state is None else result[5]
    return result[3], result[4], final_loop_state
