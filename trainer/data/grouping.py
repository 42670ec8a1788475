"""Datasets that group elements by a key: ``group_by_window`` (and ``bucket_by_sequence_length``
built on it) and ``group_by_reducer``, as ``tf.data.experimental`` has them.

A window is handed to the reduce function as a dataset (``WindowDataset``) whose elements are the
window's, given to it through the pass's ``IterationContext``; the reduce function is traced once,
over a key placeholder and that dataset, and the tensors its result captures are computed from
each window's key. Groups left at the end of the input are flushed in ascending key order, as
TensorFlow's ``std::map`` of groups does.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from trainer.data.dataset import Dataset, TensorSpec, positive_int
from trainer.data.functions import TracedFunction, spec_of, trace_with_state
from trainer.data.structure import DataStructureError, flatten, flatten_shapes, pack_as, shapes_like
from trainer.graph import Graph, GraphError
from trainer.kernels.debugging import InvalidArgumentError
from trainer.ops import placeholder

__all__ = ["BucketReducer", "GroupByReducerDataset", "GroupByWindowDataset", "Reducer", "TracedWindowReducer",
           "WindowDataset", "bucket_by_sequence_length", "group_by_reducer", "group_by_window", "scalar_int_function"]

_KEY_SPEC = TensorSpec(np.dtype(np.int64), ())


class WindowDataset(Dataset):
    """The elements of one window; the grouping dataset puts them in the context under this dataset."""

    def __init__(self, element_spec):
        self.element_spec = element_spec

    def elements(self, ctx):
        yield from ctx.captured[self]


def scalar_int_function(fn: Callable, element_spec, what: str) -> Callable[[list], int]:
    """``fn`` traced over ``element_spec``, checked to return one integer scalar; called with an
    element's components it gives that integer."""
    traced = TracedFunction(fn, element_spec, what)
    out = traced.output_structure
    if isinstance(out, (tuple, dict)) or np.dtype(out.dtype).kind not in "iu" or out.shape not in ((), None):
        got = f"{type(out).__name__} of {len(flatten(out))} tensors" if isinstance(out, (tuple, dict)) else \
            f"a {np.dtype(out.dtype).name} tensor of shape {out.shape}"
        raise DataStructureError(f"`{what}` must return a single tf.int64 scalar tensor, got {got}")

    def run(comps: list) -> int:
        value = np.asarray(traced.run(comps)[0])
        if value.shape != ():
            raise InvalidArgumentError(f"`{what}` must return a scalar, got shape {value.shape}")
        return int(value)

    return run


class TracedWindowReducer:
    """``reduce_func(key, window_dataset)`` traced once; ``open`` gives a window's output elements."""

    def __init__(self, reduce_func: Callable, element_spec):
        self.window = WindowDataset(element_spec)
        self.graph = Graph()
        name = getattr(reduce_func, "__name__", type(reduce_func).__name__)
        with self.graph.as_default():
            self.key = placeholder(np.int64, (), name="key")
            try:
                result = reduce_func(self.key, self.window)
            except GraphError as e:
                raise GraphError(f"group_by_window reduce_func {name!r}: {e}. It runs in a graph of its own: use "
                                 "its arguments and constants, not tensors of the outer graph") from e
        if not isinstance(result, Dataset):
            raise DataStructureError(f"`reduce_func` must return a `Dataset` object, {name!r} returned "
                                     f"{type(result).__name__}")
        self.dataset = result
        self.captured = result.captured_tensors()
        from trainer.session import Session

        self.session = Session(self.graph) if self.captured else None
        self.element_spec = result.element_spec

    def open(self, ctx, key: int, window: list):
        values = {}
        if self.captured:
            values = dict(zip(self.captured, self.session.run(self.captured, {self.key: np.int64(key)})))
        return self.dataset.elements(ctx.with_captured({**values, self.window: window}))


