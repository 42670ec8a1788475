"""Forward kernels of the data family's stateless ops (schemas/ops/data.py): ParseExample, decoding
serialized tf.train.Example records with the runtime's own wire decoder (edge_runtime/example_records.py),
so a served model can take records as its input. The family's stateful ops (iterators, readers)
run in the trainer (trainer/kernels/data.py).

Errors (``RecordError``, a ValueError: bad input) use TensorFlow's words and name the feature key
and the record's index in the batch.
"""

from __future__ import annotations

import json
import math

import numpy as np

from edge_runtime.example_records import FEATURE_LISTS, ExampleFormatError, RecordError, decode_example
from edge_runtime.kernels.registry import kernel
from schemas.ops.data import SEQUENCE, SPARSE

__all__: list[str] = []

D = "flowstack"


def _record_bytes(record, index: int) -> bytes:
    if isinstance(record, str):
        return record.encode("utf-8")
    if isinstance(record, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(record)
    raise RecordError(f"Could not parse example input, value {index}: expected a serialized tf.train.Example "
                      f"(bytes), got {type(record).__name__}")


def decode_records(records: np.ndarray) -> list[dict]:
    """Each record of a string array decoded, an error naming the first bad one's index."""
    decoded = []
    for i, record in enumerate(records.reshape(-1).tolist()):
        try:
            decoded.append(decode_example(_record_bytes(record, i)))
        except ExampleFormatError as e:
            raise RecordError(f"Could not parse example input, value {i}: not a serialized tf.train.Example "
                              f"({e})") from None
    return decoded


@kernel("ParseExample", domain=D)
def parse_example(serialized, *defaults, xp, keys, dtypes, shapes, kinds, num_outputs):
    """Decode each record once, then gather every feature across the batch."""
    records = np.asarray(serialized, dtype=object)
    parsed = decode_records(records)
    outputs = []
    for key, dtype, shape, kind, default in zip(keys, dtypes, json.loads(shapes), kinds, defaults):
        shape, default = tuple(shape), np.asarray(default)
        listed = [_listed(features, key, dtype, i) for i, features in enumerate(parsed)]
        if kind == SPARSE:
            outputs.extend(_sparse(records.shape, listed, dtype))
            continue
        per = math.prod(shape)
        values = [_dense(v, key, dtype, shape, per, kind == SEQUENCE, default, i) for i, v in enumerate(listed)]
        if kind == SEQUENCE:
            longest = max((len(v) for v in values), default=0)
            fill = default.reshape(()) if default.size else np.zeros((), dtype)
            values = [np.concatenate([v, np.full((longest - len(v),) + shape, fill, dtype)]) for v in values]
        stacked = np.stack(values) if values else np.zeros((0,) + shape, dtype)
        outputs.append(stacked.reshape(records.shape + stacked.shape[1:]))
    return tuple(outputs)


def _listed(features: dict, key: str, dtype: str, index: int) -> np.ndarray | None:
    """The values record ``index`` lists under ``key`` (None where it lacks the key)."""
    feature = features.get(key)
    if feature is None:
        return None
    if feature.kind is not None and feature.kind != FEATURE_LISTS[dtype]:
        raise RecordError(f"Key: {key}. Data types don't match. Expected type: {dtype}, actual: {feature.kind} "
                          f"(example {index})")
    values = feature.values
    if dtype == "object":
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out
    return np.asarray(values, dtype=dtype)


def _dense(values, key: str, dtype: str, shape: tuple, per: int, is_sequence: bool, default: np.ndarray,
           index: int) -> np.ndarray:
    if values is None:
        if is_sequence:
            return np.zeros((0,) + shape, dtype)
        if default.size:
            return default
        raise RecordError(f"Feature: {key} (data type: {dtype}) is required but could not be found "
                          f"(example {index}).")
    if is_sequence:
        if per and values.size % per:
            raise RecordError(f"Key: {key}. Number of values ({values.size}) is not a multiple of the element size "
                              f"{per} (shape {list(shape)}, example {index})")
        return values.reshape((-1,) + shape)
    if values.size != per:
        raise RecordError(f"Key: {key}. Can't parse serialized Example: expected {per} values (shape "
                          f"{list(shape)}), got {values.size} (example {index})")
    return values.reshape(shape)


def _sparse(batch_shape: tuple, listed: list, dtype: str):
    """A VarLenFeature: record r's j-th value at index (*unravel(r), j); dense shape (*batch, longest)."""
    lengths = [0 if v is None else v.size for v in listed]
    rows = np.repeat(np.arange(len(listed)), lengths)
    positions = np.concatenate([np.arange(n) for n in lengths]) if rows.size else np.zeros(0, np.int64)
    batch_index = (np.stack(np.unravel_index(rows, batch_shape), axis=1) if batch_shape
                   else np.zeros((rows.size, 0), np.int64))
    indices = np.concatenate([batch_index, positions[:, None]], axis=1).astype(np.int64)
    kept = [v for v in listed if v is not None and v.size]
    values = np.concatenate(kept) if kept else np.zeros(0, object if dtype == "object" else dtype)
    dense_shape = np.asarray(tuple(batch_shape) + (max(lengths, default=0),), np.int64)
    return indices, values, dense_shape
