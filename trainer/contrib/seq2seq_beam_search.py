"""``tf.contrib.seq2seq``'s beam search, as TensorFlow 1.15's: ``BeamSearchDecoder`` keeps the
``beam_width`` best partial sequences per example, ``tile_batch`` repeats the encoder's outputs and
state for each beam, and ``gather_tree`` follows the parent pointers back from the last step.

Each step scores every (beam, word) continuation by its total log-probability, divided by the
length penalty ``((5 + length) / 6) ** length_penalty_weight``, and keeps the top ``beam_width``;
a finished beam only continues with ``end_token`` at no cost. At the start only beam 0 is live
(the others have log-probability -inf), so the first step's beams are distinct words.
``dynamic_decode`` returns ``FinalBeamSearchDecoderOutput(predicted_ids [batch, time, beam],
beam_search_decoder_output)``, the beams best first.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from trainer import nest, nn
from trainer.array_ops import cumsum, expand_dims, floordiv, floormod, logical_not, logical_or, \
    range as tf_range, reduce_all, reduce_max, tile, zeros_like
from trainer.contrib.seq2seq_decoders import Decoder
from trainer.contrib.seq2seq_helpers import filled_rows
from trainer.control_flow import while_loop
from trainer.embedding import embedding_lookup
from trainer.graph import Tensor
from trainer.ops import cast, concat, constant, convert_to_tensor, equal, gather, greater, make_op, reshape, shape, \
    where
from trainer.tensor_array import TensorArray
from trainer.tensor_shape import TensorShape

__all__ = ["BeamSearchDecoder", "BeamSearchDecoderOutput", "BeamSearchDecoderState", "FinalBeamSearchDecoderOutput",
           "gather_tree", "tile_batch"]


class BeamSearchDecoderState(namedtuple("BeamSearchDecoderState", ("cell_state", "log_probs", "finished", "lengths",
                                                                   "accumulated_attention_probs"))):
    __slots__ = ()


class BeamSearchDecoderOutput(namedtuple("BeamSearchDecoderOutput", ("scores", "predicted_ids", "parent_ids"))):
    __slots__ = ()


class FinalBeamSearchDecoderOutput(namedtuple("FinalBeamDecoderOutput",
                                              ("predicted_ids", "beam_search_decoder_output"))):
    """The whole beams (``predicted_ids`` [batch, time, beam]) and each step's raw output."""

    __slots__ = ()


def _rest_of_shape(t: Tensor, start: int) -> Tensor:
    """``shape(t)[start:]``."""
    return make_op("Slice", [shape(t), np.array([start], np.int64), np.array([2 ** 62], np.int64)]).outputs[0]


def _tile_one(t, multiplier: int) -> Tensor:
    t = convert_to_tensor(t)
    if t.shape is None or len(t.shape) == 0:
        raise ValueError(f"tile_batch: t must have a batch dimension, got shape {t.shape}")
    tiled = tile(expand_dims(t, 1), [1, multiplier] + [1] * (len(t.shape) - 1))
    if None not in t.shape:
        return reshape(tiled, [t.shape[0] * multiplier] + list(t.shape[1:]))
    out = reshape(tiled, concat([constant(np.array([-1], np.int64)), _rest_of_shape(t, 1)], 0))
    out.set_shape((None if t.shape[0] is None else t.shape[0] * multiplier,) + tuple(t.shape[1:]))
    return out


def tile_batch(t, multiplier: int, name=None):
    """Each batch entry of ``t`` (a tensor or a nest of them) repeated ``multiplier`` times in
    place: [batch, ...] -> [batch * multiplier, ...], rows b*multiplier .. (b+1)*multiplier-1 from row b."""
    if not isinstance(multiplier, (int, np.integer)) or multiplier < 1:
        raise ValueError(f"tile_batch: multiplier must be a positive int, got {multiplier!r}")
    for leaf in nest.flatten(t):
        if isinstance(leaf, TensorArray):
            raise TypeError("tile_batch: TensorArrays cannot be tiled")
    return nest.map_structure(lambda leaf: _tile_one(leaf, int(multiplier)), t)


