"""``Dataset``: an input pipeline described as a chain of sources and transformations.

A dataset is a recipe, not data: it runs only when an iterator starts it in a session
(trainer/data/iterator.py), each start a fresh pass. Internally an element is a flat list of
NumPy components (``flatten`` of the element structure); ``element_spec`` keeps the structure with
a ``TensorSpec`` (dtype, shape) per component. Sources may capture graph tensors (a placeholder
fed with the iterator's initializer, as TF1 scripts do); their values reach the pipeline through
the ``IterationContext`` of the pass.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from trainer.data.functions import TracedFunction, call_with_element
from trainer.data.structure import (DataStructureError, as_numpy_dtype, describe, flatten, map_structure,
                                    pack_as, same_structure)
from trainer.graph import Tensor

__all__ = ["AUTOTUNE", "Dataset", "IterationContext", "TensorSpec"]

AUTOTUNE = -1
Components = list  # one element: its flat list of NumPy components


@dataclass(frozen=True)
class TensorSpec:
    """The static type of one component: dtype and shape (None for an unknown dim or rank)."""

    dtype: np.dtype
    shape: tuple | None

    def compatible_with(self, value: np.ndarray) -> bool:
        if self.shape is None:
            return True
        return len(value.shape) == len(self.shape) and all(d is None or d == v for d, v in zip(self.shape, value.shape))

    def most_specific_common(self, other: "TensorSpec") -> "TensorSpec":
        if self.shape is None or other.shape is None or len(self.shape) != len(other.shape):
            return TensorSpec(self.dtype, None)
        return TensorSpec(self.dtype, tuple(a if a == b else None for a, b in zip(self.shape, other.shape)))


class IterationContext:
    """What one pass over a pipeline shares: captured tensors' values and shuffle seeds."""

    def __init__(self, captured: dict, seed: int | None = None, parent: "IterationContext | None" = None):
        self.captured = captured
        if parent is None:
            self._rng = np.random.default_rng(seed)
            self._seeds: dict[int, int] = {}
            self._passes: dict[int, int] = {}
            self._lock = threading.Lock()
            self.caches: dict[int, list] = {}
        else:
            self._rng, self._seeds, self._passes, self._lock = parent._rng, parent._seeds, parent._passes, parent._lock
            self.caches = parent.caches

    def value(self, tensor: Tensor) -> np.ndarray:
        try:
            return self.captured[tensor]
        except KeyError:
            raise DataStructureError(f"the pipeline captured tensor {tensor.name}, but it was not given to the "
                                     "iterator; build the iterator from this dataset") from None

    def with_captured(self, captured: dict) -> "IterationContext":
        return IterationContext({**self.captured, **captured}, parent=self)

    def next_pass(self, dataset: "Dataset") -> tuple[int, int]:
        """(a seed fixed for this pipeline run, how many times ``dataset`` was iterated before)."""
        with self._lock:
            key = id(dataset)
            if key not in self._seeds:
                self._seeds[key] = int(self._rng.integers(2 ** 62))
            n = self._passes.get(key, 0)
            self._passes[key] = n + 1
            return self._seeds[key], n


@dataclass
class RowSource:
    """Elements that are rows ``[a[i] for a in arrays]`` for ``i`` in ``indices``.

    Sliced sources and the order-only transformations over them (shuffle, repeat, take, skip,
    shard) pass indices instead of elements, so ``batch`` gathers each component with one fancy
    index rather than stacking rows one by one (issue 21's speed target: 64 rows per step cost
    ~0.4 ms as elements, a few microseconds as indices). The elements are the same either way.
    """

    arrays: list
    indices: Iterator[int]


