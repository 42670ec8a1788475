"""``tf.contrib.crf``: a linear-chain conditional random field over per-position tag scores, as
TensorFlow 1.15 builds it (a BiLSTM-CRF tagger's top layer).

``inputs`` are unary potentials [batch, max_seq_len, num_tags], ``transition_params`` [num_tags,
num_tags] the score of tag i followed by tag j, ``sequence_lengths`` [batch] the real lengths
(positions past them are ignored). A tag sequence scores the sum of its unary and transition
scores; ``crf_log_norm`` is the log of the sum over every sequence of exp(score), computed by the
forward algorithm (``CrfForwardRnnCell`` in ``dynamic_rnn``), so ``crf_log_likelihood`` =
score - log_norm is differentiable in both. ``crf_decode`` finds the best sequence in the graph
(Viterbi: ``CrfDecodeForwardRnnCell`` keeps backpointers, ``CrfDecodeBackwardRnnCell`` follows
them) and ``viterbi_decode`` does the same in NumPy for one sequence.
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import (expand_dims, fill, gather_nd, less_equal, one_hot, range as range_, reduce_logsumexp,
                               reduce_max, reduce_sum, reverse_sequence, sequence_mask, squeeze, stack)
from trainer.graph import Tensor
from trainer.ops import argmax, cast, concat, convert_to_tensor, gather, maximum, reshape, shape, where, zeros_like
from trainer.rnn import dynamic_rnn
from trainer.variable_scopes import get_variable

__all__ = ["CrfDecodeBackwardRnnCell", "CrfDecodeForwardRnnCell", "CrfForwardRnnCell", "crf_binary_score",
           "crf_decode", "crf_log_likelihood", "crf_log_norm", "crf_multitag_sequence_score", "crf_sequence_score",
           "crf_unary_score", "viterbi_decode"]


def _checked(inputs, what: str) -> Tensor:
    inputs = convert_to_tensor(inputs)
    if inputs.shape is None or len(inputs.shape) != 3:
        raise ValueError(f"{what}: inputs must be [batch_size, max_seq_len, num_tags], got shape {inputs.shape}")
    if inputs.shape[2] is None:
        raise ValueError(f"{what}: the number of tags (inputs' last dimension) must be known")
    return inputs


def _lengths(sequence_lengths) -> Tensor:
    return cast(convert_to_tensor(sequence_lengths), np.int32)


class _CellWithoutVariables:
    """The RNNCell protocol dynamic_rnn drives (state_size, output_size, build, call) for cells that
    make no variables."""

    built = True
    variables: list = []

    def build(self, input_depth, dtype=np.float32) -> None:
        return None

    def zero_state(self, batch_size, dtype=np.float32):
        from trainer.array_ops import zeros

        return zeros(stack([cast(batch_size, np.int64), np.int64(self.state_size)]), dtype)

    def __call__(self, inputs, state, scope=None):
        return self.call(inputs, state)


class _TransitionCell(_CellWithoutVariables):
    """A cell stepping over tags with a [num_tags, num_tags] transition matrix: one state and one
    output per tag."""

    def __init__(self, transition_params):
        transition_params = convert_to_tensor(transition_params)
        self._transition_params = expand_dims(transition_params, 0)
        self._num_tags = transition_params.shape[0]

    @property
    def state_size(self) -> int:
        return self._num_tags

    @property
    def output_size(self) -> int:
        return self._num_tags


class CrfForwardRnnCell(_TransitionCell):
    """One step of the forward algorithm: alphas' = inputs + logsumexp over the previous tag of
    (alphas + transition_params)."""

    def call(self, inputs, state):
        scores = expand_dims(state, 2) + self._transition_params
        new_alphas = inputs + reduce_logsumexp(scores, [1])
        return new_alphas, new_alphas


class CrfDecodeForwardRnnCell(_TransitionCell):
    """One Viterbi step: state' = inputs + max over the previous tag of (state + transition_params);
    the output is each tag's best previous tag (int32 backpointers)."""

    def call(self, inputs, state):
        scores = expand_dims(state, 2) + self._transition_params  # [B, previous tag, tag]
        new_state = inputs + reduce_max(scores, [1])
        return cast(argmax(scores, 1), np.int32), new_state


