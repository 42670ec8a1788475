"""``tf.data.experimental.scan``: a state carried across the elements, each output computed with it."""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer.data.dataset import Dataset, TensorSpec
from trainer.data.functions import spec_of, trace_with_state
from trainer.data.structure import DataStructureError, flatten, map_structure, pack_as

__all__ = ["ScanDataset", "scan"]


def _state_array(value) -> np.ndarray:
    """An initial state's component as a constant would hold it (Python floats are float32)."""
    if hasattr(value, "as_tensor") or type(value).__name__ == "Tensor":
        raise TypeError("scan: initial_state must be values (numbers, arrays), not graph tensors")
    arr = np.asarray(value)
    if arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)
    if arr.dtype.kind in "US":
        arr = arr.astype(object)
    return arr


class ScanDataset(Dataset):
    """``(state, output) = scan_func(state, element)`` for each element; the outputs are the elements."""

    def __init__(self, input: Dataset, initial_state, scan_func: Callable):
        self.input = input
        state = map_structure(_state_array, initial_state)
        self.initial = flatten(state)
        state_spec = pack_as(state, [TensorSpec(a.dtype, a.shape) for a in self.initial])
        self.fn, _ = trace_with_state(scan_func, state_spec, input.element_spec, "scan_func", self._new_state)
        self.state_size = len(self.initial)
        self.element_spec = spec_of(self.fn.output_structure[1])

    @staticmethod
    def _new_state(result):
        if not isinstance(result, tuple) or len(result) != 2:
            raise DataStructureError("`scan_func` must return a pair `(new_state, output_element)`")
        return result[0]

    def cardinality(self) -> int:
        return self.input.cardinality()

    def input_datasets(self):
        return [self.input]

    def elements(self, ctx):
        state = list(self.initial)
        for comps in self.input.elements(ctx):
            out = self.fn.run(state + comps, ctx)
            state, element = out[:self.state_size], out[self.state_size:]
            yield element


def scan(initial_state, scan_func: Callable) -> Callable[[Dataset], Dataset]:
    """A running computation: ``scan_func(state, element)`` gives ``(new_state, output_element)``,
    the state starting at ``initial_state``.

    >>> import trainer as tf
    >>> sums = tf.data.Dataset.range(5).apply(scan(np.int64(0), lambda s, x: (s + x, s + x)))
    >>> sums.output_types
    dtype('int64')
    """
    return lambda dataset: ScanDataset(dataset, initial_state, scan_func)
