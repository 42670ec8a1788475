"""``tf.contrib.seq2seq``'s attention, as TensorFlow 1.15's: the mechanisms score a query (the
decoder cell's output) against the memory (the encoder's outputs), and ``AttentionWrapper`` runs a
cell with the attention context fed back into its inputs.

BahdanauAttention (additive): ``score[b, t] = sum(v * tanh(keys[b, t] + W_q query[b]))``, with
``normalize=True`` weight-normalised (``g * v / |v|``, plus a bias ``b`` inside the tanh).
LuongAttention (multiplicative): ``score[b, t] = query[b] . keys[b, t]``, times a learned scalar
``g`` with ``scale=True``. The keys are the memory through ``memory_layer`` (no bias); steps past
``memory_sequence_length`` are zeroed in the memory and score -inf, so they get no weight. The
alignments are softmax(score) and the context is their weighted sum of the memory. Variable names
are TensorFlow's: ``memory_layer/kernel``, ``<wrapper>/bahdanau_attention/query_layer/kernel``,
``.../attention_v``, ``attention_g``, ``attention_b``, ``<wrapper>/attention_layer/kernel``, so
TF checkpoints restore by name.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np

from trainer import initializers, nn
from trainer.array_ops import clip_by_value, cumsum, expand_dims, matmul, reduce_sum, rsqrt, sequence_mask, squeeze, \
    tensordot, zeros_like
from trainer.contrib.seq2seq_helpers import batch_size_of, filled_rows
from trainer.graph import Tensor
from trainer.ops import cast, concat, constant, convert_to_tensor, exp, gather, log, multiply, shape, square, tanh, \
    where
from trainer.tensor_array import TensorArray
from trainer.variable_scopes import get_variable, variable_scope

__all__ = ["AttentionMechanism", "AttentionWrapper", "AttentionWrapperState", "BahdanauAttention", "LuongAttention",
           "ProjectionLayer", "hardmax", "safe_cumprod"]


def hardmax(logits, name=None) -> Tensor:
    """One-hot of the argmax over the last axis (ties: the first), in ``logits``' dtype."""
    from trainer.array_ops import argmax, one_hot

    logits = convert_to_tensor(logits)
    depth = logits.shape[-1] if logits.shape is not None and logits.shape[-1] is not None else \
        gather(shape(logits), constant(np.asarray(-1, np.int64)))
    return one_hot(argmax(logits, axis=len(logits.shape) - 1), depth, dtype=logits.dtype, name=name)


def safe_cumprod(x, *args, **kwargs) -> Tensor:
    """cumprod(x) computed as exp(cumsum(log(x))) with x clipped to [tiny, 1], so long products of
    probabilities neither underflow to a hard 0 nor give NaN gradients (``cumsum``'s arguments)."""
    x = convert_to_tensor(x)
    tiny = np.finfo(np.dtype(x.dtype)).tiny
    return exp(cumsum(log(clip_by_value(x, np.asarray(tiny, x.dtype), np.asarray(1.0, x.dtype))), *args, **kwargs))


class ProjectionLayer:
    """A bias-free dense layer over the last axis, ``<name>/kernel`` made on its first call in a
    scope numbered as TF's layers are (``memory_layer``, ``memory_layer_1``, ...; the same name
    again under a reused scope, so a training and an inference decoder share it)."""

    def __init__(self, units: int, name: str):
        self.units, self.name = int(units), name
        self.kernel = None

    @property
    def variables(self) -> list:
        return [] if self.kernel is None else [self.kernel]

    def __call__(self, inputs) -> Tensor:
        x = convert_to_tensor(inputs)
        if self.kernel is None:
            if x.shape is None or x.shape[-1] is None:
                raise ValueError(f"{self.name}: the inputs' last dimension must be known, got shape {x.shape}")
            with variable_scope(None, default_name=self.name):
                self.kernel = get_variable("kernel", [int(x.shape[-1]), self.units], dtype=np.dtype(x.dtype))
        if len(x.shape) == 2:
            return matmul(x, self.kernel)
        return tensordot(x, self.kernel, [[len(x.shape) - 1], [0]])


class AttentionMechanism:
    """The interface ``AttentionWrapper`` drives: ``values``, ``keys``, ``batch_size``,
    ``alignments_size``, ``initial_alignments``/``initial_state`` and ``__call__(query, state) ->
    (alignments, next_state)``."""


