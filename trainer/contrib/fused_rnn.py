"""``tf.contrib.rnn``'s fused-RNN interface: a cell that runs a whole time-major sequence in one call,
``cell(inputs, initial_state=None, dtype=None, sequence_length=None, scope=None) -> (outputs, state)``
with ``inputs`` [time, batch, depth] or a list of ``time`` [batch, depth] tensors (outputs come back
in the same form). ``LSTMBlockFusedCell`` is one; ``FusedRNNCellAdaptor`` makes one of any RNNCell and
``TimeReversedFusedRNN`` runs one backwards in time, the usual way to build a fused bidirectional LSTM:

    fw = tf.contrib.rnn.LSTMBlockFusedCell(128)
    bw = tf.contrib.rnn.TimeReversedFusedRNN(tf.contrib.rnn.LSTMBlockFusedCell(128, name="bw"))
    fw_out, _ = fw(inputs, dtype=tf.float32, sequence_length=lengths)
    bw_out, _ = bw(inputs, dtype=tf.float32, sequence_length=lengths)
"""

from __future__ import annotations

import abc

from trainer.array_ops import reverse, reverse_sequence, stack, unstack
from trainer.rnn import dynamic_rnn, static_rnn

__all__ = ["FusedRNNCell", "FusedRNNCellAdaptor", "TimeReversedFusedRNN"]


class FusedRNNCell(abc.ABC):
    """The base of cells that run the whole sequence in one call (the signature above)."""

    @abc.abstractmethod
    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
        """(outputs [time, batch, output] or a list of ``time`` of them, matching ``inputs``; final state)."""


class FusedRNNCellAdaptor(FusedRNNCell):
    """An RNNCell as a FusedRNNCell: ``dynamic_rnn`` (time-major) with ``use_dynamic_rnn``, else ``static_rnn``."""

    def __init__(self, cell, use_dynamic_rnn: bool = False):
        self._cell = cell
        self._use_dynamic_rnn = bool(use_dynamic_rnn)

    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
        is_list = isinstance(inputs, list)
        if self._use_dynamic_rnn:
            outputs, state = dynamic_rnn(self._cell, stack(inputs) if is_list else inputs,
                                         sequence_length=sequence_length, initial_state=initial_state, dtype=dtype,
                                         time_major=True, scope=scope)
            return (unstack(outputs) if is_list else outputs), state
        outputs, state = static_rnn(self._cell, inputs if is_list else unstack(inputs), initial_state=initial_state,
                                    dtype=dtype, sequence_length=sequence_length, scope=scope)
        return (outputs if is_list else stack(outputs)), state


class TimeReversedFusedRNN(FusedRNNCell):
    """``cell`` run backwards in time: its inputs reversed (each example's first ``sequence_length``
    steps where given), its outputs reversed back, so output t reads steps t and later. As in TF, a
    list of steps is reversed whole, whatever ``sequence_length`` says."""

    def __init__(self, cell):
        self._cell = cell

    @staticmethod
    def _reverse(t, lengths):
        if isinstance(t, list):
            return list(reversed(t))
        return reverse(t, [0]) if lengths is None else reverse_sequence(t, lengths, seq_axis=0, batch_axis=1)

    def __call__(self, inputs, initial_state=None, dtype=None, sequence_length=None, scope=None):
        outputs, state = self._cell(self._reverse(inputs, sequence_length), initial_state=initial_state, dtype=dtype,
                                    sequence_length=sequence_length, scope=scope)
        return self._reverse(outputs, sequence_length), state
