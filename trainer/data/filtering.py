"""Datasets that keep part of their input by a rule: ``take_while``, ``unique``, ``ignore_errors``
(``tf.data.experimental``'s), each for ``dataset.apply(...)``."""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer.data.dataset import Dataset
from trainer.data.functions import ELEMENT_ERRORS, TracedFunction
from trainer.data.structure import DataStructureError, describe, flatten
from trainer.kernels.debugging import InvalidArgumentError

__all__ = ["IgnoreErrorsDataset", "TakeWhileDataset", "UniqueDataset", "ignore_errors", "take_while", "unique"]


class TakeWhileDataset(Dataset):
    """The input's elements up to (not including) the first for which ``predicate`` is false."""

    def __init__(self, input: Dataset, predicate: Callable):
        self.input = input
        self.fn = TracedFunction(predicate, input.element_spec, "take_while")
        out = self.fn.output_structure
        if isinstance(out, (tuple, dict)) or out.dtype != np.bool_ or out.shape not in ((), None):
            raise DataStructureError(f"`predicate` must return a scalar boolean tensor, got "
                                     f"{describe(out) if isinstance(out, (tuple, dict)) else out}")
        self.element_spec = input.element_spec

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        source = self.input.elements(ctx)
        try:
            for comps in source:
                if not bool(self.fn.run(comps, ctx)[0]):
                    return
                yield comps
        finally:
            source.close()


_UNIQUE_TYPES = (np.dtype(np.int32), np.dtype(np.int64), np.dtype(object))


class UniqueDataset(Dataset):
    """Each distinct element once, in the order first seen; elements are int32, int64 or string scalars."""

    def __init__(self, input: Dataset):
        specs = flatten(input.element_spec)
        if len(specs) != 1 or np.dtype(specs[0].dtype) not in _UNIQUE_TYPES:
            raise TypeError("`tf.data.experimental.unique()` only supports inputs with a single `tf.int32`, "
                            f"`tf.int64`, or `tf.string` component; got {input.output_types}")
        if specs[0].shape not in ((), None):
            raise DataStructureError(f"`tf.data.experimental.unique()` only supports scalar elements; got shape "
                                     f"{specs[0].shape}")
        self.input = input
        self.element_spec = input.element_spec

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        seen: set = set()
        for comps in self.input.elements(ctx):
            value = np.asarray(comps[0])
            if value.shape != ():
                raise InvalidArgumentError(f"unique: elements must be scalars, got shape {value.shape}")
            key = value.item()
            if key not in seen:
                seen.add(key)
                yield comps


class IgnoreErrorsDataset(Dataset):
    """The input's elements less those that failed: a map or filter function below drops an element
    it fails on (the context tells it to); an error from anything else ends the input here, as the
    failed stage cannot resume."""

    def __init__(self, input: Dataset):
        self.input = input
        self.element_spec = input.element_spec

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        source = self.input.elements(ctx.skipping_failed_elements())
        try:
            while True:
                try:
                    comps = next(source)
                except StopIteration:
                    return
                except ELEMENT_ERRORS:
                    return
                yield comps
        finally:
            source.close()


def take_while(predicate: Callable) -> Callable[[Dataset], Dataset]:
    """Elements while the scalar bool ``predicate(element)`` holds; the first false one ends the dataset."""
    return lambda dataset: TakeWhileDataset(dataset, predicate)


def unique() -> Callable[[Dataset], Dataset]:
    """Each distinct element once (int32, int64 or string scalars), in the order first seen."""
    return UniqueDataset


def ignore_errors() -> Callable[[Dataset], Dataset]:
    """The elements less those whose computation raised an error (a map function failing on them)."""
    return IgnoreErrorsDataset
