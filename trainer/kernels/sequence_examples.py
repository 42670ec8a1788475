"""The ParseSequenceExample kernel (schemas/ops/sequence_examples.py): each serialized
``tf.train.SequenceExample`` decoded once, then every context feature and feature list gathered
across the batch, failing with TensorFlow's words and the trainer's InvalidArgumentError."""

from __future__ import annotations

import json

import numpy as np

from edge_runtime.kernels import kernel
from schemas.ops.data import SPARSE
from trainer.kernels.debugging import InvalidArgumentError
from trainer.parsing import FEATURE_LISTS

__all__: list[str] = []

D = "flowstack"


def _values(feature, key: str, dtype: str) -> np.ndarray:
    kind = FEATURE_LISTS[dtype]
    present = feature.WhichOneof("kind")
    if present is not None and present != kind:
        raise InvalidArgumentError(f"Key: {key}. Data types don't match. Expected type: {dtype}, actual: {present}")
    return np.asarray(list(getattr(feature, kind).value) if present else [],
                      dtype=object if dtype == "object" else dtype)


def _fixed(features, key: str, dtype: str, shape: tuple, default: np.ndarray) -> np.ndarray:
    if key not in features:
        if default.size:
            return _bytes(default).reshape(shape)
        raise InvalidArgumentError(f"Feature: {key} (data type: {dtype}) is required but could not be found.")
    values = _values(features[key], key, dtype)
    if values.size != int(np.prod(shape)):
        raise InvalidArgumentError(f"Key: {key}. Can't parse serialized SequenceExample: expected {int(np.prod(shape))}"
                                   f" values (shape {list(shape)}), got {values.size}")
    return values.reshape(shape)


def _bytes(values: np.ndarray) -> np.ndarray:
    """A string default as TensorFlow's bytes (a graph constant may hold ``str``)."""
    if values.dtype != object:
        return values
    out = np.empty(values.shape, object)
    out.reshape(-1)[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in values.reshape(-1).tolist()]
    return out


def _steps(feature_lists, key: str, dtype: str, shape: tuple, allow_missing: bool) -> np.ndarray:
    if key not in feature_lists:
        if allow_missing:
            return np.zeros((0,) + shape, object if dtype == "object" else dtype)
        raise InvalidArgumentError(f"Feature list '{key}' is required but could not be found. Did you mean to "
                                   f"pass allow_missing=True?")
    per = int(np.prod(shape))
    rows = []
    for t, feature in enumerate(feature_lists[key].feature):
        values = _values(feature, key, dtype)
        if values.size != per:
            raise InvalidArgumentError(f"Key: {key}, Index: {t}. Number of values ({values.size}) does not match "
                                       f"the shape {list(shape)}")
        rows.append(values.reshape(shape))
    return np.stack(rows) if rows else np.zeros((0,) + shape, object if dtype == "object" else dtype)


def _sparse(lists: list[list[np.ndarray]], dtype: str, batched: bool):
    """``lists[b][t]``: the values of record b's step t, as the indices ``(b, t, j)`` (no ``b``
    for a single record), values and dense_shape of a SparseTensor."""
    indices, values = [], []
    for b, record in enumerate(lists):
        for t, v in enumerate(record):
            indices += [((b,) if batched else ()) + (t, j) for j in range(len(v))]
            values += v.tolist()
    out_values = np.empty(len(values), object) if dtype == "object" else np.asarray(values, dtype)
    if dtype == "object":
        out_values[:] = values
    steps = max((len(record) for record in lists), default=0)
    inner = max((len(v) for record in lists for v in record), default=0)
    dense_shape = ((len(lists),) if batched else ()) + (steps, inner)
    return np.asarray(indices, np.int64).reshape(-1, 2 + int(batched)), out_values, np.asarray(dense_shape, np.int64)


@kernel("ParseSequenceExample", domain=D)
def parse_sequence_example(serialized, *defaults, xp, context_keys, context_dtypes, context_shapes, context_kinds,
                           sequence_keys, sequence_dtypes, sequence_shapes, sequence_kinds, sequence_allow_missing,
                           num_outputs):
    from google.protobuf.message import DecodeError

    from trainer.example_proto import SequenceExample

    batched = np.ndim(serialized) == 1
    records = []
    for i, record in enumerate(np.asarray(serialized, dtype=object).reshape(-1)):
        try:
            records.append(SequenceExample.FromString(record.encode() if isinstance(record, str) else bytes(record)))
        except (DecodeError, TypeError) as e:
            raise InvalidArgumentError(f"Could not parse sequence example input, value {i}: not a serialized "
                                       f"tf.train.SequenceExample ({type(e).__name__})") from None
    outputs: list = []
    context_defaults, sequence_defaults = defaults[:len(context_keys)], defaults[len(context_keys):]
    for key, dtype, shape, kind, default in zip(context_keys, context_dtypes, json.loads(context_shapes),
                                                context_kinds, context_defaults):
        shape = tuple(shape)
        if kind == SPARSE:
            listed = [[_values(r.context.feature[key], key, dtype)] if key in r.context.feature else [np.zeros(0)]
                      for r in records]
            indices, values, dense_shape = _sparse(listed, dtype, batched)
            outputs += [indices[:, [c for c in range(indices.shape[1]) if c != int(batched)]], values,
                        np.delete(dense_shape, int(batched))]
            continue
        stacked = np.stack([_fixed(r.context.feature, key, dtype, shape, default) for r in records])
        outputs.append(stacked if batched else stacked[0])
    for key, dtype, shape, kind, allow, default in zip(sequence_keys, sequence_dtypes, json.loads(sequence_shapes),
                                                      sequence_kinds, sequence_allow_missing, sequence_defaults):
        shape = tuple(shape)
        lists = [r.feature_lists.feature_list for r in records]
        if kind == SPARSE:
            per_record = [[_values(f, key, dtype) for f in fl[key].feature] if key in fl else [] for fl in lists]
            outputs += list(_sparse(per_record, dtype, batched))
            continue
        steps = [_steps(fl, key, dtype, shape, bool(allow)) for fl in lists]
        longest = max((len(s) for s in steps), default=0)
        fill = _bytes(default).reshape(()) if default.size else np.zeros((), object if dtype == "object" else dtype)
        if dtype == "object" and not default.size:
            fill = np.array(b"", dtype=object)
        padded = [np.concatenate([s, np.full((longest - len(s),) + shape, fill, s.dtype)]) for s in steps]
        lengths = np.asarray([len(s) for s in steps], np.int64)
        outputs += [np.stack(padded), lengths] if batched else [padded[0], lengths[0]]
    return tuple(outputs)