def _masked_memory(memory: Tensor, lengths) -> Tensor:
    """``memory`` [batch, time, depth] with the steps past each example's length zeroed."""
    if lengths is None:
        return memory
    lengths = convert_to_tensor(lengths)
    if lengths.shape is not None and len(lengths.shape) != 1:
        raise ValueError(f"attention: memory_sequence_length must be a vector, got shape {lengths.shape}")
    batch = memory.shape[0]
    if batch is not None and lengths.shape is not None and lengths.shape[0] not in (None, batch):
        raise ValueError(f"attention: memory_sequence_length has {lengths.shape[0]} entries but the memory has a "
                         f"batch of {batch}")
    maxlen = memory.shape[1] if memory.shape[1] is not None else \
        gather(shape(memory), constant(np.asarray(1, np.int64)))
    mask = sequence_mask(lengths, maxlen, dtype=memory.dtype)
    return multiply(memory, expand_dims(mask, 2))


class _BaseAttention(AttentionMechanism):
    """Memory, keys and masking shared by both mechanisms; subclasses give ``_score``."""

    scope_name = ""

    def __init__(self, query_layer, memory, memory_layer, probability_fn, memory_sequence_length, score_mask_value,
                 name: str):
        memory = convert_to_tensor(memory)
        if memory.shape is None or len(memory.shape) != 3 or memory.shape[2] is None:
            raise ValueError(f"{name}: memory must be [batch, max_time, depth] with a known depth, got shape "
                             f"{memory.shape}")
        if probability_fn is not None and not callable(probability_fn):
            raise TypeError(f"{name}: probability_fn must be callable, got {probability_fn!r}")
        self._name = name
        self._query_layer, self._memory_layer = query_layer, memory_layer
        self._probability_fn = probability_fn or nn.softmax
        self._values = _masked_memory(memory, memory_sequence_length)
        self._keys = memory_layer(self._values) if memory_layer is not None else self._values
        self._memory_lengths = None if memory_sequence_length is None else convert_to_tensor(memory_sequence_length)
        self._score_mask_value = score_mask_value
        self._batch_size = batch_size_of(self._keys)
        self._alignments_size = self._keys.shape[1] if self._keys.shape[1] is not None else \
            cast(gather(shape(self._keys), constant(np.asarray(1, np.int64))), np.int32)
        self._variables: dict | None = None  # made by the first call, reused by the later ones

    @property
    def memory_layer(self):
        return self._memory_layer

    @property
    def query_layer(self):
        return self._query_layer

    @property
    def values(self) -> Tensor:
        return self._values

    @property
    def keys(self) -> Tensor:
        return self._keys

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def alignments_size(self):
        return self._alignments_size

    @property
    def state_size(self):
        return self._alignments_size

    def initial_alignments(self, batch_size, dtype) -> Tensor:
        if not isinstance(self._alignments_size, int):
            raise ValueError(f"{self._name}: the memory's max_time must be static for initial_alignments")
        return filled_rows(batch_size, [self._alignments_size], np.zeros((), np.dtype(dtype)))

    def initial_state(self, batch_size, dtype) -> Tensor:
        return self.initial_alignments(batch_size, dtype)

    def _masked_score(self, score: Tensor) -> Tensor:
        if self._memory_lengths is None:
            return score
        fill = -np.inf if self._score_mask_value is None else self._score_mask_value
        mask = sequence_mask(self._memory_lengths, self._alignments_size)
        return where(mask, score, zeros_like(score) + constant(np.asarray(fill, score.dtype)))

    def __call__(self, query, state):
        query = convert_to_tensor(query)
        if self._variables is None:
            with variable_scope(None, default_name=self.scope_name):
                score = self._score(query)
        else:
            score = self._score(query)
        alignments = self._alignments(self._masked_score(score), state)
        return alignments, alignments

    def _score(self, query: Tensor) -> Tensor:
        raise NotImplementedError

    def _alignments(self, score: Tensor, previous_alignments: Tensor) -> Tensor:
        return self._probability_fn(score)


class BahdanauAttention(_BaseAttention):
    """Additive attention (Bahdanau et al. 2015); ``normalize=True`` is its weight-normalised form."""

    scope_name = "bahdanau_attention"

    def __init__(self, num_units: int, memory, memory_sequence_length=None, normalize: bool = False,
                 probability_fn=None, score_mask_value=None, dtype=None, custom_key_value_fn=None,
                 name: str = "BahdanauAttention"):
        if custom_key_value_fn is not None:
            raise ValueError("BahdanauAttention: custom_key_value_fn is not supported")
        self._num_units, self._normalize = int(num_units), bool(normalize)
        super().__init__(ProjectionLayer(num_units, "query_layer"),
                         memory, ProjectionLayer(num_units, "memory_layer"), probability_fn,
                         memory_sequence_length, score_mask_value, name)

    def _score(self, query):
        processed = expand_dims(self._query_layer(query), 1)  # [batch, 1, units]
        if self._variables is None:
            dtype = np.dtype(query.dtype)
            made = {"v": get_variable("attention_v", [self._num_units], dtype=dtype)}
            if self._normalize:
                made["g"] = get_variable("attention_g", [], dtype=dtype,
                                         initializer=initializers.Constant(math.sqrt(1.0 / self._num_units)))
                made["b"] = get_variable("attention_b", [self._num_units], dtype=dtype,
                                         initializer=initializers.Zeros())
            self._variables = made
        v = self._variables["v"]
        if self._normalize:
            normed_v = self._variables["g"] * v * rsqrt(reduce_sum(square(v)))
            return reduce_sum(normed_v * tanh(self._keys + processed + self._variables["b"]), [2])
        return reduce_sum(v * tanh(self._keys + processed), [2])


