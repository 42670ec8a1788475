"""Kernels of the input-pipeline ops (family ``data``: ``schemas/ops/data.py``): the stateful
iterator kernels and ParseExample's (in the trainer: it decodes protobuf, which the edge runtime
does not carry).

Each receives the run's ``RunContext`` first. An iterator is an ``IteratorState`` resource in
``rctx.state.resources`` under its handle's shared name; its dataset comes from the graph's
dataset table (trainer/data/iterator.py), with the values of the tensors it captured as inputs.
"""

from __future__ import annotations

import json

import numpy as np

from edge_runtime.kernels import kernel
from schemas.ops.data import SEQUENCE, SPARSE
from trainer.data.dataset import Dataset
from trainer.data.iterator import IteratorState, lookup_dataset
from trainer.kernels.debugging import InvalidArgumentError
from trainer.kernels.registry import stateful_kernel
from trainer.parsing import FEATURE_LISTS

__all__: list[str] = []

D = "flowstack"


def _handle(rctx, name: str) -> np.ndarray:
    resources = rctx.state.resources
    with rctx.state.lock:
        if name not in resources:
            resources[name] = IteratorState(name)
    out = np.empty((), dtype=object)
    out[()] = name
    return out


def _state(rctx, handle) -> IteratorState:
    return rctx.state.resources[str(handle[()])]


def _captured_values(dataset: Dataset, values) -> dict:
    return dict(zip(dataset.captured_tensors(), values))


@stateful_kernel("Iterator")
def iterator_handle(rctx, *, xp, shared_name, dataset):
    return _handle(rctx, shared_name)


@stateful_kernel("OneShotIterator")
def one_shot_iterator(rctx, *captured, xp, shared_name, dataset):
    with rctx.state.lock:
        fresh = shared_name not in rctx.state.resources
        handle = _handle(rctx, shared_name)
        if fresh:
            ds = lookup_dataset(rctx.session.graph, dataset, shared_name)
            _state(rctx, handle).start(ds, _captured_values(ds, captured))
    return handle


@stateful_kernel("MakeIterator")
def make_iterator(rctx, handle, *captured, xp, dataset):
    state = _state(rctx, handle)
    ds = lookup_dataset(rctx.session.graph, dataset, state.name)
    state.start(ds, _captured_values(ds, captured))


@stateful_kernel("IteratorGetNext")
def iterator_get_next(rctx, handle, *, xp, output_types, output_shapes):
    comps = _state(rctx, handle).next()
    return tuple(c if isinstance(c, np.ndarray) else np.asarray(c) for c in comps)


@kernel("ParseExample", domain=D)
def parse_example(serialized, *defaults, xp, keys, dtypes, shapes, kinds, num_outputs):
    """Decode each record once, then gather every feature across the batch (TensorFlow's error words)."""
    from google.protobuf.message import DecodeError

    from trainer.example_proto import Example

    records = np.asarray(serialized, dtype=object)
    parsed = []
    for i, record in enumerate(records.reshape(-1)):
        try:
            parsed.append(Example.FromString(record.encode() if isinstance(record, str) else bytes(record)).features.feature)
        except (DecodeError, TypeError) as e:
            raise InvalidArgumentError(f"Could not parse example input, value {i}: not a serialized tf.train.Example "
                                       f"({type(e).__name__})") from None
    outputs = []
    for key, dtype, shape, kind, default in zip(keys, dtypes, json.loads(shapes), kinds, defaults):
        shape = tuple(shape)
        if kind == SPARSE:
            outputs.extend(_sparse(records.shape, [_listed(f, key, dtype) for f in parsed], dtype))
            continue
        values = [_dense(features, key, dtype, shape, kind == SEQUENCE, default) for features in parsed]
        if kind == SEQUENCE:
            longest = max((len(v) for v in values), default=0)
            fill = default.reshape(()) if default.size else np.zeros((), dtype)
            values = [np.concatenate([v, np.full((longest - len(v),) + shape, fill, dtype)]) for v in values]
        stacked = np.stack(values) if values else np.zeros((0,) + shape, dtype)
        outputs.append(stacked.reshape(records.shape + stacked.shape[1:]))
    return tuple(outputs)


def _listed(features, key: str, dtype: str) -> np.ndarray | None:
    """The values a record lists under ``key`` (None where it lacks the key)."""
    if key not in features:
        return None
    kind = FEATURE_LISTS[dtype]
    present = features[key].WhichOneof("kind")
    if present is not None and present != kind:
        raise InvalidArgumentError(f"Key: {key}. Data types don't match. Expected type: {dtype}, actual: {present}")
    return np.asarray(list(getattr(features[key], kind).value) if present else [],
                      dtype=object if dtype == "object" else dtype)


def _dense(features, key: str, dtype: str, shape: tuple, is_sequence: bool, default) -> np.ndarray:
    values = _listed(features, key, dtype)
    if values is None:
        if is_sequence:
            return np.zeros((0,) + shape, dtype)
        if default.size:
            return default
        raise InvalidArgumentError(f"Feature: {key} (data type: {dtype}) is required but could not be found.")
    per = int(np.prod(shape))
    if is_sequence:
        if per and values.size % per:
            raise InvalidArgumentError(f"Key: {key}. Number of values ({values.size}) is not a multiple of the "
                                       f"element size {per} (shape {list(shape)})")
        return values.reshape((-1,) + shape)
    if values.size != per:
        raise InvalidArgumentError(f"Key: {key}. Can't parse serialized Example: expected {per} values (shape "
                                   f"{list(shape)}), got {values.size}")
    return values.reshape(shape)


def _sparse(batch_shape: tuple, listed: list, dtype: str):
    """A VarLenFeature: record r's j-th value at index (*unravel(r), j); dense shape (*batch, longest)."""
    lengths = [0 if v is None else v.size for v in listed]
    rows = np.repeat(np.arange(len(listed)), lengths)
    positions = np.concatenate([np.arange(n) for n in lengths]) if rows.size else np.zeros(0, np.int64)
    batch_index = np.stack(np.unravel_index(rows, batch_shape), axis=1) if batch_shape else np.zeros((rows.size, 0), np.int64)
    indices = np.concatenate([batch_index, positions[:, None]], axis=1).astype(np.int64)
    kept = [v for v in listed if v is not None and v.size]
    values = np.concatenate(kept) if kept else np.zeros(0, object if dtype == "object" else dtype)
    dense_shape = np.asarray(tuple(batch_shape) + (max(lengths, default=0),), np.int64)
    return indices, values, dense_shape
