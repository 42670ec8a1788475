"""Datasets that make elements: slices of arrays or tensors, one tensor, a range, a generator;
and the ones that join datasets (zip, concatenate)."""

from __future__ import annotations

import numpy as np

from trainer.data.dataset import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset, RowSource, TensorSpec
from trainer.data.rows import index_blocks
from trainer.data.structure import (DataStructureError, as_numpy_dtype, describe, flatten, flatten_shapes,
                                    is_nest, map_structure, pack_as, same_structure, shapes_like)
from trainer.graph import Tensor

__all__ = ["ConcatenateDataset", "GeneratorDataset", "RangeDataset", "TensorDataset", "TensorSliceDataset",
           "ZipDataset"]


def _source_array(value):
    """A source leaf: a graph tensor stays (captured), anything else becomes an array as ``constant`` would."""
    if isinstance(value, Tensor):
        return value
    if hasattr(value, "as_tensor"):
        return value.as_tensor()
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)  # Python floats are float32, as in TensorFlow
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    return arr


class TensorSliceDataset(Dataset):
    def __init__(self, tensors):
        if isinstance(tensors, list):
            arrays_inside = any(isinstance(t, (np.ndarray, Tensor)) for t in tensors)
            tensors = tuple(tensors) if arrays_inside else np.asarray(tensors)
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

    def cardinality(self) -> int:
        shape = flatten(self.structure)[0].shape
        return UNKNOWN_CARDINALITY if shape is None or shape[0] is None else int(shape[0])

    def _own_captured(self):
        return [t for t in flatten(self.structure) if isinstance(t, Tensor)]

    def row_source(self, ctx):
        arrays = [ctx.value(t) if isinstance(t, Tensor) else t for t in flatten(self.structure)]
        lengths = {len(a) for a in arrays}
        if len(lengths) > 1:
            raise DataStructureError(f"from_tensor_slices: the fed components differ in their first dimension: "
                                     f"{[a.shape for a in arrays]}")
        return RowSource(arrays, index_blocks(lengths.pop()))

    def elements(self, ctx):
        rows = self.row_source(ctx)
        for block in rows.indices:
            for i in block.tolist():
                yield [np.asarray(a[i]) for a in rows.arrays]


class TensorDataset(Dataset):
    def __init__(self, tensors):
        self.structure = map_structure(_source_array, tensors)
        self.element_spec = map_structure(lambda t: TensorSpec(t.dtype, t.shape), self.structure)

    def cardinality(self) -> int:
        return 1

    def _own_captured(self):
        return [t for t in flatten(self.structure) if isinstance(t, Tensor)]

    def elements(self, ctx):
        yield [ctx.value(t) if isinstance(t, Tensor) else t for t in flatten(self.structure)]


class RangeDataset(Dataset):
    def __init__(self, *args):
        if not 1 <= len(args) <= 3:
            raise TypeError(f"range takes 1 to 3 arguments (stop or start, stop[, step]), got {len(args)}")
        self.bounds = range(*(int(a) for a in args))
        self.element_spec = TensorSpec(np.dtype(np.int64), ())

    def cardinality(self) -> int:
        return len(self.bounds)

    def elements(self, ctx):
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
                shapes = shapes_like(types, output_shapes)
            except DataStructureError as e:
                raise DataStructureError(f"from_generator: output_shapes do not fit output_types: {e}") from None
        self.types = types
        specs = [TensorSpec(d, s) for d, s in zip(flatten(types), flatten_shapes(types, shapes))]
        self.element_spec = pack_as(types, specs)

    def elements(self, ctx):
        specs = flatten(self.element_spec)
        for n, element in enumerate(self.generator(*self.args)):
            if isinstance(element, list):
                element = tuple(element)
            if not same_structure(self.types, element) or (not is_nest(self.types) and is_nest(element)):
                raise DataStructureError(f"from_generator: element {n} has structure {describe(element)}, but "
                                         f"output_types declares {describe(self.types)}")
            yield [_checked_component(v, spec, f"from_generator: element {n} component {i}")
                   for i, (v, spec) in enumerate(zip(flatten(element), specs))]


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
        self.element_spec = _map_datasets(lambda d: d.element_spec, datasets)

    def cardinality(self) -> int:
        counts = [d.cardinality() for d in flatten(self.datasets)]
        if UNKNOWN_CARDINALITY in counts:
            return UNKNOWN_CARDINALITY
        finite = [n for n in counts if n != INFINITE_CARDINALITY]
        return min(finite) if finite else INFINITE_CARDINALITY

    def input_datasets(self):
        return flatten(self.datasets)

    def elements(self, ctx):
        # Components of the zipped element: each dataset's flat components, in flatten(datasets) order.
        iters = [d.elements(ctx) for d in flatten(self.datasets)]
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


def _map_datasets(fn, datasets):
    if isinstance(datasets, dict):
        return {k: _map_datasets(fn, v) for k, v in datasets.items()}
    if isinstance(datasets, tuple):
        return tuple(_map_datasets(fn, v) for v in datasets)
    return fn(datasets)


class ConcatenateDataset(Dataset):
    def __init__(self, first: Dataset, second: Dataset):
        a, b = first.element_spec, second.element_spec
        if not same_structure(a, b) or [s.dtype for s in flatten(a)] != [s.dtype for s in flatten(b)]:
            raise DataStructureError(f"concatenate: the datasets' elements differ: {first.output_types} vs "
                                     f"{second.output_types}")
        self.first, self.second = first, second
        self.element_spec = pack_as(a, [x.most_specific_common(y) for x, y in zip(flatten(a), flatten(b))])

    def cardinality(self) -> int:
        a, b = self.first.cardinality(), self.second.cardinality()
        if UNKNOWN_CARDINALITY in (a, b):
            return UNKNOWN_CARDINALITY
        return INFINITE_CARDINALITY if INFINITE_CARDINALITY in (a, b) else a + b

    def input_datasets(self):
        return [self.first, self.second]

    def elements(self, ctx):
        yield from self.first.elements(ctx)
        yield from self.second.elements(ctx)
