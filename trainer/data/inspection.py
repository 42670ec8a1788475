"""Functions of a whole dataset that give a tensor: ``cardinality`` and ``get_single_element``."""

from __future__ import annotations

import numpy as np

from trainer.data.dataset import Dataset
from trainer.data.iterator import make_initializable_iterator
from trainer.graph import control_dependencies
from trainer.kernels.debugging import InvalidArgumentError

__all__ = ["SingleElementDataset", "cardinality", "get_single_element"]


def _dataset(value, what: str) -> Dataset:
    if not isinstance(value, Dataset):
        raise TypeError(f"{what}: `dataset` must be a Dataset, got {type(value).__name__}")
    return value


def cardinality(dataset: Dataset):
    """A scalar int64 tensor: the dataset's element count, ``INFINITE_CARDINALITY`` (-1) or
    ``UNKNOWN_CARDINALITY`` (-2), by TensorFlow's rules (unknown after filter, flat_map, a generator)."""
    from trainer.ops import constant

    return constant(np.int64(_dataset(dataset, "cardinality").cardinality()), name="cardinality")


class SingleElementDataset(Dataset):
    """The input's only element; an InvalidArgumentError if it has none or more than one."""

    def __init__(self, input: Dataset):
        self.input = input
        self.element_spec = input.element_spec

    def input_datasets(self):
        return [self.input]

    def cardinality(self) -> int:
        return 1

    def elements(self, ctx):
        source = self.input.elements(ctx)
        try:
            first = next(source, None)
            if first is None:
                raise InvalidArgumentError("get_single_element: the dataset was empty; it must have exactly one "
                                           "element")
            if next(source, None) is not None:
                raise InvalidArgumentError("get_single_element: the dataset had more than one element; it must have "
                                           "exactly one")
        finally:
            source.close()
        yield first


def get_single_element(dataset: Dataset):
    """The only element of ``dataset``, as tensors of its structure: each run of them runs the
    dataset afresh in the session (an InvalidArgumentError if it has 0 or more than 1 elements)."""
    iterator = make_initializable_iterator(SingleElementDataset(_dataset(dataset, "get_single_element")))
    with control_dependencies([iterator.initializer]):
        return iterator.get_next(name="get_single_element")