class LuongAttention(_BaseAttention):
    """Multiplicative attention (Luong et al. 2015); ``scale=True`` learns a scalar on the score."""

    scope_name = "luong_attention"

    def __init__(self, num_units: int, memory, memory_sequence_length=None, scale: bool = False,
                 probability_fn=None, score_mask_value=None, dtype=None, custom_key_value_fn=None,
                 name: str = "LuongAttention"):
        if custom_key_value_fn is not None:
            raise ValueError("LuongAttention: custom_key_value_fn is not supported")
        self._num_units, self._scale = int(num_units), bool(scale)
        super().__init__(None, memory, ProjectionLayer(num_units, "memory_layer"), probability_fn,
                         memory_sequence_length, score_mask_value, name)

    def _score(self, query):
        depth, key_units = query.shape[-1], self._keys.shape[-1]
        if depth != key_units:
            raise ValueError(f"LuongAttention: incompatible inner dimensions between query and keys: the query has "
                             f"{depth} units, the keys {key_units}; set num_units to the query's depth ({depth})")
        score = squeeze(matmul(expand_dims(query, 1), self._keys, transpose_b=True), [1])
        if self._variables is None:
            self._variables = {}
            if self._scale:
                self._variables["g"] = get_variable("attention_g", [], dtype=np.dtype(query.dtype),
                                                    initializer=initializers.Ones())
        return self._variables["g"] * score if self._scale else score


class AttentionWrapperState(namedtuple("AttentionWrapperState", ("cell_state", "attention", "time", "alignments",
                                                                 "alignment_history", "attention_state"))):
    """The wrapped cell's state, the last attention output, the step, the alignments (per
    mechanism), their history (a TensorArray, or () when not kept) and the mechanisms' states."""

    __slots__ = ()

    def clone(self, **kwargs) -> "AttentionWrapperState":
        """This state with some fields replaced (``state.clone(cell_state=encoder_state)``)."""
        unknown = sorted(set(kwargs) - set(self._fields))
        if unknown:
            raise ValueError(f"AttentionWrapperState.clone: unknown fields {unknown}")
        return self._replace(**kwargs)


def _item_or_tuple(items):
    return items[0] if len(items) == 1 else tuple(items)


def _concat_inputs(inputs, attention):
    return concat([inputs, attention], -1)