class CrfDecodeBackwardRnnCell(_CellWithoutVariables):
    """One step back along the backpointers: the tag [B, 1] becomes its best previous tag."""

    def __init__(self, num_tags: int):
        self._num_tags = num_tags

    @property
    def state_size(self) -> int:
        return 1

    @property
    def output_size(self) -> int:
        return 1

    def call(self, inputs, state):
        tags = squeeze(state, axis=[1])
        rows = range_(cast(gather(shape(inputs), 0), np.int32))
        new_tags = expand_dims(gather_nd(inputs, stack([rows, tags], axis=1)), -1)
        return new_tags, new_tags


class _DecodeForwardAsFloat(CrfDecodeForwardRnnCell):
    """The forward Viterbi cell with its backpointers as float32 (dynamic_rnn's outputs take the inputs' dtype)."""

    def call(self, inputs, state):
        backpointers, new_state = super().call(inputs, state)
        return cast(backpointers, np.float32), new_state


def crf_unary_score(tag_indices, sequence_lengths, inputs) -> Tensor:
    """Each sequence's sum of the unary scores of its tags (within its length): [batch]."""
    inputs = _checked(inputs, "crf_unary_score")
    tags = convert_to_tensor(tag_indices)
    picked = reduce_sum(inputs * one_hot(tags, inputs.shape[2], dtype=inputs.dtype), axis=2)  # [B, T]
    masks = sequence_mask(_lengths(sequence_lengths), maxlen=gather(shape(tags), 1), dtype=inputs.dtype)
    return reduce_sum(picked * masks, 1)


def crf_binary_score(tag_indices, sequence_lengths, transition_params) -> Tensor:
    """Each sequence's sum of the transition scores between its consecutive tags: [batch]."""
    transition_params = convert_to_tensor(transition_params)
    tags = cast(convert_to_tensor(tag_indices), np.int64)
    num_tags = transition_params.shape[0]
    starts, ends = tags[:, :-1], tags[:, 1:]
    binary = gather(reshape(transition_params, [-1]), starts * np.int64(num_tags) + ends)
    masks = sequence_mask(_lengths(sequence_lengths), maxlen=gather(shape(tags), 1), dtype=transition_params.dtype)
    return reduce_sum(binary * masks[:, 1:], 1)


def crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params) -> Tensor:
    """The unnormalized score of each tag sequence: unary plus transition scores, [batch]."""
    inputs = _checked(inputs, "crf_sequence_score")
    return (crf_unary_score(tag_indices, sequence_lengths, inputs)
            + crf_binary_score(tag_indices, sequence_lengths, transition_params))


def crf_log_norm(inputs, sequence_lengths, transition_params) -> Tensor:
    """log of the sum of exp(score) over every tag sequence (0 for an empty sequence): [batch]."""
    inputs = _checked(inputs, "crf_log_norm")
    lengths = _lengths(sequence_lengths)
    first = inputs[:, 0, :]
    if inputs.shape[1] == 1:
        log_norm = reduce_logsumexp(first, [1])
    else:
        rest = inputs[:, 1:, :]
        _, alphas = dynamic_rnn(CrfForwardRnnCell(transition_params), rest,
                                sequence_length=maximum(lengths - 1, np.int32(0)), initial_state=first,
                                dtype=inputs.dtype, scope="crf_forward")
        log_norm = reduce_logsumexp(alphas, [1])
    return where(less_equal(lengths, np.int32(0)), zeros_like(log_norm), log_norm)


