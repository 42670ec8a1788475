"""``tf.contrib.seq2seq``: ``sequence_loss``, the loss of TF1's language-model and seq2seq tutorials,
and the decoders, helpers and attention of its neural machine translation scripts (defined in the
``seq2seq_*`` modules beside this one)."""

from __future__ import annotations

import numpy as np

from trainer.array_ops import count_nonzero, div_no_nan, reduce_sum
from trainer.contrib.seq2seq_attention import AttentionMechanism, AttentionWrapper, AttentionWrapperState, \
    BahdanauAttention, LuongAttention, hardmax, safe_cumprod
from trainer.contrib.seq2seq_beam_search import BeamSearchDecoder, BeamSearchDecoderOutput, BeamSearchDecoderState, \
    FinalBeamSearchDecoderOutput, gather_tree, tile_batch
from trainer.contrib.seq2seq_decoders import BaseDecoder, BasicDecoder, BasicDecoderOutput, Decoder, dynamic_decode
from trainer.contrib.seq2seq_helpers import CustomHelper, GreedyEmbeddingHelper, Helper, InferenceHelper, \
    SampleEmbeddingHelper, ScheduledEmbeddingTrainingHelper, ScheduledOutputTrainingHelper, TrainingHelper
from trainer.contrib.seq2seq_monotonic import BahdanauMonotonicAttention, LuongMonotonicAttention, \
    monotonic_attention
from trainer.ops import cast, concat, convert_to_tensor, gather, reshape, shape

__all__ = ["AttentionMechanism", "AttentionWrapper", "AttentionWrapperState", "BahdanauAttention",
           "BahdanauMonotonicAttention", "BaseDecoder", "BasicDecoder", "BasicDecoderOutput", "BeamSearchDecoder",
           "BeamSearchDecoderOutput", "BeamSearchDecoderState", "CustomHelper", "Decoder",
           "FinalBeamSearchDecoderOutput", "GreedyEmbeddingHelper", "Helper", "InferenceHelper", "LuongAttention",
           "LuongMonotonicAttention", "SampleEmbeddingHelper", "ScheduledEmbeddingTrainingHelper",
           "ScheduledOutputTrainingHelper", "TrainingHelper", "dynamic_decode", "gather_tree", "hardmax",
           "monotonic_attention", "safe_cumprod", "sequence_loss", "tile_batch"]


def sequence_loss(logits, targets, weights, average_across_timesteps: bool = True, average_across_batch: bool = True,
                  sum_over_timesteps: bool = False, sum_over_batch: bool = False, softmax_loss_function=None,
                  name=None):
    """Weighted cross-entropy of ``logits`` [batch, time, classes] against ``targets`` [batch, time],
    reduced as TensorFlow's: averaging divides by the summed weights, summing by the number of
    non-zero weights, over batch and/or time (not both averaged and summed over one axis)."""
    from trainer.nn import sparse_softmax_cross_entropy_with_logits

    if average_across_timesteps and sum_over_timesteps:
        raise ValueError("average_across_timesteps and sum_over_timesteps cannot be set to True at same time.")
    if average_across_batch and sum_over_batch:
        raise ValueError("average_across_batch and sum_over_batch cannot be set to True at same time.")
    logits, targets = convert_to_tensor(logits), convert_to_tensor(targets)
    if logits.shape is not None and len(logits.shape) != 3:
        raise ValueError(f"sequence_loss: logits must be [batch, time, classes], got shape {logits.shape}")
    weights = cast(convert_to_tensor(weights), logits.dtype)
    flat_logits = reshape(logits, concat([np.array([-1], np.int64), gather(shape(logits), [2])], 0))
    flat_targets = reshape(targets, [-1])
    loss_fn = softmax_loss_function or sparse_softmax_cross_entropy_with_logits
    crossent = reshape(loss_fn(labels=flat_targets, logits=flat_logits), [-1]) * reshape(weights, [-1])
    if average_across_timesteps and average_across_batch:
        return div_no_nan(reduce_sum(crossent), reduce_sum(weights), name=name)
    if sum_over_timesteps and sum_over_batch:
        return div_no_nan(reduce_sum(crossent), cast(count_nonzero(weights), logits.dtype), name=name)
    crossent = reshape(crossent, gather(shape(logits), [0, 1]))
    if average_across_timesteps or average_across_batch:
        axis = [0] if average_across_batch else [1]
        return div_no_nan(reduce_sum(crossent, axis=axis), reduce_sum(weights, axis=axis), name=name)
    if sum_over_timesteps or sum_over_batch:
        axis = [0] if sum_over_batch else [1]
        return div_no_nan(reduce_sum(crossent, axis=axis), cast(count_nonzero(weights, axis=axis), logits.dtype),
                          name=name)
    return crossent
