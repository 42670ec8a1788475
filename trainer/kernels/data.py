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
def parse_example(serialized, *defaults, xp, keys, dtypes, shapes, sequence, num_outputs):
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
    for key, dtype, shape, is_sequence, default in zip(keys, dtypes, json.loads(shapes), sequence, defaults):
        values = [_feature_values(features, key, dtype, tuple(shape), bool(is_sequence), default) for features in parsed]
        if is_sequence:
            longest = max((len(v) for v in values), default=0)
            fill = default.reshape(()) if default.size else np.zeros((), dtype)
            values = [np.concatenate([v, np.full((longest - len(v),) + tuple(shape), fill, dtype)]) for v in values]
        stacked = np.stack(values) if values else np.zeros((0,) + tuple(shape), dtype)
        outputs.append(stacked.reshape(records.shape + stacked.shape[1:]))
    return tuple(outputs)


def _feature_values(features, key: str, dtype: str, shape: tuple, is_sequence: bool, default) -> np.ndarray:
    kind = FEATURE_LISTS[dtype]
    if key in features:
        present = features[key].WhichOneof("kind")
        if present is not None and present != kind:
            raise InvalidArgumentError(f"Key: {key}. Data types don't match. Expected type: {dtype}, actual: {present}")
        values = np.asarray(list(getattr(features[key], kind).value) if present else [],
                            dtype=object if dtype == "object" else dtype)
    elif is_sequence:
        values = np.zeros((0,), dtype)
    elif default.size:
        return default
    else:
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