def shuffle_buffer(items: Iterator, size: int, rng: np.random.Generator) -> Iterator:
    """TensorFlow's shuffle: fill ``size`` items, emit a random one and put the next in its slot.

    Random draws are made in blocks (one per item otherwise dominates the cost); the same items
    and generator give the same order whether the items are elements or row indices.
    """
    buf: list = []
    draws: list = []
    for item in items:
        if len(buf) < size:
            buf.append(item)
            continue
        if not draws:
            draws = rng.integers(size, size=256).tolist()
        i = draws.pop()
        yield buf[i]
        buf[i] = item
    if buf:
        for i in rng.integers(0, np.arange(len(buf), 0, -1)).tolist():
            buf[i], buf[-1] = buf[-1], buf[i]
            yield buf.pop()


class Dataset:
    """Base of every dataset: ``element_spec`` plus ``_iterate(ctx)``; the TF1 methods build new datasets."""

    element_spec = None  # a structure of TensorSpec

    def _iterate(self, ctx: IterationContext) -> Iterator[Components]:
        raise NotImplementedError(type(self).__name__)

    def _rows(self, ctx: IterationContext) -> "RowSource | None":
        """The elements as rows of arrays, if they are (see RowSource); None where they are not."""
        return None

    def _inputs(self) -> list["Dataset"]:
        return []

    def _own_captured(self) -> list[Tensor]:
        return []

    def captured_tensors(self) -> list[Tensor]:
        """Graph tensors the pipeline reads, in a fixed order, each once."""
        seen, out = set(), []
        for t in self._all_captured():
            if id(t) not in seen:
                seen.add(id(t))
                out.append(t)
        return out

    def _all_captured(self) -> list[Tensor]:
        return self._own_captured() + [t for d in self._inputs() for t in d._all_captured()]

    # -- types, as TF1 spells them ------------------------------------------------------------
    @property
    def output_types(self):
        return map_structure(lambda s: s.dtype, self.element_spec)

    @property
    def output_shapes(self):
        return map_structure(lambda s: s.shape, self.element_spec)

    @property
    def output_classes(self):
        return map_structure(lambda s: Tensor, self.element_spec)

    def __iter__(self):
        raise TypeError("a Dataset is iterated in a session: it = dataset.make_one_shot_iterator(); "
                        "x = it.get_next(); sess.run(x) until OutOfRangeError")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} types: {self.output_types}, shapes: {self.output_shapes}>"

    # -- sources --------------------------------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors) -> "Dataset":
        """One element per row of ``tensors`` (an array, tensor, or tuple/dict of them sharing a first dim)."""
        return TensorSliceDataset(tensors)

    @staticmethod
    def from_tensors(tensors) -> "Dataset":
        """A single element: ``tensors`` itself."""
        return TensorDataset(tensors)

    @staticmethod
    def from_generator(generator: Callable, output_types, output_shapes=None, args=None) -> "Dataset":
        """Elements yielded by ``generator(*args)``, each checked against ``output_types``/``output_shapes``."""
        return GeneratorDataset(generator, output_types, output_shapes, args)

    @staticmethod
    def range(*args) -> "Dataset":
        """``range(stop)``, ``range(start, stop[, step])`` as int64 scalars."""
        return RangeDataset(*args)

    @staticmethod
    def zip(datasets) -> "Dataset":
        """Elements of ``datasets`` (a tuple or dict of datasets) side by side, as long as the shortest."""
        return ZipDataset(datasets)

    # -- transformations ------------------------------------------------------------------------
    def map(self, map_func: Callable, num_parallel_calls: int | None = None) -> "Dataset":
        return MapDataset(self, map_func, num_parallel_calls)

    def filter(self, predicate: Callable) -> "Dataset":
        return FilterDataset(self, predicate)

    def flat_map(self, map_func: Callable) -> "Dataset":
        return InterleaveDataset(self, map_func, cycle_length=1, block_length=1)

    def interleave(self, map_func: Callable, cycle_length: int = AUTOTUNE, block_length: int = 1,
                   num_parallel_calls: int | None = None) -> "Dataset":
        return InterleaveDataset(self, map_func, cycle_length, block_length)

    def batch(self, batch_size: int, drop_remainder: bool = False) -> "Dataset":
        return BatchDataset(self, batch_size, drop_remainder)

    def padded_batch(self, batch_size: int, padded_shapes=None, padding_values=None,
                     drop_remainder: bool = False) -> "Dataset":
        return PaddedBatchDataset(self, batch_size, padded_shapes, padding_values, drop_remainder)

    def unbatch(self) -> "Dataset":
        return UnbatchDataset(self)

    def shuffle(self, buffer_size: int, seed: int | None = None, reshuffle_each_iteration: bool = True) -> "Dataset":
        return ShuffleDataset(self, buffer_size, seed, reshuffle_each_iteration)

    def repeat(self, count: int | None = None) -> "Dataset":
        return RepeatDataset(self, count)

    def take(self, count: int) -> "Dataset":
        return TakeDataset(self, count)

    def skip(self, count: int) -> "Dataset":
        return SkipDataset(self, count)

    def shard(self, num_shards: int, index: int) -> "Dataset":
        return ShardDataset(self, num_shards, index)

    def prefetch(self, buffer_size: int) -> "Dataset":
        return PrefetchDataset(self, buffer_size)

    def cache(self, filename: str = "") -> "Dataset":
        return CacheDataset(self, filename)

    def concatenate(self, dataset: "Dataset") -> "Dataset":
        return ConcatenateDataset(self, dataset)

    def enumerate(self, start: int = 0) -> "Dataset":
        return ZipDataset((RangeDataset(start, np.iinfo(np.int64).max), self))

    def apply(self, transformation_func: Callable[["Dataset"], "Dataset"]) -> "Dataset":
        out = transformation_func(self)
        if not isinstance(out, Dataset):
            raise DataStructureError(f"apply: the transformation returned {type(out).__name__}, not a Dataset")
        return out

    # -- iterators ------------------------------------------------------------------------------
    def make_one_shot_iterator(self):
        from trainer.data.iterator import make_one_shot_iterator

        return make_one_shot_iterator(self)

    def make_initializable_iterator(self, shared_name: str | None = None):
        from trainer.data.iterator import make_initializable_iterator

        return make_initializable_iterator(self, shared_name)