def _batch_gather(values: Tensor, indices: Tensor, batch_size, beam_width: int) -> Tensor:
    """values[b, indices[b, k], ...] for values [batch, range, ...] and indices [batch, beam]."""
    rng = values.shape[1] if values.shape is not None and values.shape[1] is not None else \
        gather(shape(values), constant(np.asarray(1, np.int64)))
    offsets = expand_dims(cast(tf_range(batch_size if isinstance(batch_size, int) else cast(batch_size, np.int64)),
                               np.int64) * cast(convert_to_tensor(rng), np.int64), 1)
    flat_index = reshape(cast(indices, np.int64) + offsets, [-1])
    flat = reshape(values, concat([constant(np.array([-1], np.int64)), _rest_of_shape(values, 2)], 0))
    out = reshape(gather(flat, flat_index),
                  concat([constant(np.array([-1, beam_width], np.int64)), _rest_of_shape(values, 2)], 0))
    if values.shape is not None:
        static_batch = batch_size if isinstance(batch_size, int) else None
        out.set_shape((static_batch, beam_width) + tuple(values.shape[2:]))
    return out


def gather_tree(step_ids, parent_ids, max_sequence_lengths, end_token, name=None) -> Tensor:
    """The full beams from each step's ids and parent beams ([time, batch, beam] each), read back
    from step ``max_sequence_lengths[b] - 1``; later steps, and every step after a beam's first
    ``end_token``, hold ``end_token``."""
    step_ids, parent_ids = convert_to_tensor(step_ids), convert_to_tensor(parent_ids)
    lengths = cast(convert_to_tensor(max_sequence_lengths), np.int32)
    end_token = cast(convert_to_tensor(end_token), step_ids.dtype)
    for what, t in (("step_ids", step_ids), ("parent_ids", parent_ids)):
        if t.shape is None or len(t.shape) != 3:
            raise ValueError(f"gather_tree: {what} must be [max_time, batch_size, beam_width], got shape {t.shape}")
    if lengths.shape is None or len(lengths.shape) != 1:
        raise ValueError(f"gather_tree: max_sequence_lengths must be a vector, got shape {lengths.shape}")
    if end_token.shape is None or len(end_token.shape) != 0:
        raise ValueError(f"gather_tree: end_token must be a scalar, got shape {end_token.shape}")
    if None not in (step_ids.shape[1], lengths.shape[0]) and step_ids.shape[1] != lengths.shape[0]:
        raise ValueError(f"gather_tree: max_sequence_lengths has {lengths.shape[0]} entries but step_ids have a "
                         f"batch of {step_ids.shape[1]}")
    beam_width = step_ids.shape[2]
    if beam_width is None:
        raise ValueError("gather_tree: the beam width (step_ids' last dimension) must be static")
    batch = step_ids.shape[1] if step_ids.shape[1] is not None else gather(shape(step_ids), constant(np.int64(1)))
    max_time = cast(gather(shape(step_ids), constant(np.int64(0))), np.int32)
    beams0 = filled_rows(batch, [beam_width], np.int32(0)) + cast(tf_range(beam_width), np.int32)

    def cond(t, parents, ta):
        return greater(t, np.int32(-1))

    def body(t, parents, ta):
        live = expand_dims(greater(lengths, t), 1)  # [batch, 1]: step t is within the beam
        index = cast(t, np.int64)
        ids = _batch_gather(gather(step_ids, index), parents, batch, beam_width)
        up = _batch_gather(gather(parent_ids, index), parents, batch, beam_width)
        ta = ta.write(t, where(live, ids, zeros_like(ids) + end_token))
        return t - np.int32(1), where(live, cast(up, np.int32), parents), ta

    ta0 = TensorArray(step_ids.dtype, size=max_time, dynamic_size=True)
    _, _, ta = while_loop(cond, body, (max_time - np.int32(1), beams0, ta0), back_prop=False,
                          name=name or "gather_tree")
    beams = ta.stack()
    beams.set_shape(step_ids.shape)
    is_end = cast(equal(beams, end_token), np.int32)
    after_end = greater(cumsum(is_end, axis=0, exclusive=True), np.int32(0))
    return where(after_end, zeros_like(beams) + end_token, beams)


def _length_penalty(lengths: Tensor, weight: float, dtype) -> Tensor | float:
    if weight == 0:
        return 1.0
    return ((5.0 + cast(lengths, dtype)) / 6.0) ** np.asarray(weight, dtype)