class BucketReducer:
    """``bucket_by_sequence_length``'s reduce: bucket ``key``'s window padded-batched to its size."""

    def __init__(self, element_spec, boundaries: list[int], batch_sizes: list[int], padded_shapes, padding_values,
                 pad_to_bucket_boundary: bool, no_padding: bool, drop_remainder: bool):
        self.window = WindowDataset(element_spec)
        self.pad_to_boundary = pad_to_bucket_boundary
        self.batches = [self._batcher(i, size, boundaries, padded_shapes, padding_values, no_padding, drop_remainder)
                        for i, size in enumerate(batch_sizes)]
        specs = [flatten(b.element_spec) for b in self.batches if b is not None]
        common = specs[0]
        for other in specs[1:]:
            common = [a.most_specific_common(b) for a, b in zip(common, other)]
        self.element_spec = pack_as(element_spec, common)

    def _batcher(self, bucket: int, size: int, boundaries, padded_shapes, padding_values, no_padding, drop_remainder):
        if no_padding:
            return self.window.batch(size, drop_remainder)
        fill = None
        if self.pad_to_boundary:
            if bucket == len(boundaries):
                return None  # this bucket's window is refused when it is batched (see open), as TF asserts
            fill = boundaries[bucket] - 1
        source = padded_shapes if padded_shapes is not None else self.window.output_shapes
        shapes = [tuple(fill if d is None else d for d in s) if s is not None else None
                  for s in _flat_shapes(self.window, source)]
        return self.window.padded_batch(size, _packed_shapes(self.window, shapes), padding_values, drop_remainder)

    def open(self, ctx, key: int, window: list):
        batcher = self.batches[key]
        if batcher is None:
            raise InvalidArgumentError("When pad_to_bucket_boundary=True, elements must have length < "
                                       "max(bucket_boundaries).")
        return batcher.elements(ctx.with_captured({self.window: window}))


def _flat_shapes(dataset: Dataset, shapes) -> list:
    """``shapes`` (one per component, in the element's structure) as a flat list."""
    return flatten_shapes(dataset.output_types, shapes_like(dataset.output_types, shapes))


def _packed_shapes(dataset: Dataset, shapes: list):
    """Flat shapes back in the element's structure (each shape a tuple, not a nest)."""
    types = dataset.output_types
    if isinstance(types, (tuple, dict)):
        return pack_as(types, shapes)
    return shapes[0]


class GroupByWindowDataset(Dataset):
    """Elements grouped by ``key_of(element)``; each window of ``size_of(key)`` elements (or what is
    left at the end) becomes the elements of ``reducer.open``."""

    def __init__(self, input: Dataset, key_of: Callable[[list], int], size_of: Callable[[int], int], reducer):
        self.input, self.key_of, self.size_of, self.reducer = input, key_of, size_of, reducer
        self.element_spec = reducer.element_spec

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        groups: dict[int, list] = {}
        sizes: dict[int, int] = {}
        source = self.input.elements(ctx)
        try:
            for comps in source:
                key = self.key_of(comps)
                if key not in sizes:
                    sizes[key] = self.size_of(key)
                group = groups.setdefault(key, [])
                group.append(comps)
                if len(group) >= sizes[key]:
                    del groups[key]
                    yield from self.reducer.open(ctx, key, group)
        finally:
            source.close()
        for key in sorted(groups):
            yield from self.reducer.open(ctx, key, groups[key])


def _window_size_function(window_size, window_size_func) -> Callable[[int], int]:
    if window_size is None and window_size_func is None:
        raise ValueError("group_by_window: pass either window_size or window_size_func")
    if window_size is not None and window_size_func is not None:
        raise ValueError("group_by_window: pass either window_size or window_size_func, not both")
    if window_size is not None:
        size = positive_int(window_size, "window_size")
        return lambda key: size
    size_of_key = scalar_int_function(window_size_func, _KEY_SPEC, "window_size_func")

    def checked(key: int) -> int:
        size = size_of_key([np.asarray(key, np.int64)])
        if size <= 0:
            raise InvalidArgumentError(f"window_size_func gave window size {size} for key {key}; it must be positive")
        return size

    return checked


def group_by_window(key_func: Callable, reduce_func: Callable, window_size=None,
                    window_size_func: Callable | None = None) -> Callable[[Dataset], Dataset]:
    """Groups elements by the int64 ``key_func(element)``; each window of ``window_size`` elements of
    one key (or ``window_size_func(key)``), and each partial window at the end, goes through
    ``reduce_func(key, window_dataset)``, whose elements are the output."""
    size_of = _window_size_function(window_size, window_size_func)

    def apply(dataset: Dataset) -> Dataset:
        key_of = scalar_int_function(key_func, dataset.element_spec, "key_func")
        return GroupByWindowDataset(dataset, key_of, size_of, TracedWindowReducer(reduce_func, dataset.element_spec))

    return apply


