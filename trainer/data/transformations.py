"""Datasets that transform another: map, filter, interleave; batching; order and count."""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator

import numpy as np

from trainer.data.dataset import (AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, RowSource,
                                  TensorSpec, positive_int, shuffle_buffer, thread_count)
from trainer.data.functions import TracedFunction
from trainer.graph import Tensor
from trainer.data.rows import regroup, shuffle_blocks, skip_blocks, take_blocks
from trainer.data.structure import (DataStructureError, describe, flatten, flatten_shapes, map_structure, pack_as,
                                    shapes_like)

__all__ = ["BatchDataset", "CacheDataset", "FilterDataset", "InterleaveDataset", "MapDataset", "PaddedBatchDataset",
           "RepeatDataset", "ShardDataset", "ShuffleDataset", "SkipDataset", "TakeDataset", "UnbatchDataset"]


# -- element-wise ---------------------------------------------------------------------------------
class MapDataset(Dataset):
    def __init__(self, input: Dataset, map_func, num_parallel_calls):
        self.input = input
        self.fn = TracedFunction(map_func, input.element_spec, "map")
        self.threads = 1 if num_parallel_calls is None else thread_count(num_parallel_calls)
        self.element_spec = map_structure(lambda t: TensorSpec(t.dtype, t.shape), self.fn.output_structure)

    def cardinality(self) -> int:
        return self.input.cardinality()

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        run = self.fn.run_or_none if ctx.skip_failed_elements else self.fn.run
        if self.threads == 1:
            for comps in self.input.elements(ctx):
                out = run(comps, ctx)
                if out is not None:
                    yield out
            return
        # Results in input order; up to `threads` elements in flight on the pool.
        pool = ThreadPoolExecutor(self.threads, thread_name_prefix="flowstack-data-map")
        pending: deque = deque()
        source = self.input.elements(ctx)
        try:
            for comps in source:
                pending.append(pool.submit(run, comps, ctx))
                if len(pending) >= self.threads:
                    out = pending.popleft().result()
                    if out is not None:
                        yield out
            while pending:
                out = pending.popleft().result()
                if out is not None:
                    yield out
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

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        run = self.fn.run_or_none if ctx.skip_failed_elements else self.fn.run
        for comps in self.input.elements(ctx):
            keep = run(comps, ctx)
            if keep is not None and bool(keep[0]):
                yield comps


class InterleaveDataset(Dataset):
    """``flat_map`` (cycle 1) and ``interleave``: each element opens a dataset, read round-robin in blocks."""

    def __init__(self, input: Dataset, map_func, cycle_length, block_length):
        self.input = input
        self.fn = TracedFunction(map_func, input.element_spec, "interleave", returns_dataset=True)
        auto = cycle_length in (None, AUTOTUNE)
        self.cycle = (os.cpu_count() or 1) if auto else positive_int(cycle_length, "cycle_length")
        self.block = positive_int(block_length, "block_length")
        self.element_spec = self.fn.dataset.element_spec

    def input_datasets(self):
        return [self.input]

    def _open(self, ctx, comps):
        captured = dict(zip(self.fn.outputs, self.fn.run(comps, ctx)))
        return self.fn.dataset.elements(ctx.with_captured(captured))

    def elements(self, ctx):
        source = self.input.elements(ctx)
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
        self.size = positive_int(batch_size, "batch_size")
        self.drop_remainder = bool(drop_remainder)
        lead = self.size if self.drop_remainder else None
        self.element_spec = map_structure(
            lambda s: TensorSpec(s.dtype, None if s.shape is None else (lead,) + tuple(s.shape)), input.element_spec)

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n < 0:
            return n
        return n // self.size if self.drop_remainder else -(-n // self.size)

    def input_datasets(self):
        return [self.input]

    def _stack(self, rows: list[list]) -> list:
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

    def elements(self, ctx):
        source = self.input.row_source(ctx)
        if source is not None and type(self) is BatchDataset:
            yield from self._gather(source)
            return
        rows: list = []
        for comps in self.input.elements(ctx):
            rows.append(comps)
            if len(rows) == self.size:
                yield self._stack(rows)
                rows = []
        if rows and not self.drop_remainder:
            yield self._stack(rows)

    def _gather(self, source: RowSource):
        for idx in regroup(source.indices, self.size):
            if self.drop_remainder and len(idx) < self.size:
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
            shapes = flatten_shapes(input.element_spec, shapes_like(input.output_types, padded_shapes))
        if any(s is None for s in shapes):
            raise DataStructureError("padded_batch needs padded_shapes for components of unknown rank")
        self.shapes = shapes
        values = [0] * len(specs) if padding_values is None else flatten(padding_values)
        if len(values) != len(specs):
            raise DataStructureError(f"padded_batch: padding_values has {len(values)} components, elements have "
                                     f"{len(specs)}")
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

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        for comps in self.input.elements(ctx):
            for i in range(len(comps[0])):
                yield [c[i] for c in comps]