def _positive(value, what: str) -> int:
    if isinstance(value, Tensor):
        raise TypeError(f"{what} must be a Python int here, not the tensor {value.name}")
    n = int(value)
    if n <= 0:
        raise ValueError(f"{what} must be positive, got {value}")
    return n


def _threads(n) -> int:
    return os.cpu_count() or 1 if n == AUTOTUNE else _positive(n, "num_parallel_calls")


def _source_array(value):
    """A source leaf: a graph tensor stays (captured), anything else becomes an array as ``constant`` would."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "_as_tensor"):
        return value._as_tensor()
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)  # Python floats are float32, as in TensorFlow
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    return arr


# -- sources ------------------------------------------------------------------------------------
class TensorSliceDataset(Dataset):
    def __init__(self, tensors):
        if isinstance(tensors, list):
            tensors = tuple(tensors) if any(isinstance(t, (np.ndarray, Tensor)) for t in tensors) else np.asarray(tensors)
        self.structure = map_structure(_source_array, tensors)
        leaves = flatten(self.structure)
        if not leaves:
            raise DataStructureError("from_tensor_slices needs at least one tensor")
        specs, rows = [], set()
        for i, leaf in enumerate(leaves):
            shape = leaf.shape
            if shape is not None and len(shape) == 0:
                raise DataStructureError(f"from_tensor_slices: component {i} is a scalar; it needs a first "
                                         "dimension to slice (use from_tensors for a single element)")
            if shape is not None and shape[0] is not None:
                rows.add(shape[0])
            specs.append(TensorSpec(leaf.dtype, None if shape is None else tuple(shape[1:])))
        if len(rows) > 1:
            raise DataStructureError("from_tensor_slices: the components must share their first dimension, got "
                                     f"{[None if x.shape is None else x.shape[0] for x in leaves]}")
        self.element_spec = pack_as(self.structure, specs)

    def _own_captured(self):
        return [t for t in flatten(self.structure) if isinstance(t, Tensor)]

    def _rows(self, ctx):
        arrays = [ctx.value(t) if isinstance(t, Tensor) else t for t in flatten(self.structure)]
        lengths = {len(a) for a in arrays}
        if len(lengths) > 1:
            raise DataStructureError(f"from_tensor_slices: the fed components differ in their first dimension: "
                                     f"{[a.shape for a in arrays]}")
        return RowSource(arrays, iter(range(lengths.pop())))

    def _iterate(self, ctx):
        rows = self._rows(ctx)
        for i in rows.indices:
            yield [np.asarray(a[i]) for a in rows.arrays]


class TensorDataset(Dataset):
    def __init__(self, tensors):
        self.structure = map_structure(_source_array, tensors)
        self.element_spec = map_structure(lambda t: TensorSpec(t.dtype, t.shape), self.structure)

    def _own_captured(self):
        return [t for t in flatten(self.structure) if isinstance(t, Tensor)]

    def _iterate(self, ctx):
        yield [ctx.value(t) if isinstance(t, Tensor) else t for t in flatten(self.structure)]


class RangeDataset(Dataset):
    def __init__(self, *args):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"range takes 1 to 3 arguments (stop or start, stop[, step]), got {len(args)}")
        self.bounds = range(*(int(a) for a in args))
        self.element_spec = TensorSpec(np.dtype(np.int64), ())

    def _iterate(self, ctx):
        for i in self.bounds:
            yield [np.asarray(i, np.int64)]


class GeneratorDataset(Dataset):
    def __init__(self, generator, output_types, output_shapes, args):
        if not callable(generator):
            raise TypeError(f"from_generator needs a callable that returns an iterator, got {type(generator).__name__}")
        self.generator = generator
        self.args = tuple(np.asarray(a) for a in (args or ()))
        types = map_structure(as_numpy_dtype, output_types)
        if output_shapes is None:
            shapes = map_structure(lambda _: None, types)
        else:
            try:
                shapes = _shapes_like(types, output_shapes)
            except DataStructureError as e:
                raise DataStructureError(f"from_generator: output_shapes do not fit output_types: {e}") from None
        self.types = types
        self.element_spec = pack_as(types, [TensorSpec(d, s) for d, s in zip(flatten(types), flatten_shapes(types, shapes))])

    def _iterate(self, ctx):
        specs = flatten(self.element_spec)
        for n, element in enumerate(self.generator(*self.args)):
            if isinstance(element, list):
                element = tuple(element)
            if not same_structure(self.types, element) or (not _is_nest(self.types) and _is_nest(element)):
                raise DataStructureError(f"from_generator: element {n} has structure {describe(element)}, but "
                                         f"output_types declares {describe(self.types)}")
            yield [_checked_component(v, spec, f"from_generator: element {n} component {i}")
                   for i, (v, spec) in enumerate(zip(flatten(element), specs))]


def _is_nest(x) -> bool:
    return isinstance(x, (tuple, list, dict))


def _is_shape(x) -> bool:
    return isinstance(x, (tuple, list)) and all(d is None or isinstance(d, (int, np.integer)) for d in x)


def _shapes_like(types, shapes):
    """``shapes`` laid over ``types``: a tuple of ints is one shape, not a nest of them."""
    if not _is_nest(types):
        if shapes is not None and not _is_shape(shapes):
            raise DataStructureError(f"{shapes!r} is not a shape (a tuple of ints or None)")
        return None if shapes is None else tuple(None if d is None or d < 0 else int(d) for d in shapes)
    if isinstance(types, dict):
        if not isinstance(shapes, dict) or set(shapes) != set(types):
            raise DataStructureError(f"shapes {shapes!r} do not match the structure {describe(types)}")
        return {k: _shapes_like(types[k], shapes[k]) for k in types}
    if not isinstance(shapes, (tuple, list)) or len(shapes) != len(types):
        raise DataStructureError(f"shapes {shapes!r} do not match the structure {describe(types)}")
    return tuple(_shapes_like(t, s) for t, s in zip(types, shapes))


def flatten_shapes(types, shapes) -> list:
    """Shapes in the order of ``flatten(types)`` (shapes are tuples, so plain flatten would split them)."""
    if isinstance(types, dict):
        return [s for k in sorted(types) for s in flatten_shapes(types[k], shapes[k])]
    if _is_nest(types):
        return [s for t, sh in zip(types, shapes) for s in flatten_shapes(t, sh)]
    return [shapes]


def _checked_component(value, spec: TensorSpec, where: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype != spec.dtype:
        if spec.dtype == object and arr.dtype.kind in "US":
            arr = arr.astype(object)
        elif arr.dtype == object or not np.can_cast(arr.dtype, spec.dtype, "same_kind"):
            raise DataStructureError(f"{where}: {arr.dtype.name} value cannot be {spec.dtype.name}")
        else:
            arr = arr.astype(spec.dtype)
    if not spec.compatible_with(arr):
        raise DataStructureError(f"{where}: shape {arr.shape} does not match the declared {spec.shape}")
    return arr


class ZipDataset(Dataset):
    def __init__(self, datasets):
        if isinstance(datasets, Dataset):
            raise DataStructureError("zip takes a tuple (or dict) of datasets: Dataset.zip((a, b))")
        if isinstance(datasets, list):
            datasets = tuple(datasets)
        for d in flatten(datasets):
            if not isinstance(d, Dataset):
                raise DataStructureError(f"zip: {type(d).__name__} is not a Dataset")
        self.datasets = datasets
        self.element_spec = map_structure_datasets(lambda d: d.element_spec, datasets)

    def _inputs(self):
        return flatten(self.datasets)

    def _iterate(self, ctx):
        # Components of the zipped element: each dataset's flat components, in flatten(datasets) order.
        iters = [d._iterate(ctx) for d in flatten(self.datasets)]
        try:
            while True:
                out = []
                for it in iters:
                    comps = next(it, None)
                    if comps is None:
                        return
                    out.extend(comps)
                yield out
        finally:
            for it in iters:
                it.close()


def map_structure_datasets(fn, datasets):
    if isinstance(datasets, dict):
        return {k: map_structure_datasets(fn, v) for k, v in datasets.items()}
    if isinstance(datasets, tuple):
        return tuple(map_structure_datasets(fn, v) for v in datasets)
    return fn(datasets)


class ConcatenateDataset(Dataset):
    def __init__(self, first: Dataset, second: Dataset):
        a, b = first.element_spec, second.element_spec
        if not same_structure(a, b) or [s.dtype for s in flatten(a)] != [s.dtype for s in flatten(b)]:
            raise DataStructureError(f"concatenate: the datasets' elements differ: {first.output_types} vs "
                                     f"{second.output_types}")
        self.first, self.second = first, second
        self.element_spec = pack_as(a, [x.most_specific_common(y) for x, y in zip(flatten(a), flatten(b))])

    def _inputs(self):
        return [self.first, self.second]

    def _iterate(self, ctx):
        yield from self.first._iterate(ctx)
        yield from self.second._iterate(ctx)


# -- element-wise transformations ---------------------------------------------------------------
class MapDataset(Dataset):
    def __init__(self, input: Dataset, map_func, num_parallel_calls):
        self.input = input
        self.fn = TracedFunction(map_func, input.element_spec, "map")
        self.threads = 1 if num_parallel_calls is None else _threads(num_parallel_calls)
        self.element_spec = map_structure(lambda t: TensorSpec(t.dtype, t.shape), self.fn.output_structure)

    def _inputs(self):
        return [self.input]

    def _iterate(self, ctx):
        run = self.fn.run
        if self.threads == 1:
            for comps in self.input._iterate(ctx):
                yield run(comps)
            return
        # Results in input order; up to `threads` elements in flight on the pool.
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="flowstack-data-map")
        pending: deque = deque()
        source = self.input._iterate(ctx)
        try:
            for comps in source:
                pending.append(pool.submit(run, comps))
                if len(pending) >= self.threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            source.close()
            pool.shutdown(wait=False, cancel_futures=True)


class FilterDataset(Dataset):
    def __init__(self, input: Dataset, predicate):
        self.input = input
        self.fn = TracedFunction(predicate, input.element_spec, "filter")
        out = self.fn.output_structure
        if isinstance(out, (tuple, dict)) or out.dtype != np.bool_ or out.shape not in ((), None):
            raise DataStructureError(f"filter: the predicate must return a scalar bool tensor, got "
                                     f"{describe(out) if isinstance(out, (tuple, dict)) else out}")
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _iterate(self, ctx):
        for comps in self.input._iterate(ctx):
            if bool(self.fn.run(comps)[0]):
                yield comps


class InterleaveDataset(Dataset):
    """``flat_map`` (cycle 1) and ``interleave``: each element opens a dataset, read round-robin in blocks."""

    def __init__(self, input: Dataset, map_func, cycle_length, block_length):
        self.input = input
        self.fn = TracedFunction(map_func, input.element_spec, "interleave", returns_dataset=True)
        self.cycle = os.cpu_count() or 1 if cycle_length in (None, AUTOTUNE) else _positive(cycle_length, "cycle_length")
        self.block = _positive(block_length, "block_length")
        self.element_spec = self.fn.dataset.element_spec

    def _inputs(self):
        return [self.input]

    def _open(self, ctx, comps):
        captured = dict(zip(self.fn.outputs, self.fn.run(comps)))
        return self.fn.dataset._iterate(ctx.with_captured(captured))

    def _iterate(self, ctx):
        source = self.input._iterate(ctx)
        open_: deque = deque()
        try:
            for comps in source:
                open_.append(self._open(ctx, comps))
                if len(open_) == self.cycle:
                    break
            while open_:
                it = open_.popleft()
                exhausted = False
                for _ in range(self.block):
                    comps = next(it, None)
                    if comps is None:
                        exhausted = True
                        break
                    yield comps
                if exhausted:
                    nxt = next(source, None)
                    if nxt is not None:  # takes the exhausted one's place, last in the round
                        open_.append(self._open(ctx, nxt))
                else:
                    open_.append(it)
        finally:
            source.close()


# -- batching -------------------------------------------------------------------------------------
class BatchDataset(Dataset):
    def __init__(self, input: Dataset, batch_size, drop_remainder):
        self.input = input
        self.size = _positive(batch_size, "batch_size")
        self.drop_remainder = bool(drop_remainder)
        lead = self.size if self.drop_remainder else None
        self.element_spec = map_structure(
            lambda s: TensorSpec(s.dtype, None if s.shape is None else (lead,) + tuple(s.shape)), input.element_spec)

    def _inputs(self):
        return [self.input]

    def _stack(self, rows: list[Components]) -> Components:
        out = []
        for i in range(len(rows[0])):
            parts = [r[i] for r in rows]
            try:
                out.append(np.stack(parts))
            except ValueError:
                shapes = sorted({p.shape for p in parts})
                raise DataStructureError(f"batch: component {i} has different shapes in one batch ({shapes[:4]}); "
                                         "use padded_batch for elements of varying shape") from None
        return out

    def _iterate(self, ctx):
        source = self.input._rows(ctx)
        if source is not None and type(self) is BatchDataset:
            yield from self._gather(source)
            return
        rows: list = []
        for comps in self.input._iterate(ctx):
            rows.append(comps)
            if len(rows) == self.size:
                yield self._stack(rows)
                rows = []
        if rows and not self.drop_remainder:
            yield self._stack(rows)

    def _gather(self, source: RowSource):
        while True:
            idx = list(itertools.islice(source.indices, self.size))
            if not idx or (self.drop_remainder and len(idx) < self.size):
                return
            yield [a[idx] for a in source.arrays]


class PaddedBatchDataset(BatchDataset):
    """Batches elements of varying shape, padding each component to ``padded_shapes`` (None: the batch's longest)."""

    def __init__(self, input, batch_size, padded_shapes, padding_values, drop_remainder):
        super().__init__(input, batch_size, drop_remainder)
        specs = flatten(input.element_spec)
        if padded_shapes is None:
            shapes = [s.shape for s in specs]
        else:
            shapes = flatten_shapes(input.element_spec, _shapes_like(input.output_types, padded_shapes))
        if any(s is None for s in shapes):
            raise DataStructureError("padded_batch needs padded_shapes for components of unknown rank")
        self.shapes = shapes
        values = [0] * len(specs) if padding_values is None else flatten(padding_values)
        if len(values) != len(specs):
            raise DataStructureError(f"padded_batch: padding_values has {len(values)} components, elements have {len(specs)}")
        self.values = [np.asarray(v, s.dtype) for v, s in zip(values, specs)]
        lead = self.size if self.drop_remainder else None
        self.element_spec = pack_as(input.element_spec, [TensorSpec(s.dtype, (lead,) + tuple(sh))
                                                         for s, sh in zip(specs, shapes)])

    def _stack(self, rows):
        out = []
        for i, (shape, pad) in enumerate(zip(self.shapes, self.values)):
            parts = [r[i] for r in rows]
            target = [max(p.shape[d] for p in parts) if n is None else n for d, n in enumerate(shape)]
            batch = np.full([len(parts)] + target, pad, dtype=pad.dtype)
            for j, p in enumerate(parts):
                if p.ndim != len(target) or any(a > b for a, b in zip(p.shape, target)):
                    raise DataStructureError(f"padded_batch: component {i} of shape {p.shape} does not fit the "
                                             f"padded shape {tuple(target)}")
                batch[(j,) + tuple(slice(0, n) for n in p.shape)] = p
            out.append(batch)
        return out


class UnbatchDataset(Dataset):
    def __init__(self, input: Dataset):
        self.input = input
        specs = flatten(input.element_spec)
        if any(s.shape is not None and len(s.shape) == 0 for s in specs):
            raise DataStructureError("unbatch: every component needs a leading (batch) dimension")
        self.element_spec = map_structure(lambda s: TensorSpec(s.dtype, None if s.shape is None else s.shape[1:]),
                                          input.element_spec)

    def _inputs(self):
        return [self.input]

    def _iterate(self, ctx):
        for comps in self.input._iterate(ctx):
            for i in range(len(comps[0])):
                yield [c[i] for c in comps]


# -- order and count ------------------------------------------------------------------------------
class ShuffleDataset(Dataset):
    """TensorFlow's shuffle buffer: fill ``buffer_size`` elements, emit a random one, refill its slot."""

    def __init__(self, input: Dataset, buffer_size, seed, reshuffle_each_iteration):
        self.input = input
        self.size = _positive(buffer_size, "buffer_size")
        self.seed = None if seed is None else int(seed)
        self.reshuffle = bool(reshuffle_each_iteration)
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _rng(self, ctx) -> np.random.Generator:
        pipeline_seed, n = ctx.next_pass(self)
        return np.random.default_rng([self.seed if self.seed is not None else pipeline_seed, n if self.reshuffle else 0])

    def _rows(self, ctx):
        source = self.input._rows(ctx)
        if source is None:
            return None
        return RowSource(source.arrays, shuffle_buffer(source.indices, self.size, self._rng(ctx)))

    def _iterate(self, ctx):
        rng = self._rng(ctx)
        source = self.input._iterate(ctx)
        try:
            yield from shuffle_buffer(source, self.size, rng)
        finally:
            source.close()


class RepeatDataset(Dataset):
    def __init__(self, input: Dataset, count):
        self.input = input
        self.count = None if count is None or int(count) < 0 else int(count)
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _epochs(self, ctx, one_pass: Callable) -> Iterator:
        epoch = 0
        while self.count is None or epoch < self.count:
            produced = False
            for item in one_pass(ctx):
                produced = True
                yield item
            if not produced:  # an empty input repeated forever is still empty
                return
            epoch += 1

    def _rows(self, ctx):
        first = self.input._rows(ctx)
        if first is None:
            return None
        passes = [first]

        def one_pass(ctx):  # the first pass is the one already opened; its arrays serve every pass
            return passes.pop().indices if passes else self.input._rows(ctx).indices

        return RowSource(first.arrays, self._epochs(ctx, one_pass))

    def _iterate(self, ctx):
        return self._epochs(ctx, self.input._iterate)


class TakeDataset(Dataset):
    def __init__(self, input: Dataset, count):
        self.input, self.count = input, int(count)
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _rows(self, ctx):
        source = self.input._rows(ctx)
        if source is None:
            return None
        return RowSource(source.arrays, itertools.islice(source.indices, self.count if self.count >= 0 else None))

    def _iterate(self, ctx):
        if self.count == 0:
            return
        source = self.input._iterate(ctx)
        try:
            for n, comps in enumerate(source, 1):
                yield comps
                if n == self.count:
                    return
        finally:
            source.close()


class SkipDataset(Dataset):
    def __init__(self, input: Dataset, count):
        self.input, self.count = input, int(count)
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _rows(self, ctx):
        source = self.input._rows(ctx)
        if source is None:
            return None
        if self.count < 0:
            return RowSource(source.arrays, iter(()))
        return RowSource(source.arrays, itertools.islice(source.indices, self.count, None))

    def _iterate(self, ctx):
        for n, comps in enumerate(self.input._iterate(ctx)):
            if self.count >= 0 and n >= self.count:
                yield comps


class ShardDataset(Dataset):
    def __init__(self, input: Dataset, num_shards, index):
        self.input, self.shards, self.index = input, _positive(num_shards, "num_shards"), int(index)
        if not 0 <= self.index < self.shards:
            raise ValueError(f"shard index {index} is not in [0, {num_shards})")
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _iterate(self, ctx):
        for n, comps in enumerate(self.input._iterate(ctx)):
            if n % self.shards == self.index:
                yield comps


class CacheDataset(Dataset):
    """In memory: the first complete pass is kept and replayed (``filename`` other than "" is refused)."""

    def __init__(self, input: Dataset, filename):
        if filename:
            raise ValueError(f"cache({filename!r}): only the in-memory cache (filename='') is supported")
        self.input = input
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _iterate(self, ctx):
        cached = ctx.caches.get(id(self))
        if cached is not None:
            yield from cached
            return
        rows = []
        for comps in self.input._iterate(ctx):
            rows.append(comps)
            yield comps
        ctx.caches[id(self)] = rows  # only a complete pass is replayed


# -- running ahead ---------------------------------------------------------------------------------
_END = object()


class _Failure:
    def __init__(self, error: BaseException):
        self.error = error


class PrefetchDataset(Dataset):
    """A background thread keeps up to ``buffer_size`` elements ready, so input overlaps training."""

    def __init__(self, input: Dataset, buffer_size):
        self.input = input
        self.size = 2 if buffer_size in (None, AUTOTUNE) else _positive(buffer_size, "buffer_size")
        self.element_spec = input.element_spec

    def _inputs(self):
        return [self.input]

    def _iterate(self, ctx):
        ready: queue.Queue = queue.Queue(self.size)
        stop = threading.Event()
        source = self.input._iterate(ctx)

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    ready.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def produce():
            try:
                for comps in source:
                    if not put(comps):
                        return
                put(_END)
            except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised at its get_next
                put(_Failure(e))
            finally:
                source.close()

        thread = threading.Thread(target=produce, name="flowstack-data-prefetch", daemon=True)
        thread.start()
        try:
            while True:
                item = ready.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.error
                yield item
        finally:
            stop.set()
