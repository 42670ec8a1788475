"""Dataset functions (``map``, ``filter``, ``flat_map``): written with graph ops, as in TensorFlow 1.x.

The user's function is called once, on placeholders shaped like one element, inside a graph of its
own; each element then runs that graph in a private session. A tensor of the graph the pipeline is
built in (a constant, a lookup table's keys, a placeholder) that the function reads is captured, as
TensorFlow captures it: it becomes a placeholder of the function's graph, the dataset lists it among
its captured tensors, and each pass feeds it the value the iterator computed (by value, once per
pass). A function nested in another (``flat_map``'s dataset mapping an element) captures its
caller's tensors the same way. Its result must be a tensor (or a
value a constant can hold), or a tuple or dict of them; for ``flat_map`` and ``interleave``, a
Dataset, whose captured tensors are computed from the element the same way.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer.data.structure import DataStructureError, describe, flatten, map_structure, pack_as
from trainer.errors import OpError, OutOfRangeError
from trainer.graph import Graph, GraphError, Tensor, get_default_graph
from trainer.ops import convert_to_tensor, placeholder

__all__ = ["ELEMENT_ERRORS", "TracedFunction", "call_with_element", "spec_of", "trace_with_state"]

# What a function failing on one element raises (TensorFlow's non-OK statuses but end of sequence).
ELEMENT_ERRORS = tuple(e for e in OpError if e is not OutOfRangeError)


def call_with_element(fn: Callable, element):
    """TensorFlow's calling convention: a tuple element is spread over the arguments."""
    if isinstance(element, tuple):
        return fn(*element)
    return fn(element)


class TracedFunction:
    """``fn`` traced over one element of ``element_spec``; call it with flat component lists."""

    def __init__(self, fn: Callable, element_spec, what: str, *, returns_dataset: bool = False):
        self.what = what
        self.graph = Graph()
        self.captured: list[Tensor] = []  # the callers' tensors read, in their own graph
        self.capture_placeholders: list[Tensor] = []
        caller = get_default_graph()
        self.graph.capture = lambda tensor: self._capture(tensor, caller)
        name = getattr(fn, "__name__", type(fn).__name__)
        try:
            with self.graph.as_default():
                self.placeholders = [placeholder(s.dtype, s.shape, name=f"arg{i}")
                                     for i, s in enumerate(flatten(element_spec))]
                try:
                    result = call_with_element(fn, pack_as(element_spec, self.placeholders))
                except GraphError as e:
                    raise GraphError(f"{what} function {name!r}: {e}") from e
                if returns_dataset:
                    self.dataset = _check_dataset(result, what, name)
                    outputs = self.dataset.captured_tensors()
                    self.output_structure = None
                else:
                    self.output_structure = map_structure(self._own, _as_tensors(result, what, name))
                    outputs = flatten(self.output_structure)
                self.outputs = list(outputs)
                from trainer.variables import global_variables, variables_initializer

                init = variables_initializer(global_variables()) if global_variables() else None
        finally:
            self.graph.capture = None
        from trainer.session import Session

        self.session = Session(self.graph)
        if init is not None:
            self.session.run(init)

    def _own(self, tensor: Tensor) -> Tensor:
        """An output of this function's graph: a caller's tensor returned as it is is captured."""
        return tensor if tensor.node.graph is self.graph else self.graph.capture(tensor)

    def _capture(self, tensor: Tensor, caller: Graph) -> Tensor:
        """The placeholder standing for ``tensor`` of another graph; a tensor of a graph above the
        caller's (a nested function reading the pipeline's graph) is captured by the caller first."""
        if tensor.node.graph is not caller and caller.capture is not None:
            tensor = caller.capture(tensor)
        for known, stand_in in zip(self.captured, self.capture_placeholders):
            if known is tensor:
                return stand_in
        with self.graph.as_default():
            stand_in = placeholder(tensor.dtype, tensor.shape, name=f"captured{len(self.captured)}")
        self.captured.append(tensor)
        self.capture_placeholders.append(stand_in)
        return stand_in

    def run(self, components, ctx=None) -> list[np.ndarray]:
        """The function's flat outputs for one element's flat components; ``ctx`` (the pass's
        IterationContext) gives the captured tensors' values."""
        if not self.outputs:
            return []
        feed = dict(zip(self.placeholders, components))
        if self.captured:
            if ctx is None:
                raise DataStructureError(f"{self.what} function reads tensors of the pipeline's graph "
                                         f"({', '.join(t.name for t in self.captured)}) but was run without them")
            feed.update((p, ctx.value(t)) for p, t in zip(self.capture_placeholders, self.captured))
        return self.session.run(self.outputs, feed)

    def run_or_none(self, components, ctx=None) -> list[np.ndarray] | None:
        """``run``, or None where the function fails on this element (an op error): how the
        functions below ``ignore_errors()`` drop the element."""
        try:
            return self.run(components, ctx)
        except ELEMENT_ERRORS:
            return None