class AttentionWrapper:
    """A cell whose inputs get the previous attention appended (``cell_input_fn``), and whose output
    attends over the memory: attention = ``attention_layer([cell_output, context])`` when
    ``attention_layer_size`` is given, else the context. It outputs the attention
    (``output_attention``) or the cell's output."""

    def __init__(self, cell, attention_mechanism, attention_layer_size=None, alignment_history: bool = False,
                 cell_input_fn=None, output_attention: bool = True, initial_cell_state=None, name=None,
                 attention_layer=None, attention_fn=None):
        if attention_layer is not None or attention_fn is not None:
            raise ValueError("AttentionWrapper: attention_layer= and attention_fn= are not supported; use "
                             "attention_layer_size")
        self._is_multi = isinstance(attention_mechanism, (list, tuple))
        mechanisms = list(attention_mechanism) if self._is_multi else [attention_mechanism]
        for m in mechanisms:
            if not isinstance(m, AttentionMechanism):
                raise TypeError(f"AttentionWrapper: attention_mechanism must be an AttentionMechanism, got "
                                f"{type(m).__name__}")
        if cell_input_fn is not None and not callable(cell_input_fn):
            raise TypeError(f"AttentionWrapper: cell_input_fn must be callable, got {cell_input_fn!r}")
        if attention_layer_size is not None:
            sizes = list(attention_layer_size) if isinstance(attention_layer_size, (list, tuple)) \
                else [attention_layer_size]
            if len(sizes) != len(mechanisms):
                raise ValueError(f"AttentionWrapper: attention_layer_size has {len(sizes)} entries for "
                                 f"{len(mechanisms)} attention mechanisms")
            self._attention_layers = [ProjectionLayer(s, "attention_layer") for s in sizes]
            self._attention_layer_size = sum(int(s) for s in sizes)
        else:
            self._attention_layers = None
            self._attention_layer_size = sum(int(m.values.shape[-1]) for m in mechanisms)
        self._cell, self._mechanisms = cell, mechanisms
        self._cell_input_fn = cell_input_fn or _concat_inputs
        self._output_attention, self._alignment_history = output_attention, bool(alignment_history)
        self._initial_cell_state = initial_cell_state
        self._name = name or "attention_wrapper"
        self._called = False

    @property
    def output_size(self):
        return self._attention_layer_size if self._output_attention else self._cell.output_size

    @property
    def state_size(self) -> AttentionWrapperState:
        return AttentionWrapperState(
            cell_state=self._cell.state_size, time=(), attention=self._attention_layer_size,
            alignments=_item_or_tuple([m.alignments_size for m in self._mechanisms]),
            attention_state=_item_or_tuple([m.state_size for m in self._mechanisms]),
            alignment_history=_item_or_tuple([m.alignments_size for m in self._mechanisms])
            if self._alignment_history else ())

    def _check_batch(self, batch_size, what: str) -> None:
        if not isinstance(batch_size, (int, np.integer)):
            return
        for m in self._mechanisms:
            if isinstance(m.batch_size, int) and m.batch_size != int(batch_size):
                raise ValueError(
                    f"AttentionWrapper {self._name}: {what} has a batch of {int(batch_size)} but the memory (encoder "
                    f"output) has a batch of {m.batch_size}. Are you using the BeamSearchDecoder? If so, tile the "
                    f"encoder output to beam_width with tf.contrib.seq2seq.tile_batch and pass batch_size * "
                    f"beam_width to zero_state")

    def zero_state(self, batch_size, dtype) -> AttentionWrapperState:
        """The initial state: the wrapped cell's (or ``initial_cell_state``), zero attention and
        alignments, time 0 and an empty alignment history."""
        self._check_batch(batch_size, "zero_state's batch_size")
        dtype = np.dtype(dtype)
        cell_state = self._initial_cell_state if self._initial_cell_state is not None else \
            self._cell.zero_state(batch_size, dtype)
        alignments = [m.initial_alignments(batch_size, dtype) for m in self._mechanisms]
        history = _item_or_tuple([TensorArray(dtype, size=0, dynamic_size=True) for _ in self._mechanisms]) \
            if self._alignment_history else ()
        return AttentionWrapperState(
            cell_state=cell_state, time=constant(np.int32(0)),
            attention=filled_rows(batch_size, [self._attention_layer_size], np.zeros((), dtype)),
            alignments=_item_or_tuple(alignments),
            alignment_history=history,
            attention_state=_item_or_tuple([m.initial_state(batch_size, dtype) for m in self._mechanisms]))

    def __call__(self, inputs, state: AttentionWrapperState, scope=None):
        if not isinstance(state, AttentionWrapperState):
            raise TypeError(f"AttentionWrapper: expected state to be an AttentionWrapperState, got "
                            f"{type(state).__name__}")
        if self._called:
            return self.call(inputs, state)
        with variable_scope(None, default_name=self._name):
            out = self.call(inputs, state)
        self._called = True
        return out

    def call(self, inputs, state: AttentionWrapperState):
        cell_inputs = self._cell_input_fn(convert_to_tensor(inputs), state.attention)
        cell_output, next_cell_state = self._cell(cell_inputs, state.cell_state)
        self._check_batch(cell_output.shape[0] if cell_output.shape is not None else None, "the cell output")
        previous_states = state.attention_state if self._is_multi else [state.attention_state]
        previous_history = state.alignment_history if self._is_multi else [state.alignment_history]
        attentions, alignments, states, histories = [], [], [], []
        for i, mechanism in enumerate(self._mechanisms):
            aligned, next_attention_state = mechanism(cell_output, previous_states[i])
            context = squeeze(matmul(expand_dims(aligned, 1), mechanism.values), [1])
            if self._attention_layers is not None:
                attention = self._attention_layers[i](concat([cell_output, context], 1))
            else:
                attention = context
            attentions.append(attention)
            alignments.append(aligned)
            states.append(next_attention_state)
            if self._alignment_history:
                histories.append(previous_history[i].write(state.time, aligned))
        attention = concat(attentions, 1) if len(attentions) > 1 else attentions[0]
        next_state = AttentionWrapperState(
            time=state.time + np.int32(1), cell_state=next_cell_state, attention=attention,
            attention_state=_item_or_tuple(states), alignments=_item_or_tuple(alignments),
            alignment_history=_item_or_tuple(histories) if self._alignment_history else ())
        return (attention if self._output_attention else cell_output), next_state
