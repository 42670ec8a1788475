"""TensorFlow 1.15's connectionist temporal classification: ``tf.nn.ctc_loss`` (with its gradient)
and ``tf.nn.ctc_greedy_decoder``, over the flowstack-domain CTCLoss and CTCGreedyDecoder ops.
Labels are SparseTensors and class ``num_classes - 1`` is the blank, as in TF1."""

from __future__ import annotations

import numpy as np

from trainer.array_ops import boolean_mask, expand_dims, not_equal, range as arange, reduce_max, reduce_sum, \
    scatter_nd, sequence_mask
from trainer.graph import TRAINER_DOMAIN, Tensor
from trainer.ops import cast, concat, constant, convert_to_tensor, make_op, ones_like, reshape, shape
from trainer.sparse_tensor import SparseTensor

__all__ = ["collapse_repeated", "ctc_beam_search_decoder", "ctc_greedy_decoder", "ctc_loss"]


def _time_major(x: Tensor, time_major: bool, op: str) -> Tensor:
    if x.shape is None or len(x.shape) != 3:
        raise ValueError(f"{op}: inputs must be rank 3 ([max_time, batch, classes] or batch major), got {x.shape}")
    return x if time_major else make_op("Transpose", [x], {"perm": [1, 0, 2]}).outputs[0]


def ctc_loss(labels, inputs=None, sequence_length=None, preprocess_collapse_repeated: bool = False,
             ctc_merge_repeated: bool = True, ignore_longer_outputs_than_inputs: bool = False,
             time_major: bool = True, logits=None) -> Tensor:
    """TF1's ``tf.nn.ctc_loss``: the per-example negative log-likelihood [batch] of the sparse
    ``labels`` given unnormalized ``inputs`` [max_time, batch, num_classes] (batch major with
    ``time_major=False``), each example ``sequence_length`` frames long."""
    if not isinstance(labels, SparseTensor):
        raise TypeError("Expected labels (first argument) to be a SparseTensor")
    x = convert_to_tensor(inputs if inputs is not None else logits)
    if sequence_length is None:
        raise ValueError("ctc_loss: sequence_length is required")
    attrs = {"preprocess_collapse_repeated": int(preprocess_collapse_repeated),
             "ctc_merge_repeated": int(ctc_merge_repeated),
             "ignore_longer_outputs_than_inputs": int(ignore_longer_outputs_than_inputs)}
    node = make_op("CTCLoss", [_time_major(x, time_major, "ctc_loss"), labels.indices, cast(labels.values, np.int64),
                               cast(convert_to_tensor(sequence_length), np.int64)], attrs, domain=TRAINER_DOMAIN)
    return node.outputs[0]


def ctc_greedy_decoder(inputs, sequence_length, merge_repeated: bool = True):
    """TF1's ``tf.nn.ctc_greedy_decoder``: ``([decoded], neg_sum_logits)``, ``decoded`` a
    SparseTensor [batch, longest decoding] of each frame's best class, repeats merged (with
    ``merge_repeated``) and blanks removed; ``neg_sum_logits`` [batch, 1] is minus the sum of each
    frame's largest logit."""
    x = _time_major(convert_to_tensor(inputs), True, "ctc_greedy_decoder")
    node = make_op("CTCGreedyDecoder", [x, cast(convert_to_tensor(sequence_length), np.int64)],
                   {"merge_repeated": int(merge_repeated)}, domain=TRAINER_DOMAIN, num_outputs=4)
    indices, values, shape, log_probability = node.outputs
    return [SparseTensor(indices, values, shape)], log_probability


def collapse_repeated(labels, seq_length, name=None):
    """TF1's ``tf.nn.collapse_repeated``: each row of ``labels`` [batch, max_time] (its first
    ``seq_length`` entries) with runs of a repeated label merged into one, left-aligned and
    zero-padded to the longest result, and the new lengths; composed as TF's ctc_ops.py does."""
    labels, seq_length = convert_to_tensor(labels), convert_to_tensor(seq_length)
    if labels.shape is None or len(labels.shape) != 2:
        raise ValueError(f"collapse_repeated: labels must be rank 2 [batch, max_time], got shape {labels.shape}")
    starts = concat([cast(ones_like(labels[:, :1]), np.bool_), not_equal(labels[:, 1:], labels[:, :-1])], 1)
    keep = make_op("And", [starts, sequence_mask(seq_length, maxlen=shape(labels)[1])]).outputs[0]
    new_length = reduce_sum(cast(keep, np.int32), axis=1)
    new_max = reduce_max(new_length)
    slots = reshape(sequence_mask(new_length, maxlen=new_max), [-1])
    flat = scatter_nd(expand_dims(boolean_mask(arange(0, shape(slots)[0]), slots), 1),
                      boolean_mask(reshape(labels, [-1]), reshape(keep, [-1])), shape(slots))
    collapsed = reshape(flat, concat([shape(labels)[:1], reshape(cast(new_max, np.int64), [1])], 0))
    return make_op("Identity", [collapsed], name=name).outputs[0], cast(new_length, seq_length.dtype)


def ctc_beam_search_decoder(inputs, sequence_length, beam_width: int = 100, top_paths: int = 1,
                            merge_repeated: bool = True):
    """TF1's ``tf.nn.ctc_beam_search_decoder``: ``(decoded, log_probability)``, ``decoded`` a list of
    ``top_paths`` SparseTensors [batch, longest], the most likely labelings by prefix beam search
    (best first), ``log_probability`` [batch, top_paths] their log-probabilities."""
    x = _time_major(convert_to_tensor(inputs), True, "ctc_beam_search_decoder")
    node = make_op("CTCBeamSearchDecoder", [x, cast(convert_to_tensor(sequence_length), np.int64)],
                   {"beam_width": int(beam_width), "top_paths": int(top_paths), "merge_repeated": int(merge_repeated)},
                   domain=TRAINER_DOMAIN, num_outputs=4)
    indices, values, shapes, log_probability = node.outputs
    decoded = []
    for p in range(int(top_paths)):
        mine = make_op("Equal", [indices[:, 0], constant(np.asarray(p, np.int64))]).outputs[0]
        decoded.append(SparseTensor(boolean_mask(indices[:, 1:], mine), boolean_mask(values, mine), shapes[p]))
    return decoded, log_probability