class BeamSearchDecoder(Decoder):
    """Beam search over ``cell`` (its ``initial_state`` tiled to batch * beam_width with
    ``tile_batch``), feeding back ``embedding`` of each beam's last word."""

    def __init__(self, cell, embedding, start_tokens, end_token, initial_state, beam_width: int, output_layer=None,
                 length_penalty_weight: float = 0.0, coverage_penalty_weight: float = 0.0,
                 reorder_tensor_arrays: bool = True):
        if not callable(cell):
            raise TypeError(f"BeamSearchDecoder: cell must be an RNNCell, got {type(cell).__name__}")
        if output_layer is not None and not callable(output_layer):
            raise TypeError(f"BeamSearchDecoder: output_layer must be a layer or callable, got "
                            f"{type(output_layer).__name__}")
        if coverage_penalty_weight:
            raise ValueError("BeamSearchDecoder: coverage_penalty_weight is not supported")
        if any(isinstance(leaf, TensorArray) for leaf in nest.flatten(initial_state)):
            raise ValueError("BeamSearchDecoder: states holding TensorArrays (alignment_history) are not supported")
        if not isinstance(beam_width, (int, np.integer)) or beam_width < 1:
            raise ValueError(f"BeamSearchDecoder: beam_width must be a positive int, got {beam_width!r}")
        self._cell, self._output_layer, self._beam_width = cell, output_layer, int(beam_width)
        if callable(embedding):
            self._embedding_fn = embedding
        else:
            table = convert_to_tensor(embedding)
            self._embedding_fn = lambda ids: embedding_lookup(table, ids)
        self._start_tokens = cast(convert_to_tensor(start_tokens), np.int32)
        self._end_token = cast(convert_to_tensor(end_token), np.int32)
        if self._start_tokens.shape is None or len(self._start_tokens.shape) != 1:
            raise ValueError(f"BeamSearchDecoder: start_tokens must be a vector, got shape {self._start_tokens.shape}")
        if self._end_token.shape is None or len(self._end_token.shape) != 0:
            raise ValueError(f"BeamSearchDecoder: end_token must be a scalar, got shape {self._end_token.shape}")
        batch = self._start_tokens.shape[0]
        self._batch_size = int(batch) if batch is not None else \
            cast(gather(shape(self._start_tokens), constant(np.int64(0))), np.int32)
        self._check_state_batch(initial_state)
        self._length_penalty_weight = float(length_penalty_weight)
        self._initial_cell_state = nest.map_structure(self._split_beams, initial_state)
        self._start_tokens = tile(expand_dims(self._start_tokens, 1), [1, self._beam_width])
        self._start_inputs = self._embedding_fn(self._start_tokens)
        self._dtype = np.dtype(nest.flatten(initial_state)[0].dtype)

    def _check_state_batch(self, state) -> None:
        if not isinstance(self._batch_size, int):
            return
        for leaf in nest.flatten(state):
            leaf = convert_to_tensor(leaf)
            if leaf.shape and leaf.shape[0] is not None and leaf.shape[0] != self._batch_size * self._beam_width:
                raise ValueError(
                    f"BeamSearchDecoder: initial_state has a batch of {leaf.shape[0]}, expected batch_size * "
                    f"beam_width = {self._batch_size * self._beam_width}; tile the encoder's state and outputs "
                    f"with tf.contrib.seq2seq.tile_batch(..., multiplier=beam_width)")

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def tracks_own_finished(self) -> bool:
        return True

    @property
    def output_size(self) -> BeamSearchDecoderOutput:
        beams = TensorShape([self._beam_width])
        return BeamSearchDecoderOutput(beams, beams, beams)

    @property
    def output_dtype(self) -> BeamSearchDecoderOutput:
        return BeamSearchDecoderOutput(self._dtype, np.dtype(np.int32), np.dtype(np.int32))

    # -- [batch * beam, ...] <-> [batch, beam, ...] -------------------------------------------------
    def _split_beams(self, t):
        t = convert_to_tensor(t)
        if t.shape is None or len(t.shape) == 0:
            return t
        out = reshape(t, concat([constant(np.array([-1, self._beam_width], np.int64)), _rest_of_shape(t, 1)], 0))
        static = self._batch_size if isinstance(self._batch_size, int) else None
        out.set_shape((static, self._beam_width) + tuple(t.shape[1:]))
        return out

    def _merge_beams(self, t):
        t = convert_to_tensor(t)
        if t.shape is None or len(t.shape) < 2:
            return t
        out = reshape(t, concat([constant(np.array([-1], np.int64)), _rest_of_shape(t, 2)], 0))
        static = self._batch_size * self._beam_width if isinstance(self._batch_size, int) else None
        out.set_shape((static,) + tuple(t.shape[2:]))
        return out

    def initialize(self, name=None):
        batch, beam = self._batch_size, self._beam_width
        # only beam 0 is live at the start: the others are finished, with log-probability -inf
        finished = logical_or(filled_rows(batch, [beam], np.bool_(False)), greater(tf_range(beam), np.int64(0)))
        log_probs = where(finished, filled_rows(batch, [beam], np.asarray(-np.inf, self._dtype)),
                          filled_rows(batch, [beam], np.zeros((), self._dtype)))
        state = BeamSearchDecoderState(cell_state=self._initial_cell_state, log_probs=log_probs, finished=finished,
                                       lengths=filled_rows(batch, [beam], np.int64(0)),
                                       accumulated_attention_probs=())
        return finished, self._start_inputs, state

    def step(self, time, inputs, state: BeamSearchDecoderState, name=None):
        merged_inputs = nest.map_structure(self._merge_beams, inputs)
        merged_state = nest.map_structure(self._merge_beams, state.cell_state)
        cell_outputs, next_cell_state = self._cell(merged_inputs, merged_state)
        cell_outputs = nest.map_structure(self._split_beams, cell_outputs)
        next_cell_state = nest.map_structure(self._split_beams, next_cell_state)
        if self._output_layer is not None:
            cell_outputs = self._output_layer(cell_outputs)
        output, next_state = self._search_step(cell_outputs, next_cell_state, state)
        finished = next_state.finished
        next_inputs = where(reduce_all(finished), self._start_inputs, self._embedding_fn(output.predicted_ids))
        return output, next_state, next_inputs, finished

    def _search_step(self, logits: Tensor, next_cell_state, state: BeamSearchDecoderState):
        batch, beam = self._batch_size, self._beam_width
        vocab = logits.shape[-1]
        if vocab is None:
            raise ValueError("BeamSearchDecoder: the output layer's width (the vocabulary size) must be static")
        step_log_probs = nn.log_softmax(logits)
        # a finished beam continues only with end_token, at no cost
        is_end = equal(cast(tf_range(vocab), np.int32), self._end_token)  # [vocab]
        finished_row = where(is_end, constant(np.zeros(vocab, self._dtype)),
                             constant(np.full(vocab, np.finfo(self._dtype).min, self._dtype)))
        step_log_probs = where(expand_dims(state.finished, 2), zeros_like(step_log_probs) + finished_row,
                               step_log_probs)
        total = expand_dims(state.log_probs, 2) + step_log_probs  # [batch, beam, vocab]
        not_end = cast(logical_not(is_end), np.int64)
        new_lengths = expand_dims(state.lengths, 2) + not_end * expand_dims(cast(logical_not(state.finished),
                                                                                 np.int64), 2)
        scores = total / _length_penalty(new_lengths, self._length_penalty_weight, self._dtype)
        top_scores, word_indices = nn.top_k(reshape(scores, [-1, beam * vocab]), k=beam)
        static_batch = batch if isinstance(batch, int) else None
        top_scores.set_shape((static_batch, beam))
        word_indices.set_shape((static_batch, beam))
        next_word_ids = cast(floormod(word_indices, np.int32(vocab)), np.int32)
        next_beam_ids = cast(floordiv(word_indices, np.int32(vocab)), np.int32)
        flat_total = reshape(total, [-1, beam * vocab])
        next_log_probs = _batch_gather(flat_total, word_indices, batch, beam)
        previously_finished = _batch_gather(state.finished, next_beam_ids, batch, beam)
        next_finished = logical_or(previously_finished, equal(next_word_ids, self._end_token))
        next_lengths = _batch_gather(state.lengths, next_beam_ids, batch, beam) + \
            cast(logical_not(previously_finished), np.int64)
        gathered_state = nest.map_structure(
            lambda t: t if t.shape is None or len(t.shape) < 2 else _batch_gather(t, next_beam_ids, batch, beam),
            next_cell_state)
        next_state = BeamSearchDecoderState(cell_state=gathered_state, log_probs=next_log_probs,
                                            finished=next_finished, lengths=next_lengths,
                                            accumulated_attention_probs=())
        return BeamSearchDecoderOutput(top_scores, next_word_ids, next_beam_ids), next_state

    def finalize(self, outputs: BeamSearchDecoderOutput, final_state: BeamSearchDecoderState, sequence_lengths):
        max_lengths = cast(reduce_max(final_state.lengths, axis=1), np.int32)
        predicted = gather_tree(outputs.predicted_ids, outputs.parent_ids, max_lengths, self._end_token)
        return FinalBeamSearchDecoderOutput(predicted, outputs), final_state
