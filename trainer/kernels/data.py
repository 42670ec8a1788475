"""Stateful kernels of the input-pipeline ops (family ``data``: ``schemas/ops/data.py``).

Each receives the run's ``RunContext`` first. An iterator is an ``IteratorState`` resource in
``rctx.state.resources`` under its handle's shared name; its dataset comes from the graph's
dataset table (trainer/data/iterator.py), with the values of the tensors it captured as inputs.
"""

from __future__ import annotations

import numpy as np

from trainer.data.dataset import Dataset
from trainer.data.iterator import IteratorState, lookup_dataset
from trainer.kernels.registry import stateful_kernel

__all__: list[str] = []


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