def _as_tensors(result, what: str, name: str):
    if result is None:
        raise DataStructureError(f"{what} function {name!r} returned None; it must return a tensor, "
                                 "or a tuple or dict of tensors")
    if isinstance(result, list):
        result = tuple(result)
    from trainer.data.dataset import Dataset

    def convert(leaf, path):
        if isinstance(leaf, Dataset):
            raise DataStructureError(f"{what} function {name!r} returned a Dataset at {path}; use flat_map or "
                                     "interleave for functions that return datasets")
        problem = None
        if not isinstance(leaf, Tensor) and not hasattr(leaf, "as_tensor"):
            kind = np.asarray(leaf).dtype.kind if not isinstance(leaf, (str, bytes)) else "U"
            problem = "it is not a tensor, a number or a string" if kind == "O" else None
        if problem is None:
            try:
                return convert_to_tensor(leaf)
            except (TypeError, ValueError) as e:
                problem = str(e)
        raise DataStructureError(f"{what} function {name!r} returned {type(leaf).__name__} {str(leaf)[:60]} at "
                                 f"{path} of {describe(result)}: {problem}")

    leaves = flatten(result)
    return pack_as(result, [convert(leaf, f"component {i}") for i, leaf in enumerate(leaves)])


def _check_dataset(result, what: str, name: str):
    from trainer.data.dataset import Dataset

    if not isinstance(result, Dataset):
        raise DataStructureError(f"{what} function {name!r} must return a Dataset, got {type(result).__name__}")
    return result


def spec_of(structure):
    """The TensorSpec structure of a traced function's output tensors."""
    from trainer.data.dataset import TensorSpec

    return map_structure(lambda t: TensorSpec(np.dtype(t.dtype), t.shape), structure)


def trace_with_state(fn: Callable, state_spec, element_spec, what: str,
                     new_state: Callable = lambda out: out) -> tuple["TracedFunction", object]:
    """``fn(state, element)`` traced, and the state's spec it was traced with.

    The state must keep its structure and dtypes (``new_state`` picks it from the result); where its
    shape changes from step to step, ``fn`` is traced again over the shape common to both, as
    TensorFlow relaxes a scan's or reducer's state shape.
    """
    traced = TracedFunction(fn, (state_spec, element_spec), what)
    given, returned = flatten(state_spec), flatten(spec_of(new_state(traced.output_structure)))
    if len(given) != len(returned) or [s.dtype for s in given] != [s.dtype for s in returned]:
        raise DataStructureError(f"`{what}` must return a state of the structure and types it was given: given "
                                 f"{[s.dtype.name for s in given]}, returned {[s.dtype.name for s in returned]}")
    if given != returned:
        state_spec = pack_as(state_spec, [a.most_specific_common(b) for a, b in zip(given, returned)])
        traced = TracedFunction(fn, (state_spec, element_spec), what)
    return traced, state_spec