# -- order and count ------------------------------------------------------------------------------
class ShuffleDataset(Dataset):
    """TensorFlow's shuffle buffer: fill ``buffer_size`` elements, emit a random one, refill its slot."""

    def __init__(self, input: Dataset, buffer_size, seed, reshuffle_each_iteration):
        self.input = input
        self.size = positive_int(buffer_size, "buffer_size")
        self.seed = None if seed is None else int(seed)
        self.reshuffle = bool(reshuffle_each_iteration)
        self.element_spec = input.element_spec

    def cardinality(self) -> int:
        return self.input.cardinality()

    def input_datasets(self):
        return [self.input]

    def _rng(self, ctx) -> np.random.Generator:
        pipeline_seed, n = ctx.next_pass(self)
        seed = self.seed if self.seed is not None else pipeline_seed
        return np.random.default_rng([seed, n if self.reshuffle else 0])

    def row_source(self, ctx):
        source = self.input.row_source(ctx)
        if source is None:
            return None
        return RowSource(source.arrays, shuffle_blocks(source.indices, self.size, self._rng(ctx)))

    def elements(self, ctx):
        rng = self._rng(ctx)
        source = self.input.elements(ctx)
        try:
            yield from shuffle_buffer(source, self.size, rng)
        finally:
            source.close()


def _count_or_tensor(count):
    """A count given as a number, kept as an int, or as a scalar tensor (read when the pipeline runs:
    ``from_tensors(x).repeat(n)`` inside ``flat_map``), kept as the tensor."""
    return count if isinstance(count, Tensor) else int(count)


def _count(ctx, count) -> int:
    return int(np.asarray(ctx.value(count)).reshape(())) if isinstance(count, Tensor) else count


class RepeatDataset(Dataset):
    def __init__(self, input: Dataset, count):
        self.input = input
        self.count = -1 if count is None else _count_or_tensor(count)  # below 0: forever
        self.element_spec = input.element_spec

    def cardinality(self) -> int:
        if isinstance(self.count, Tensor):
            return UNKNOWN_CARDINALITY
        n = self.input.cardinality()
        if self.count < 0:
            return 0 if n == 0 else INFINITE_CARDINALITY
        if self.count == 0:
            return 0
        return n if n < 0 else n * self.count

    def input_datasets(self):
        return [self.input]

    def _own_captured(self):
        return [self.count] if isinstance(self.count, Tensor) else []

    def _epochs(self, ctx, one_pass: Callable) -> Iterator:
        epoch, count = 0, _count(ctx, self.count)
        while count < 0 or epoch < count:
            produced = False
            for item in one_pass(ctx):
                produced = True
                yield item
            if not produced:  # an empty input repeated forever is still empty
                return
            epoch += 1

    def row_source(self, ctx):
        first = self.input.row_source(ctx)
        if first is None:
            return None
        passes = [first]

        def one_pass(ctx):  # the first pass is the one already opened; its arrays serve every pass
            return passes.pop().indices if passes else self.input.row_source(ctx).indices

        return RowSource(first.arrays, self._epochs(ctx, one_pass))

    def elements(self, ctx):
        return self._epochs(ctx, self.input.elements)


class CountedRowsDataset(Dataset):
    """Keeps part of its input by a row count (Take, Skip); ``select_blocks`` cuts the row blocks."""

    select_blocks: Callable

    def __init__(self, input: Dataset, count):
        self.input, self.count = input, _count_or_tensor(count)
        self.element_spec = input.element_spec

    def input_datasets(self):
        return [self.input]

    def _own_captured(self):
        return [self.count] if isinstance(self.count, Tensor) else []

    def row_source(self, ctx):
        source = self.input.row_source(ctx)
        if source is None:
            return None
        return RowSource(source.arrays, self.select_blocks(source.indices, _count(ctx, self.count)))


class TakeDataset(CountedRowsDataset):
    select_blocks = staticmethod(take_blocks)

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if isinstance(self.count, Tensor) or n == UNKNOWN_CARDINALITY:
            return UNKNOWN_CARDINALITY
        if self.count < 0:
            return n
        return self.count if n == INFINITE_CARDINALITY else min(n, self.count)

    def elements(self, ctx):
        count = _count(ctx, self.count)
        if count == 0:
            return
        source = self.input.elements(ctx)
        try:
            for n, comps in enumerate(source, 1):
                yield comps
                if n == count:
                    return
        finally:
            source.close()


class SkipDataset(CountedRowsDataset):
    select_blocks = staticmethod(skip_blocks)

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if isinstance(self.count, Tensor):
            return UNKNOWN_CARDINALITY
        if n < 0:
            return n
        return 0 if self.count < 0 else max(0, n - self.count)

    def elements(self, ctx):
        count = _count(ctx, self.count)
        for n, comps in enumerate(self.input.elements(ctx)):
            if count >= 0 and n >= count:
                yield comps


class ShardDataset(Dataset):
    def __init__(self, input: Dataset, num_shards, index):
        self.input, self.shards, self.index = input, positive_int(num_shards, "num_shards"), int(index)
        if not 0 <= self.index < self.shards:
            raise ValueError(f"shard index {index} is not in [0, {num_shards})")
        self.element_spec = input.element_spec

    def cardinality(self) -> int:
        n = self.input.cardinality()
        if n < 0:
            return n
        return n // self.shards + (1 if self.index < n % self.shards else 0)

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        for n, comps in enumerate(self.input.elements(ctx)):
            if n % self.shards == self.index:
                yield comps


class CacheDataset(Dataset):
    """In memory: the first complete pass is kept and replayed (``filename`` other than "" is refused)."""

    def __init__(self, input: Dataset, filename):
        if filename:
            raise ValueError(f"cache({filename!r}): only the in-memory cache (filename='') is supported")
        self.input = input
        self.element_spec = input.element_spec

    def cardinality(self) -> int:
        return self.input.cardinality()

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        cached = ctx.caches.get(id(self))
        if cached is not None:
            yield from cached
            return
        rows = []
        for comps in self.input.elements(ctx):
            rows.append(comps)
            yield comps
        ctx.caches[id(self)] = rows  # only a complete pass is replayed
