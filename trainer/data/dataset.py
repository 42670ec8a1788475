"""``Dataset``: an input pipeline described as a chain of sources and transformations.

A dataset is a recipe, not data: it runs only when an iterator starts it in a session
(trainer/data/iterator.py), each start a fresh pass. The concrete datasets live in sources.py,
transformations.py and prefetch.py; the TF1 methods here build them. Internally an element is a
flat list of NumPy components (``flatten`` of the element structure); ``element_spec`` keeps the
structure with a ``TensorSpec`` (dtype, shape) per component. Sources may capture graph tensors (a placeholder
fed with the iterator's initializer, as TF1 scripts do); their values reach the pipeline through
the ``IterationContext`` of the pass.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from trainer.data.functions import TracedFunction
from trainer.data.rows import SHUFFLE_DRAW_BLOCK
from trainer.data.structure import DataStructureError, map_structure
from trainer.graph import Tensor

__all__ = [
    "AUTOTUNE", "Dataset", "INFINITE_CARDINALITY", "IterationContext", "RowSource", "TensorSpec",
    "UNKNOWN_CARDINALITY", "positive_int", "shuffle_buffer", "thread_count",
]

AUTOTUNE = -1
INFINITE_CARDINALITY = -1  # what Dataset.cardinality() gives for a dataset without end
UNKNOWN_CARDINALITY = -2  # ... and for one whose length is known only by running it (after filter)


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
        # Set below ignore_errors(): functions (map, filter) drop an element they fail on.
        self.skip_failed_elements = parent is not None and parent.skip_failed_elements
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

    def skipping_failed_elements(self) -> "IterationContext":
        """This pass's context for the input of ``ignore_errors``."""
        child = IterationContext(self.captured, parent=self)
        child.skip_failed_elements = True
        return child

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
    """Elements that are rows ``[a[i] for a in arrays]`` for ``i`` in the blocks of ``indices``.

    Sliced sources and the order-only transformations over them (shuffle, repeat, take, skip)
    pass blocks of row indices (trainer/data/rows.py) instead of elements, so ``batch`` gathers
    each component with one fancy index rather than stacking rows one by one (issue 21's speed
    target: 64 rows per step cost ~0.4 ms as elements, a few microseconds as indices). The
    elements are the same either way.
    """

    arrays: list
    indices: Iterator[np.ndarray]


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
            draws = rng.integers(size, size=SHUFFLE_DRAW_BLOCK).tolist()
        i = draws.pop()
        yield buf[i]
        buf[i] = item
    if buf:  # the input ended: the rest in a random order, one permutation (drawn in C, not per item)
        for i in rng.permutation(len(buf)).tolist():
            yield buf[i]


class ElementTypes:
    """TF 1.x's ``output_types``/``output_shapes``/``output_classes`` of anything with an
    ``element_spec`` (datasets and iterators)."""

    @property
    def output_types(self):
        return map_structure(lambda s: s.dtype, self.element_spec)

    @property
    def output_shapes(self):
        return map_structure(lambda s: s.shape, self.element_spec)

    @property
    def output_classes(self):
        return map_structure(lambda s: Tensor, self.element_spec)


class Dataset(ElementTypes):
    """Base of every dataset: ``element_spec`` plus ``elements(ctx)``; the TF1 methods build new datasets."""

    element_spec = None  # a structure of TensorSpec

    def elements(self, ctx: IterationContext) -> Iterator[list]:
        """One pass over the elements, each a flat list of components, as the pipeline's stages
        call it on their inputs."""
        raise NotImplementedError(type(self).__name__)

    def row_source(self, ctx: IterationContext) -> "RowSource | None":
        """The elements as rows of arrays, if they are (see RowSource); None where they are not."""
        return None

    def cardinality(self) -> int:
        """How many elements a pass gives, as far as it is known without running the pipeline:
        ``INFINITE_CARDINALITY``, ``UNKNOWN_CARDINALITY`` or the count (TensorFlow's rules)."""
        return UNKNOWN_CARDINALITY

    def input_datasets(self) -> list["Dataset"]:
        """The datasets this one reads from."""
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
        functions = [t for f in vars(self).values() if isinstance(f, TracedFunction) for t in f.captured]
        return self._own_captured() + functions + [t for d in self.input_datasets() for t in d._all_captured()]

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

    def start(self, captured: dict) -> Iterator[list]:
        """A fresh pass: each element's flat components, given the captured tensors' values."""
        return self.elements(IterationContext(captured))

    def make_initializable_iterator(self, shared_name: str | None = None):
        from trainer.data.iterator import make_initializable_iterator

        return make_initializable_iterator(self, shared_name)


def positive_int(value, what: str) -> int:
    """``value`` as a positive Python int; ``what`` names it in the error."""
    if isinstance(value, Tensor):
        raise TypeError(f"{what} must be a Python int here, not the tensor {value.name}")
    n = int(value)
    if n <= 0:
        raise ValueError(f"{what} must be positive, got {value}")
    return n


def thread_count(n) -> int:
    """Threads for ``num_parallel_calls``: AUTOTUNE means one per core."""
    return (os.cpu_count() or 1) if n == AUTOTUNE else positive_int(n, "num_parallel_calls")


# The concrete datasets subclass Dataset, so they come after it (its methods above build them).
from trainer.data.prefetch import PrefetchDataset  # noqa: E402
from trainer.data.sources import (ConcatenateDataset, GeneratorDataset, RangeDataset, TensorDataset,  # noqa: E402
                                  TensorSliceDataset, ZipDataset)
from trainer.data.transformations import (BatchDataset, CacheDataset, FilterDataset, InterleaveDataset,  # noqa: E402
                                          MapDataset, PaddedBatchDataset, RepeatDataset, ShardDataset,
                                          ShuffleDataset, SkipDataset, TakeDataset, UnbatchDataset)
