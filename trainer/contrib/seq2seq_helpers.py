"""``tf.contrib.seq2seq``'s helpers: what a ``BasicDecoder`` feeds its cell at each step and when an
example is finished, as TensorFlow 1.15's.

``TrainingHelper`` feeds the ground-truth inputs (teacher forcing) and finishes each example at its
``sequence_length``; ``GreedyEmbeddingHelper`` feeds the embedding of the argmax of the last
output and finishes at ``end_token``; ``SampleEmbeddingHelper`` samples the next id from the
output logits instead; ``ScheduledEmbeddingTrainingHelper`` and ``ScheduledOutputTrainingHelper``
mix the ground truth with fed-back predictions (scheduled sampling);
``CustomHelper`` and ``InferenceHelper`` are built from the caller's functions. Times are int32
scalars, sample ids int32 [batch].
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import argmax, expand_dims, fill, greater_equal, reduce_all, size, stack, truediv, \
    zeros_like
from trainer.embedding import embedding_lookup
from trainer.graph import Tensor
from trainer.ops import cast, concat, constant, convert_to_tensor, equal, gather, greater, less, log, maximum, \
    minimum, negative, shape, subtract, where
from trainer.random_ops import random_uniform
from trainer.rnn import transpose_batch_time
from trainer.tensor_shape import TensorShape

__all__ = ["CustomHelper", "GreedyEmbeddingHelper", "Helper", "InferenceHelper", "SampleEmbeddingHelper",
           "ScheduledEmbeddingTrainingHelper", "ScheduledOutputTrainingHelper", "TrainingHelper", "batch_size_of",
           "filled_rows", "sample_categorical", "select_rows"]


def batch_size_of(t: Tensor):
    """The first dimension of ``t``: a Python int when static, else an int32 scalar tensor."""
    if t.shape is not None and t.shape[0] is not None:
        return int(t.shape[0])
    return cast(gather(shape(t), constant(np.asarray(0, np.int64))), np.int32)


def select_rows(condition: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """TF1's ``where`` with a [batch] (or [batch, beam]) condition: row b of ``x`` where
    condition[b], else of ``y``."""
    rank = len(x.shape) if x.shape is not None else 1
    mask = condition
    for _ in range(rank - len(condition.shape)):
        mask = expand_dims(mask, -1)
    return where(mask, x, y)


def filled_rows(batch_size, dims, value) -> Tensor:
    """A [batch_size, *dims] tensor of ``value`` (a NumPy scalar); ``batch_size`` an int or a tensor."""
    if isinstance(batch_size, (int, np.integer)):
        return constant(np.full([int(batch_size)] + list(dims), value))
    shape_t = concat([stack([cast(convert_to_tensor(batch_size), np.int64)]),
                      constant(np.asarray(list(dims), np.int64).reshape(-1))], 0)
    return fill(shape_t, value)


class Helper:
    """The interface a ``BasicDecoder`` drives: ``initialize() -> (finished, next_inputs)``,
    ``sample(time, outputs, state) -> sample_ids`` and ``next_inputs(time, outputs, state, sample_ids)
    -> (finished, next_inputs, next_state)``."""

    @property
    def batch_size(self):
        raise NotImplementedError

    @property
    def sample_ids_shape(self) -> TensorShape:
        return TensorShape([])

    @property
    def sample_ids_dtype(self):
        return np.dtype(np.int32)

    def initialize(self, name=None):
        raise NotImplementedError

    def sample(self, time, outputs, state, name=None):
        raise NotImplementedError

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        raise NotImplementedError


def _argmax_ids(outputs) -> Tensor:
    outputs = convert_to_tensor(outputs)
    return argmax(outputs, axis=-1 if outputs.shape is None else len(outputs.shape) - 1, output_type=np.int32)


class TrainingHelper(Helper):
    """Reads ``inputs`` [batch, time, depth] (``time_major``: [time, batch, depth]) step by step;
    example b is finished once ``time + 1 >= sequence_length[b]``."""

    def __init__(self, inputs, sequence_length, time_major: bool = False, name=None):
        inputs = convert_to_tensor(inputs)
        if inputs.shape is None or len(inputs.shape) < 3:
            raise ValueError(f"TrainingHelper: inputs must be at least rank 3 ([batch, time, depth]), got shape "
                             f"{inputs.shape}")
        self._inputs = inputs if time_major else transpose_batch_time(inputs)  # [time, batch, ...]
        lengths = convert_to_tensor(sequence_length)
        if lengths.shape is not None and len(lengths.shape) != 1:
            raise ValueError(f"TrainingHelper: expected sequence_length to be a vector, but received shape: "
                             f"{lengths.shape}")
        batch = self._inputs.shape[1]
        if batch is not None and lengths.shape is not None and lengths.shape[0] not in (None, batch):
            raise ValueError(f"TrainingHelper: sequence_length has {lengths.shape[0]} entries but inputs have a "
                             f"batch of {batch}")
        self._sequence_length = cast(lengths, np.int32)
        self._first = gather(self._inputs, constant(np.asarray(0, np.int64)))
        self._zero_inputs = zeros_like(self._first)
        self._last_time = subtract(cast(gather(shape(self._inputs), constant(np.asarray(0, np.int64))), np.int32),
                                   np.int32(1))
        self._batch_size = batch if batch is not None else size(self._sequence_length, out_type=np.int32)

    @property
    def inputs(self) -> Tensor:
        return self._inputs

    @property
    def sequence_length(self) -> Tensor:
        return self._sequence_length

    @property
    def batch_size(self):
        return self._batch_size

    def _inputs_at(self, time, finished) -> Tensor:
        """The inputs of step ``time``, or zeros once every example is finished (the read is clamped,
        so a step past the last one reads nothing out of range)."""
        step = gather(self._inputs, cast(minimum(time, self._last_time), np.int64))
        return where(reduce_all(finished), self._zero_inputs, step)

    def initialize(self, name=None):
        finished = equal(np.int32(0), self._sequence_length)
        return finished, self._inputs_at(constant(np.int32(0)), finished)

    def sample(self, time, outputs, state, name=None):
        return _argmax_ids(outputs)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        next_time = convert_to_tensor(time) + np.int32(1)
        finished = greater_equal(next_time, self._sequence_length)
        return finished, self._inputs_at(next_time, finished), state


class GreedyEmbeddingHelper(Helper):
    """Feeds ``embedding(argmax(outputs))``; an example is finished when it emits ``end_token``.
    ``embedding`` is a [vocab, depth] matrix (looked up) or a callable on ids."""

    def __init__(self, embedding, start_tokens, end_token):
        if callable(embedding):
            self._embedding_fn = embedding
        else:
            table = convert_to_tensor(embedding)
            self._embedding_fn = lambda ids: embedding_lookup(table, ids)
        self._start_tokens = cast(convert_to_tensor(start_tokens), np.int32)
        self._end_token = cast(convert_to_tensor(end_token), np.int32)
        if self._start_tokens.shape is None or len(self._start_tokens.shape) != 1:
            raise ValueError(f"{type(self).__name__}: start_tokens must be a vector, got shape "
                             f"{self._start_tokens.shape}")
        if self._end_token.shape is None or len(self._end_token.shape) != 0:
            raise ValueError(f"{type(self).__name__}: end_token must be a scalar, got shape {self._end_token.shape}")
        batch = self._start_tokens.shape[0]
        self._batch_size = batch if batch is not None else size(self._start_tokens, out_type=np.int32)
        self._start_inputs = self._embedding_fn(self._start_tokens)

    @property
    def batch_size(self):
        return self._batch_size

    def initialize(self, name=None):
        return filled_rows(self._batch_size, [], np.bool_(False)), self._start_inputs

    def sample(self, time, outputs, state, name=None):
        if not isinstance(outputs, Tensor):
            raise TypeError(f"{type(self).__name__}: expected outputs to be a single Tensor, got {type(outputs)}")
        return _argmax_ids(outputs)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        finished = equal(sample_ids, self._end_token)
        next_inputs = where(reduce_all(finished), self._start_inputs, self._embedding_fn(sample_ids))
        return finished, next_inputs, state


def sample_categorical(logits: Tensor, seed) -> Tensor:
    """One int32 id per row of ``logits`` [batch, classes], drawn from softmax(logits) (Gumbel-max)."""
    u = random_uniform(shape(logits), minval=np.finfo(np.float32).tiny, maxval=1.0, dtype=logits.dtype, seed=seed)
    return _argmax_ids(logits + negative(log(negative(log(u)))))


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """As ``GreedyEmbeddingHelper``, but the next id is drawn from softmax(outputs /
    ``softmax_temperature``) (Gumbel-max sampling, seeded by ``seed``)."""

    def __init__(self, embedding, start_tokens, end_token, softmax_temperature=None, seed=None):
        super().__init__(embedding, start_tokens, end_token)
        self._temperature = softmax_temperature
        self._seed = seed

    def sample(self, time, outputs, state, name=None):
        if not isinstance(outputs, Tensor):
            raise TypeError(f"SampleEmbeddingHelper: expected outputs to be a single Tensor, got {type(outputs)}")
        logits = outputs if self._temperature is None else truediv(outputs, self._temperature)
        return sample_categorical(logits, self._seed)


class ScheduledEmbeddingTrainingHelper(TrainingHelper):
    """Scheduled sampling (Bengio et al. 2015): each example's next input is, with probability
    ``sampling_probability``, the embedding of an id sampled from the outputs, else the ground
    truth; ``sample`` returns -1 for the examples that read the ground truth."""

    def __init__(self, inputs, sequence_length, embedding, sampling_probability, time_major: bool = False,
                 seed=None, scheduling_seed=None, name=None):
        super().__init__(inputs, sequence_length, time_major, name)
        if callable(embedding):
            self._embedding_fn = embedding
        else:
            table = convert_to_tensor(embedding)
            self._embedding_fn = lambda ids: embedding_lookup(table, ids)
        self._sampling_probability = _sampling_probability(sampling_probability, "ScheduledEmbeddingTrainingHelper")
        self._seed, self._scheduling_seed = seed, scheduling_seed

    def sample(self, time, outputs, state, name=None):
        outputs = convert_to_tensor(outputs)
        rows = filled_rows(self.batch_size, [], np.zeros((), outputs.dtype))
        draw = random_uniform(shape(rows), dtype=outputs.dtype, seed=self._scheduling_seed)
        chosen = less(draw, cast(self._sampling_probability, outputs.dtype))
        return where(chosen, sample_categorical(outputs, self._seed), filled_rows(self.batch_size, [], np.int32(-1)))

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        finished, base_inputs, state = super().next_inputs(time, outputs, state, sample_ids)
        sampled = greater(sample_ids, np.int32(-1))
        mixed = select_rows(sampled, self._embedding_fn(maximum(sample_ids, np.int32(0))), base_inputs)
        return finished, where(reduce_all(finished), base_inputs, mixed), state


def _sampling_probability(value, what: str) -> Tensor:
    probability = convert_to_tensor(value)
    if probability.shape is None or len(probability.shape) not in (0, 1):
        raise ValueError(f"{what}: sampling_probability must be either a scalar or a vector, saw shape: "
                         f"{probability.shape}")
    return probability


class ScheduledOutputTrainingHelper(TrainingHelper):
    """Scheduled sampling on the outputs themselves: each example's next input is, with
    probability ``sampling_probability``, its last output (through ``next_inputs_fn`` when given,
    followed by the step's ``auxiliary_inputs``), else the ground truth. ``sample`` returns
    whether each example sampled (bool)."""

    def __init__(self, inputs, sequence_length, sampling_probability, time_major: bool = False, seed=None,
                 next_inputs_fn=None, auxiliary_inputs=None, name=None):
        self._sampling_probability = _sampling_probability(sampling_probability, "ScheduledOutputTrainingHelper")
        self._auxiliary = None
        if auxiliary_inputs is not None:
            inputs, auxiliary = convert_to_tensor(inputs), convert_to_tensor(auxiliary_inputs)
            inputs = concat([inputs, auxiliary], -1)
            self._auxiliary = auxiliary if time_major else transpose_batch_time(auxiliary)
        super().__init__(inputs, sequence_length, time_major, name)
        self._seed, self._next_inputs_fn = seed, next_inputs_fn

    @property
    def sample_ids_dtype(self):
        return np.dtype(np.bool_)

    def sample(self, time, outputs, state, name=None):
        outputs = convert_to_tensor(outputs)
        rows = filled_rows(self.batch_size, [], np.zeros((), outputs.dtype))
        draw = random_uniform(shape(rows), dtype=outputs.dtype, seed=self._seed)
        return less(draw, cast(self._sampling_probability, outputs.dtype))

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        finished, base_inputs, state = super().next_inputs(time, outputs, state, sample_ids)
        fed_back = convert_to_tensor(outputs if self._next_inputs_fn is None else self._next_inputs_fn(outputs))
        if self._auxiliary is not None:
            next_time = convert_to_tensor(time) + np.int32(1)
            fed_back = concat([fed_back, gather(self._auxiliary, cast(minimum(next_time, self._last_time), np.int64))],
                              -1)
        mixed = select_rows(cast(sample_ids, np.bool_), fed_back, base_inputs)
        return finished, where(reduce_all(finished), base_inputs, mixed), state


class CustomHelper(Helper):
    """A helper from three functions: ``initialize_fn() -> (finished, next_inputs)``,
    ``sample_fn(time, outputs, state) -> sample_ids`` and ``next_inputs_fn(time, outputs, state,
    sample_ids) -> (finished, next_inputs, next_state)``."""

    def __init__(self, initialize_fn, sample_fn, next_inputs_fn, sample_ids_shape=None, sample_ids_dtype=None):
        for what, fn in (("initialize_fn", initialize_fn), ("sample_fn", sample_fn),
                         ("next_inputs_fn", next_inputs_fn)):
            if not callable(fn):
                raise TypeError(f"CustomHelper: {what} must be callable, got {fn!r}")
        self._initialize_fn, self._sample_fn, self._next_inputs_fn = initialize_fn, sample_fn, next_inputs_fn
        self._sample_ids_shape = TensorShape(sample_ids_shape or [])
        self._sample_ids_dtype = np.dtype(sample_ids_dtype or np.int32)
        self._batch_size = None

    @property
    def batch_size(self):
        if self._batch_size is None:
            raise ValueError("CustomHelper: batch_size is known only after initialize() is called")
        return self._batch_size

    @property
    def sample_ids_shape(self) -> TensorShape:
        return self._sample_ids_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_ids_dtype

    def initialize(self, name=None):
        finished, next_inputs = self._initialize_fn()
        finished = convert_to_tensor(finished)
        if self._batch_size is None:
            self._batch_size = batch_size_of(finished)
        return finished, next_inputs

    def sample(self, time, outputs, state, name=None):
        return self._sample_fn(time=time, outputs=outputs, state=state)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        return self._next_inputs_fn(time=time, outputs=outputs, state=state, sample_ids=sample_ids)


class InferenceHelper(Helper):
    """Feeds back ``sample_fn(outputs)`` (or ``next_inputs_fn`` of it) directly, with no embedding;
    an example is finished when ``end_fn(sample_ids)`` says so."""

    def __init__(self, sample_fn, sample_shape, sample_dtype, start_inputs, end_fn, next_inputs_fn=None):
        for what, fn in (("sample_fn", sample_fn), ("end_fn", end_fn)):
            if not callable(fn):
                raise TypeError(f"InferenceHelper: {what} must be callable, got {fn!r}")
        self._sample_fn, self._end_fn, self._next_inputs_fn = sample_fn, end_fn, next_inputs_fn
        self._sample_shape, self._sample_dtype = TensorShape(sample_shape), np.dtype(sample_dtype)
        self._start_inputs = convert_to_tensor(start_inputs)
        self._batch_size = batch_size_of(self._start_inputs)

    @property
    def batch_size(self):
        return self._batch_size

    @property
    def sample_ids_shape(self) -> TensorShape:
        return self._sample_shape

    @property
    def sample_ids_dtype(self):
        return self._sample_dtype

    def initialize(self, name=None):
        return filled_rows(self._batch_size, [], np.bool_(False)), self._start_inputs

    def sample(self, time, outputs, state, name=None):
        return self._sample_fn(outputs)

    def next_inputs(self, time, outputs, state, sample_ids, name=None):
        next_inputs = sample_ids if self._next_inputs_fn is None else self._next_inputs_fn(sample_ids)
        return self._end_fn(sample_ids), next_inputs, state
