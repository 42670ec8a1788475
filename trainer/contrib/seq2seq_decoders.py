"""``tf.contrib.seq2seq``'s decoders: the ``Decoder`` interface, ``BasicDecoder`` (a cell, a helper
and an optional output layer) and ``dynamic_decode``, which runs a decoder in a ``tf.while_loop``
until every example is finished, as TensorFlow 1.15's.

``dynamic_decode`` returns ``(final_outputs, final_state, final_sequence_lengths)``: the outputs of
every step stacked ([batch, time, ...], or [time, batch, ...] with ``output_time_major``), the
last state, and each example's length (the step at which it finished, plus one). The decoder's
variables (cell, output layer, attention) are made by one step traced before the loop, in the
``decoder`` variable scope, since the loop itself may not make variables; that traced step is
never run.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from trainer import nest
from trainer.array_ops import greater_equal, logical_not, logical_or, reduce_all, zeros, zeros_like
from trainer.contrib.seq2seq_helpers import Helper, filled_rows, select_rows
from trainer.control_flow import while_loop
from trainer.graph import Tensor
from trainer.ops import cast, constant, convert_to_tensor
from trainer.rnn import transpose_batch_time
from trainer.rnn_cell import flatten_state
from trainer.tensor_array import TensorArray
from trainer.tensor_shape import TensorShape
from trainer.variable_scopes import variable_scope

__all__ = ["BaseDecoder", "BasicDecoder", "BasicDecoderOutput", "Decoder", "dynamic_decode"]


class Decoder:
    """What ``dynamic_decode`` drives: ``batch_size``, ``output_size`` and ``output_dtype`` (nests
    matching the step outputs), ``initialize() -> (finished, inputs, state)``, ``step(time, inputs,
    state) -> (outputs, next_state, next_inputs, finished)`` and optionally ``finalize(outputs,
    final_state, sequence_lengths)``."""

    @property
    def batch_size(self):
        raise NotImplementedError

    @property
    def output_size(self):
        raise NotImplementedError

    @property
    def output_dtype(self):
        raise NotImplementedError

    @property
    def tracks_own_finished(self) -> bool:
        """Whether ``step``'s ``finished`` already includes earlier steps' (a beam search's does)."""
        return False

    def initialize(self, name=None):
        raise NotImplementedError

    def step(self, time, inputs, state, name=None):
        raise NotImplementedError

    def finalize(self, outputs, final_state, sequence_lengths):
        raise NotImplementedError


class BaseDecoder(Decoder):
    """TF 1.15's layer-style decoder: calling it runs ``dynamic_decode`` with the options given at
    construction, and ``initialize(inputs, initial_state=None, **kwargs)`` receives the call's
    inputs (a subclass implements it with ``step`` and the output properties)."""

    def __init__(self, output_time_major: bool = False, impute_finished: bool = False, maximum_iterations=None,
                 parallel_iterations: int = 32, swap_memory: bool = False, name=None, **kwargs):
        self.output_time_major, self.impute_finished = output_time_major, impute_finished
        self.maximum_iterations, self.parallel_iterations = maximum_iterations, parallel_iterations
        self.swap_memory, self.name = swap_memory, name

    def __call__(self, inputs, initial_state=None, **kwargs):
        return dynamic_decode(self, output_time_major=self.output_time_major, impute_finished=self.impute_finished,
                              maximum_iterations=self.maximum_iterations,
                              parallel_iterations=self.parallel_iterations, swap_memory=self.swap_memory,
                              scope=self.name, decoder_init_input=inputs,
                              decoder_init_kwargs={**kwargs, "initial_state": initial_state})

    def initialize(self, inputs, initial_state=None, **kwargs):
        raise NotImplementedError


class BasicDecoderOutput(namedtuple("BasicDecoderOutput", ("rnn_output", "sample_id"))):
    """One step's (or, stacked, every step's) output logits and sampled ids."""

    __slots__ = ()


def _static_batch(state):
    for leaf in flatten_state(state):
        if isinstance(leaf, Tensor) and leaf.shape is not None and leaf.shape and leaf.shape[0] is not None:
            return int(leaf.shape[0])
    return None


def _last_dim(size) -> TensorShape:
    return TensorShape(list(size) if isinstance(size, (tuple, list, TensorShape)) else [size])


class BasicDecoder(Decoder):
    """``cell`` run on what ``helper`` feeds it, its output through ``output_layer`` (a
    ``tf.layers.Dense`` or any callable) when given."""

    def __init__(self, cell, helper: Helper, initial_state, output_layer=None):
        if not callable(cell):
            raise TypeError(f"BasicDecoder: cell must be an RNNCell, got {type(cell).__name__}")
        if not isinstance(helper, Helper):
            raise TypeError(f"BasicDecoder: helper must be a Helper, got {type(helper).__name__}")
        if output_layer is not None and not callable(output_layer):
            raise TypeError(f"BasicDecoder: output_layer must be a layer or callable, got "
                            f"{type(output_layer).__name__}")
        try:
            helper_batch = helper.batch_size
        except ValueError:  # a CustomHelper knows its batch only once initialized
            helper_batch = None
        state_batch = _static_batch(initial_state)
        if state_batch is not None and isinstance(helper_batch, int) and state_batch != helper_batch:
            raise ValueError(f"BasicDecoder: initial_state has a batch of {state_batch} but the helper's batch is "
                             f"{helper_batch}")
        self._cell, self._helper, self._initial_state = cell, helper, initial_state
        self._output_layer = output_layer
        self._rnn_output_size = None

    @property
    def batch_size(self):
        return self._helper.batch_size

    def _output_size_of_rnn(self) -> TensorShape:
        if self._rnn_output_size is None:  # asked before any step: the step's width is not known yet
            size = self._cell.output_size
            if self._output_layer is not None:
                # the layer's output width, from applying it to one row of the cell's output width
                probe = self._output_layer(zeros([1] + list(_last_dim(size)), self.output_dtype.rnn_output))
                size = probe.shape[1:]
            self._rnn_output_size = _last_dim(size)
        return self._rnn_output_size

    @property
    def output_size(self) -> BasicDecoderOutput:
        return BasicDecoderOutput(self._output_size_of_rnn(), self._helper.sample_ids_shape)

    @property
    def output_dtype(self) -> BasicDecoderOutput:
        return BasicDecoderOutput(np.dtype(flatten_state(self._initial_state)[0].dtype), self._helper.sample_ids_dtype)

    def initialize(self, name=None):
        finished, first_inputs = self._helper.initialize()
        return finished, first_inputs, self._initial_state

    def step(self, time, inputs, state, name=None):
        cell_outputs, cell_state = self._cell(inputs, state)
        if self._output_layer is not None:
            cell_outputs = self._output_layer(cell_outputs)
        if self._rnn_output_size is None and cell_outputs.shape is not None and None not in cell_outputs.shape[1:]:
            self._rnn_output_size = TensorShape(cell_outputs.shape[1:])
        sample_ids = self._helper.sample(time=time, outputs=cell_outputs, state=cell_state)
        finished, next_inputs, next_state = self._helper.next_inputs(time=time, outputs=cell_outputs,
                                                                     state=cell_state, sample_ids=sample_ids)
        return BasicDecoderOutput(cell_outputs, sample_ids), next_state, next_inputs, finished


def _zero_outputs(size, dtype, batch_size):
    return nest.pack_as(dtype, [filled_rows(batch_size, _last_dim(s), np.zeros((), d))
                                for s, d in zip(nest.flatten_up_to(dtype, size), nest.flatten(dtype))])


def _keep_finished(finished: Tensor, new, old):
    """The state entries of finished examples kept as they were (TensorArrays and scalars pass)."""
    if isinstance(old, TensorArray) or old.shape is None or len(old.shape) == 0:
        return new
    return select_rows(finished, old, new)


def dynamic_decode(decoder: Decoder, output_time_major: bool = False, impute_finished: bool = False,
                   maximum_iterations=None, parallel_iterations: int = 32, swap_memory: bool = False, scope=None,
                   **kwargs):
    """Run ``decoder`` until every example is finished (or ``maximum_iterations`` steps):
    ``(final_outputs, final_state, final_sequence_lengths)``. With ``impute_finished`` a finished
    example's outputs are zeros and its state is carried through unchanged. A ``BaseDecoder`` is
    initialized with ``decoder_init_input`` and ``decoder_init_kwargs`` (the only ``kwargs``)."""
    if not isinstance(decoder, Decoder):
        raise TypeError(f"dynamic_decode: expected decoder to be a Decoder, got {type(decoder).__name__}")
    init_input, init_kwargs = kwargs.pop("decoder_init_input", None), kwargs.pop("decoder_init_kwargs", None)
    if kwargs:
        raise TypeError(f"dynamic_decode: unexpected arguments {sorted(kwargs)}")
    with variable_scope(scope, default_name="decoder"):
        if maximum_iterations is not None:
            maximum_iterations = cast(convert_to_tensor(maximum_iterations), np.int32)
            if maximum_iterations.shape is not None and len(maximum_iterations.shape) != 0:
                raise ValueError(f"dynamic_decode: maximum_iterations must be a scalar, got shape "
                                 f"{maximum_iterations.shape}")
        if isinstance(decoder, BaseDecoder):
            initial_finished, initial_inputs, initial_state = decoder.initialize(init_input, **(init_kwargs or {}))
        else:
            initial_finished, initial_inputs, initial_state = decoder.initialize()
        initial_time = constant(np.int32(0))
        decoder.step(initial_time, initial_inputs, initial_state)  # makes the variables outside the loop
        zero_outputs = _zero_outputs(decoder.output_size, decoder.output_dtype, decoder.batch_size)
        if maximum_iterations is not None:
            initial_finished = logical_or(initial_finished, greater_equal(np.int32(0), maximum_iterations))
        initial_lengths = zeros_like(initial_finished, dtype=np.int32)
        outputs_ta = nest.map_structure(lambda d: TensorArray(d, size=0, dynamic_size=True),
                                        decoder.output_dtype)

        def condition(time, outputs_ta, state, inputs, finished, lengths):
            return logical_not(reduce_all(finished))

        def body(time, outputs_ta, state, inputs, finished, lengths):
            next_outputs, decoder_state, next_inputs, decoder_finished = decoder.step(time, inputs, state)
            # a beam search's finished flags already hold its earlier steps' (and beams move between rows)
            next_finished = decoder_finished if decoder.tracks_own_finished else logical_or(decoder_finished, finished)
            lengths = select_rows(logical_not(finished), zeros_like(lengths) + (time + np.int32(1)), lengths)
            if maximum_iterations is not None:
                next_finished = logical_or(next_finished, greater_equal(time + np.int32(1), maximum_iterations))
            if impute_finished:
                emit = nest.pack_as(next_outputs, [select_rows(finished, z, o) for o, z in
                                                   zip(nest.flatten(next_outputs), nest.flatten(zero_outputs))])
                next_state = nest.pack_as(decoder_state, [_keep_finished(finished, n, o) for n, o in
                                                          zip(nest.flatten(decoder_state), nest.flatten(state))])
            else:
                emit, next_state = next_outputs, decoder_state
            outputs_ta = nest.pack_as(outputs_ta, [ta.write(time, o) for ta, o in
                                                   zip(nest.flatten(outputs_ta), nest.flatten(emit))])
            return time + np.int32(1), outputs_ta, next_state, next_inputs, next_finished, lengths

        result = while_loop(condition, body, (initial_time, outputs_ta, initial_state, initial_inputs,
                                              initial_finished, initial_lengths),
                            parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                            return_same_structure=True)
        final_state, final_lengths = result[2], result[5]
        final_outputs = nest.pack_as(outputs_ta, [ta.stack() for ta in nest.flatten(result[1])])
        try:
            final_outputs, final_state = decoder.finalize(final_outputs, final_state, final_lengths)
        except NotImplementedError:
            pass
        if not output_time_major:
            final_outputs = nest.pack_as(final_outputs, [transpose_batch_time(o) for o in nest.flatten(final_outputs)])
    return final_outputs, final_state, final_lengths