def crf_multitag_sequence_score(inputs, tag_bitmap, sequence_lengths, transition_params) -> Tensor:
    """log of the sum of exp(score) over the sequences whose every tag is allowed by ``tag_bitmap``
    ([batch, max_seq_len, num_tags] bool)."""
    inputs = _checked(inputs, "crf_multitag_sequence_score")
    blocked = fill(shape(inputs), np.float32(-np.inf))
    filtered = where(convert_to_tensor(tag_bitmap), inputs, cast(blocked, inputs.dtype))
    return crf_log_norm(filtered, sequence_lengths, transition_params)


def crf_log_likelihood(inputs, tag_indices, sequence_lengths, transition_params=None) -> tuple[Tensor, Tensor]:
    """(log-likelihood of each tag sequence [batch], transition_params); without transition_params a
    ``transitions`` [num_tags, num_tags] variable is made in the current variable scope."""
    inputs = _checked(inputs, "crf_log_likelihood")
    num_tags = inputs.shape[2]
    if transition_params is None:
        transition_params = get_variable("transitions", [num_tags, num_tags])
    score = crf_sequence_score(inputs, tag_indices, sequence_lengths, transition_params)
    return score - crf_log_norm(inputs, sequence_lengths, transition_params), transition_params


def crf_decode(potentials, transition_params, sequence_length) -> tuple[Tensor, Tensor]:
    """The highest-scoring tag sequence of each row ([batch, max_seq_len] int32; 0 past its length)
    and its score ([batch])."""
    potentials = _checked(potentials, "crf_decode")
    lengths = _lengths(sequence_length)
    if potentials.shape[1] == 1:
        squeezed = potentials[:, 0, :]
        return cast(expand_dims(argmax(squeezed, 1), 1), np.int32), reduce_max(squeezed, 1)
    num_tags = potentials.shape[2]
    first = potentials[:, 0, :]
    rest = potentials[:, 1:, :]
    less_one = maximum(lengths - 1, np.int32(0))
    backpointers, last_score = dynamic_rnn(_DecodeForwardAsFloat(transition_params), rest, sequence_length=less_one,
                                           initial_state=first, dtype=potentials.dtype, scope="crf_decode_forward")
    backpointers = reverse_sequence(cast(backpointers, np.int32), less_one, seq_axis=1, batch_axis=0)
    best_last = expand_dims(cast(argmax(last_score, 1), np.int32), -1)  # [B, 1]
    tags, _ = dynamic_rnn(CrfDecodeBackwardRnnCell(num_tags), backpointers, sequence_length=less_one,
                          initial_state=best_last, dtype=np.int32, scope="crf_decode_backward")
    tags = concat([best_last, squeeze(tags, axis=[2])], axis=1)
    return reverse_sequence(tags, lengths, seq_axis=1, batch_axis=0), reduce_max(last_score, 1)


def viterbi_decode(score, transition_params) -> tuple[list, float]:
    """The best tag sequence of one sequence's ``score`` [seq_len, num_tags] (NumPy), and its score."""
    score = np.asarray(score)
    transition_params = np.asarray(transition_params)
    if score.ndim != 2 or transition_params.shape != (score.shape[1], score.shape[1]):
        raise ValueError(f"viterbi_decode: score must be [seq_len, num_tags] and transition_params "
                         f"[num_tags, num_tags], got {score.shape} and {transition_params.shape}")
    trellis = np.zeros_like(score)
    backpointers = np.zeros_like(score, dtype=np.int32)
    trellis[0] = score[0]
    for t in range(1, score.shape[0]):
        v = np.expand_dims(trellis[t - 1], 1) + transition_params
        trellis[t] = score[t] + np.max(v, 0)
        backpointers[t] = np.argmax(v, 0)
    best = [int(np.argmax(trellis[-1]))]
    for bp in reversed(backpointers[1:]):
        best.append(int(bp[best[-1]]))
    best.reverse()
    return best, float(np.max(trellis[-1]))