def bucket_by_sequence_length(element_length_func: Callable, bucket_boundaries: Sequence[int],
                              bucket_batch_sizes: Sequence[int], padded_shapes=None, padding_values=None,
                              pad_to_bucket_boundary: bool = False, no_padding: bool = False,
                              drop_remainder: bool = False) -> Callable[[Dataset], Dataset]:
    """Batches of elements of similar length: bucket ``i`` holds lengths in
    ``[bucket_boundaries[i-1], bucket_boundaries[i])`` and batches ``bucket_batch_sizes[i]`` of them,
    padded (to the batch's longest, or to the boundary less one with ``pad_to_bucket_boundary``).

    >>> import trainer as tf
    >>> rows = tf.data.Dataset.range(1, 6).map(lambda n: tf.range(n))
    >>> batches = rows.apply(bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3], [2, 2]))
    >>> batches.output_shapes
    (None, None)
    """
    boundaries = [int(b) for b in bucket_boundaries]
    sizes = [positive_int(s, "bucket_batch_sizes") for s in bucket_batch_sizes]
    if len(sizes) != len(boundaries) + 1:
        raise ValueError(f"len(bucket_batch_sizes) must equal len(bucket_boundaries) + 1: got {len(sizes)} batch "
                         f"sizes for {len(boundaries)} boundaries")
    if any(b <= a for a, b in zip(boundaries, boundaries[1:])):
        raise ValueError(f"bucket_boundaries must be increasing, got {boundaries}")
    if pad_to_bucket_boundary and not boundaries:
        raise ValueError("pad_to_bucket_boundary=True needs at least one bucket boundary to pad to")
    edges = np.asarray(boundaries, np.int64)

    def apply(dataset: Dataset) -> Dataset:
        length_of = scalar_int_function(element_length_func, dataset.element_spec, "element_length_func")
        reducer = BucketReducer(dataset.element_spec, boundaries, sizes, padded_shapes, padding_values,
                                pad_to_bucket_boundary, no_padding, drop_remainder)
        return GroupByWindowDataset(dataset, lambda comps: int(np.searchsorted(edges, length_of(comps), "right")),
                                    lambda bucket: sizes[bucket], reducer)

    return apply


class Reducer:
    """``group_by_reducer``'s three functions: ``init_func(key)`` gives a group's first state,
    ``reduce_func(state, element)`` the next one, ``finalize_func(state)`` the group's output."""

    def __init__(self, init_func: Callable, reduce_func: Callable, finalize_func: Callable):
        self.init_func, self.reduce_func, self.finalize_func = init_func, reduce_func, finalize_func


class GroupByReducerDataset(Dataset):
    """One element per key: the reducer's state folded over the key's elements, then finalized.
    Keys come out in the order first seen, as TensorFlow's GroupByReducer emits them."""

    def __init__(self, input: Dataset, key_func: Callable, reducer: Reducer):
        if not isinstance(reducer, Reducer):
            raise TypeError(f"group_by_reducer: reducer must be a tf.data.experimental.Reducer, got "
                            f"{type(reducer).__name__}")
        self.input = input
        self.key_of = scalar_int_function(key_func, input.element_spec, "key_func")
        self.init = TracedFunction(reducer.init_func, _KEY_SPEC, "init_func")
        self.reduce, state_spec = trace_with_state(reducer.reduce_func, spec_of(self.init.output_structure),
                                                   input.element_spec, "reduce_func")
        self.finalize = TracedFunction(reducer.finalize_func, state_spec, "finalize_func")
        self.element_spec = spec_of(self.finalize.output_structure)

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        states: dict[int, list] = {}
        for comps in self.input.elements(ctx):
            key = self.key_of(comps)
            if key not in states:
                states[key] = self.init.run([np.asarray(key, np.int64)], ctx)
            states[key] = self.reduce.run(states[key] + comps, ctx)
        for state in states.values():
            yield self.finalize.run(state, ctx)


def group_by_reducer(key_func: Callable, reducer: Reducer) -> Callable[[Dataset], Dataset]:
    """One element per distinct int64 ``key_func(element)``: ``reducer`` folded over that key's elements."""
    return lambda dataset: GroupByReducerDataset(dataset, key_func, reducer)
