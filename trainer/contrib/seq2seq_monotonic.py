"""``tf.contrib.seq2seq``'s monotonic attention (Raffel et al. 2017), as TensorFlow 1.15's.

At each output step the decoder scans the memory from where it last attended and stops at entry
j with probability ``p_choose[j] = sigmoid(score[j])`` (``hard``: score > 0). The expected
alignment is ``alignment[j] = p_choose[j] * q[j]`` with ``q[j] = (1 - p_choose[j-1]) q[j-1] +
previous[j]``; ``monotonic_attention`` computes it by that recursion (``recursive``), in closed
form with cumulative products (``parallel``), or exactly for 0/1 choices (``hard``). The first
step's previous alignment is all on memory entry 0. The mechanisms are Bahdanau's and Luong's
scores plus a learned scalar ``attention_score_bias``.
"""

from __future__ import annotations

import numpy as np

from trainer import initializers, nn
from trainer.array_ops import clip_by_value, cumprod, cumsum, one_hot, stack, truediv
from trainer.contrib.seq2seq_attention import BahdanauAttention, LuongAttention, safe_cumprod
from trainer.contrib.seq2seq_helpers import filled_rows
from trainer.functional_ops import scan
from trainer.graph import Tensor
from trainer.ops import cast, concat, convert_to_tensor, gather, greater, shape, transpose
from trainer.random_ops import random_normal
from trainer.variable_scopes import get_variable

__all__ = ["BahdanauMonotonicAttention", "LuongMonotonicAttention", "monotonic_attention"]


def _recursive(p_choose_i: Tensor, previous_attention: Tensor) -> Tensor:
    ones = filled_rows(p_choose_i.shape[0] if p_choose_i.shape[0] is not None else
                       gather(shape(p_choose_i), np.int64(0)), [1], np.ones((), p_choose_i.dtype))
    shifted_1mp = concat([ones, 1.0 - p_choose_i[:, :-1]], 1)
    # scan over memory entries: q[j] = shifted_1mp[j] * q[j-1] + previous[j]
    elems = stack([transpose(shifted_1mp, [1, 0]), transpose(previous_attention, [1, 0])], axis=1)  # [time, 2, b]
    q = scan(lambda q_prev, pair: gather(pair, np.int64(0)) * q_prev + gather(pair, np.int64(1)), elems,
             initializer=previous_attention[:, 0] * 0.0)
    return p_choose_i * transpose(q, [1, 0])


def _parallel(p_choose_i: Tensor, previous_attention: Tensor) -> Tensor:
    cumprod_1mp = safe_cumprod(1.0 - p_choose_i, axis=1, exclusive=True)
    return p_choose_i * cumprod_1mp * cumsum(
        truediv(previous_attention, clip_by_value(cumprod_1mp, np.asarray(1e-10, p_choose_i.dtype),
                                                  np.asarray(1.0, p_choose_i.dtype))), axis=1)


def _hard(p_choose_i: Tensor, previous_attention: Tensor) -> Tensor:
    p_choose_i = p_choose_i * cumsum(previous_attention, axis=1)  # nothing before last step's choice
    return p_choose_i * cumprod(1.0 - p_choose_i, axis=1, exclusive=True)


MODES = {"recursive": _recursive, "parallel": _parallel, "hard": _hard}


def monotonic_attention(p_choose_i, previous_attention, mode: str) -> Tensor:
    """The expected monotonic alignment [batch, memory_time] from the stopping probabilities and
    the previous step's alignment, computed per ``mode`` (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"monotonic_attention: mode must be 'recursive', 'parallel', or 'hard', got {mode!r}")
    p_choose_i, previous_attention = convert_to_tensor(p_choose_i), convert_to_tensor(previous_attention)
    for what, t in (("p_choose_i", p_choose_i), ("previous_attention", previous_attention)):
        if t.shape is None or len(t.shape) != 2:
            raise ValueError(f"monotonic_attention: {what} must be [batch_size, memory_time], got shape {t.shape}")
    return MODES[mode](p_choose_i, previous_attention)


class _Monotonic:
    """What both monotonic mechanisms add to their parent's: the score bias, the stopping
    probability and a start on memory entry 0."""

    def _monotonic_setup(self, sigmoid_noise: float, sigmoid_noise_seed, score_bias_init: float, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"{self._name}: mode must be 'recursive', 'parallel', or 'hard', got {mode!r}")
        self._sigmoid_noise, self._noise_seed = float(sigmoid_noise), sigmoid_noise_seed
        self._score_bias_init, self._mode = float(score_bias_init), mode

    def _score(self, query):
        first = self._variables is None
        score = super()._score(query)
        if first:
            self._variables["score_bias"] = get_variable(
                "attention_score_bias", [], dtype=np.dtype(score.dtype),
                initializer=initializers.Constant(self._score_bias_init))
        return score + self._variables["score_bias"]

    def _alignments(self, score, previous_alignments):
        if self._sigmoid_noise > 0:
            score = score + self._sigmoid_noise * random_normal(shape(score), dtype=score.dtype,
                                                                seed=self._noise_seed)
        if self._mode == "hard":
            p_choose_i = cast(greater(score, np.zeros((), score.dtype)), score.dtype)
        else:
            p_choose_i = nn.sigmoid(score)
        return monotonic_attention(p_choose_i, previous_alignments, self._mode)

    def initial_alignments(self, batch_size, dtype) -> Tensor:
        if not isinstance(self._alignments_size, int):
            raise ValueError(f"{self._name}: the memory's max_time must be static for initial_alignments")
        return one_hot(filled_rows(batch_size, [], np.int32(0)), self._alignments_size, dtype=np.dtype(dtype))


class BahdanauMonotonicAttention(_Monotonic, BahdanauAttention):
    """Bahdanau's additive score plus ``attention_score_bias``, as stopping probabilities."""

    scope_name = "bahdanau_monotonic_attention"

    def __init__(self, num_units: int, memory, memory_sequence_length=None, normalize: bool = False,
                 score_mask_value=None, sigmoid_noise: float = 0.0, sigmoid_noise_seed=None,
                 score_bias_init: float = 0.0, mode: str = "parallel", dtype=None,
                 name: str = "BahdanauMonotonicAttention"):
        super().__init__(num_units, memory, memory_sequence_length, normalize, None, score_mask_value, dtype,
                         name=name)
        self._monotonic_setup(sigmoid_noise, sigmoid_noise_seed, score_bias_init, mode)


class LuongMonotonicAttention(_Monotonic, LuongAttention):
    """Luong's multiplicative score plus ``attention_score_bias``, as stopping probabilities."""

    scope_name = "luong_monotonic_attention"

    def __init__(self, num_units: int, memory, memory_sequence_length=None, scale: bool = False,
                 score_mask_value=None, sigmoid_noise: float = 0.0, sigmoid_noise_seed=None,
                 score_bias_init: float = 0.0, mode: str = "parallel", dtype=None,
                 name: str = "LuongMonotonicAttention"):
        super().__init__(num_units, memory, memory_sequence_length, scale, None, score_mask_value, dtype,
                         name=name)
        self._monotonic_setup(sigmoid_noise, sigmoid_noise_seed, score_bias_init, mode)
