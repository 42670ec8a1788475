"""Iterators: the graph's view of a dataset, and the session state behind it.

An iterator is a resource of the session (like a queue): its handle op creates it, ``MakeIterator``
(the ``initializer``) starts a pass over the dataset with the values of the tensors the dataset
captured, and each ``IteratorGetNext`` takes the next element, raising ``OutOfRangeError`` at the
end. The ops' kernels are in trainer/kernels/data.py. Datasets stay Python objects; the graph names them by a key in a per-graph table, so a graph
read back from a file keeps its iterators but needs its datasets rebuilt.
"""

from __future__ import annotations

import json
import threading
import weakref

from schemas.registry import TensorType
from trainer.data.dataset import Dataset, ElementTypes, TensorSpec
from trainer.data.structure import (DataStructureError, as_numpy_dtype, flatten, flatten_shapes, map_structure, pack_as,
                                    same_structure, shapes_like)
from trainer.errors import FailedPreconditionError, OutOfRangeError
from trainer.graph import TRAINER_DOMAIN, Graph, Tensor, get_default_graph

__all__ = [
    "Iterator", "IteratorState", "lookup_dataset", "make_initializable_iterator", "make_one_shot_iterator",
    "register_dataset",
]

_DATASETS: "weakref.WeakKeyDictionary[Graph, dict[str, Dataset]]" = weakref.WeakKeyDictionary()
_TABLE_LOCK = threading.Lock()


def register_dataset(graph: Graph, dataset: Dataset) -> str:
    """Keep ``dataset`` in ``graph``'s table; returns the key its iterator ops name it by."""
    with _TABLE_LOCK:
        table = _DATASETS.setdefault(graph, {})
        key = f"dataset_{len(table)}"
        table[key] = dataset
    return key


def lookup_dataset(graph: Graph, key: str, iterator: str) -> Dataset:
    """The dataset ``key`` of ``graph``'s table; FailedPreconditionError naming ``iterator`` if absent."""
    try:
        return _DATASETS[graph][key]
    except KeyError:
        raise FailedPreconditionError(
            f"iterator {iterator!r}: its dataset {key!r} is not in this process (a graph read back from a file "
            "keeps iterators but not the Python pipelines behind them); build the dataset and iterator again"
        ) from None


# -- session state ----------------------------------------------------------------------------------
class IteratorState:
    """One iterator's current pass; ``next`` is serialized, so several session threads may share it."""

    def __init__(self, name: str):
        self.name = name
        self.lock = threading.Lock()
        self.elements = None

    def start(self, dataset: Dataset, captured: dict) -> None:
        with self.lock:
            if self.elements is not None:
                self.elements.close()  # stops the old pass's prefetch and map threads
            self.elements = dataset.start(captured)

    def next(self) -> list:
        with self.lock:
            if self.elements is None:
                raise FailedPreconditionError(
                    f"iterator {self.name!r} is not initialized: run sess.run(iterator.initializer) first "
                    "(feeding any placeholders its dataset uses), or use make_one_shot_iterator()")
            try:
                return next(self.elements)
            except StopIteration:
                raise OutOfRangeError(f"iterator {self.name!r}: end of sequence") from None


# -- the graph side ---------------------------------------------------------------------------------
def _shape_attr(shape) -> str:
    return "" if shape is None else json.dumps([-1 if d is None else int(d) for d in shape])


class Iterator(ElementTypes):
    """``get_next()`` builds an op yielding the next element (same structure as the dataset's)."""

    def __init__(self, handle: Tensor, element_spec, initializer=None):
        self.handle = handle
        self.element_spec = element_spec
        self._initializer = initializer

    @staticmethod
    def from_structure(output_types, output_shapes=None, shared_name: str | None = None, output_classes=None):
        """A reinitializable iterator: ``make_initializer(ds)`` points it at any dataset of this structure."""
        types = map_structure(as_numpy_dtype, output_types)
        if output_shapes is None:
            shapes = [None] * len(flatten(types))
        else:
            shapes = flatten_shapes(types, shapes_like(types, output_shapes))
        spec = pack_as(types, [TensorSpec(d, s) for d, s in zip(flatten(types), shapes)])
        return Iterator(_handle_op("Iterator", [], shared_name, ""), spec)

    @property
    def initializer(self):
        if self._initializer is None:
            raise ValueError("this iterator has no initializer: a one-shot iterator starts itself, and one made "
                             "by Iterator.from_structure is started by make_initializer(dataset)")
        return self._initializer

    @property
    def graph(self) -> Graph:
        return self.handle.graph

    def make_initializer(self, dataset: Dataset, name: str | None = None):
        """The op that starts this iterator over ``dataset`` (whose element types must match)."""
        mine, theirs = self.element_spec, dataset.element_spec
        if not same_structure(mine, theirs) or [s.dtype for s in flatten(mine)] != [s.dtype for s in flatten(theirs)]:
            raise DataStructureError(f"make_initializer: the iterator's elements are {self.output_types}, the "
                                     f"dataset's {dataset.output_types}")
        g = self.graph
        with g.as_default():
            return g.create_op("MakeIterator", [self.handle, *dataset.captured_tensors()],
                               {"dataset": register_dataset(g, dataset)}, domain=TRAINER_DOMAIN,
                               name=name or f"{self.handle.node.name}/MakeIterator")

    def get_next(self, name: str | None = None):
        specs = flatten(self.element_spec)
        g = self.graph
        types = [TensorType(s.dtype, s.shape) for s in specs]
        node = g.create_op("IteratorGetNext", [self.handle],
                           {"output_types": [s.dtype.name for s in specs],
                            "output_shapes": [_shape_attr(s.shape) for s in specs]},
                           domain=TRAINER_DOMAIN, num_outputs=len(specs), output_types=types,
                           name=name or f"{self.handle.node.name}/IteratorGetNext")
        return pack_as(self.element_spec, node.outputs)


def _handle_op(op_type: str, captured: list[Tensor], shared_name: str | None, dataset_key: str,
               graph: Graph | None = None) -> Tensor:
    g = graph or get_default_graph()
    node = g.create_op(op_type, captured, {"dataset": dataset_key}, domain=TRAINER_DOMAIN,
                       name=shared_name or op_type, in_context=False)
    node.attrs["shared_name"] = shared_name or node.name
    return node.outputs[0]


def _graph_for(dataset: Dataset) -> Graph:
    graphs = {t.graph for t in dataset.captured_tensors()}
    if len(graphs) > 1:
        raise DataStructureError("the dataset captures tensors of several graphs")
    return graphs.pop() if graphs else get_default_graph()


def make_one_shot_iterator(dataset: Dataset) -> Iterator:
    """An iterator that starts itself on first use; its dataset may not read placeholders."""
    captured = dataset.captured_tensors()
    for t in captured:
        if t.node.op_type == "Placeholder":
            raise DataStructureError(
                f"a one-shot iterator cannot capture the placeholder {t.name!r}: its value would be needed at "
                "every step; use make_initializable_iterator() and feed it to iterator.initializer")
    g = _graph_for(dataset)
    with g.as_default():
        key = register_dataset(g, dataset)
        return Iterator(_handle_op("OneShotIterator", captured, None, key, g), dataset.element_spec)


def make_initializable_iterator(dataset: Dataset, shared_name: str | None = None) -> Iterator:
    """An iterator that ``sess.run(iterator.initializer, feed_dict)`` starts (and restarts)."""
    g = _graph_for(dataset)
    with g.as_default():
        it = Iterator(_handle_op("Iterator", [], shared_name, "", g), dataset.element_spec)
        it._initializer = it.make_initializer(dataset)
    return it
