"""TF 1.15's remaining top-level graph helpers: ``switch_case`` (a chain of conds through ``tf.case``),
``init_scope``, ``is_numeric_tensor``, ``add_check_numerics_ops``, ``timestamp``, ``py_function``
(``py_func`` whose function may call ``.numpy()`` on its arguments, as TF's eager tensors allow),
``get_static_value`` and the deprecated ``op_scope`` / ``variable_op_scope``."""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np

from trainer.graph import Node, Tensor, get_default_graph
from trainer.ops import convert_to_tensor, equal, group, make_op
from trainer.py_func import py_func

__all__ = ["add_check_numerics_ops", "get_static_value", "init_scope", "is_numeric_tensor", "op_scope", "py_function",
           "switch_case", "timestamp", "variable_op_scope"]

_NUMERIC_KINDS = "iufc"


def _branches(branch_fns) -> list[Callable]:
    """``branch_fns`` (a list of callables, of (int, callable) pairs, or a dict) as a list indexed 0..n-1."""
    items = list(branch_fns.items()) if isinstance(branch_fns, dict) else list(branch_fns)
    if not items:
        raise ValueError("switch_case: branch_fns must not be empty")
    if all(callable(f) for f in items):
        return items
    if not all(isinstance(p, tuple) and len(p) == 2 and callable(p[1]) for p in items):
        raise TypeError("switch_case: branch_fns must be a list of callables, a list of (int, callable) pairs or a "
                        "dict of int to callable")
    keys = sorted(int(k) for k, _ in items)
    if keys != list(range(len(items))):
        raise ValueError(f"switch_case: branch indices must be 0..{len(items) - 1} exactly once, got {keys}")
    return [f for _, f in sorted(items, key=lambda p: int(p[0]))]


def switch_case(branch_index, branch_fns, default: Callable | None = None, name: str = "switch_case"):
    """The result of ``branch_fns[branch_index]()``; an index outside the branches runs ``default``,
    or the last branch when there is none. Only the chosen branch's ops run."""
    from trainer.case import case

    fns = _branches(branch_fns)
    index = convert_to_tensor(branch_index)
    if index.dtype is not None and index.dtype != np.dtype(np.int32):
        raise TypeError(f"switch_case: branch_index must be an int32 scalar, got {index.dtype}")
    if index.shape not in (None, ()):
        raise ValueError(f"switch_case: branch_index must be a scalar, got shape {index.shape}")
    if default is None:
        fns, default = fns[:-1], fns[-1]
    if not fns:
        return default()
    pairs = [(equal(index, np.int32(i)), fn) for i, fn in enumerate(fns)]
    return case(pairs, default=default, exclusive=False, name=name)


@contextlib.contextmanager
def init_scope():
    """Ops built inside ignore the enclosing ``control_dependencies`` (TF 1.15's graph-mode behaviour:
    initializers and variables are lifted out of the dependencies of the code around them)."""
    with get_default_graph().control_dependencies(None):
        yield


def is_numeric_tensor(tensor) -> bool:
    """Whether ``tensor`` is a Tensor of an integer, floating or complex dtype."""
    return isinstance(tensor, Tensor) and tensor.dtype is not None and tensor.dtype.kind in _NUMERIC_KINDS


def add_check_numerics_ops() -> Node:
    """One op checking every floating-point tensor of the default graph for NaN and Inf (the run
    fails naming the first bad tensor's op)."""
    from trainer.debugging import check_numerics

    g = get_default_graph()
    checks = []
    for node in list(g.nodes):
        for out in node.outputs:
            if out.dtype is not None and out.dtype.kind == "f" and out.dtype.itemsize in (2, 4, 8):
                checks.append(check_numerics(out, message=f"{node.name}:{out.index}"))
    return group(*checks)


def timestamp(name=None) -> Tensor:
    """The wall-clock time, in float64 seconds since the epoch, when the op runs."""
    return make_op("Timestamp", [], domain="flowstack", name=name or "Timestamp",
                   graph=get_default_graph()).outputs[0]


class _EagerArray(np.ndarray):
    """A NumPy array that also answers ``.numpy()``, as the eager tensors TF's py_function passes do."""

    def numpy(self) -> np.ndarray:
        return np.asarray(self)


def py_function(func, inp, Tout, name=None):  # noqa: N803 - TF's argument name
    """``func`` called at run time on ``inp``'s values (arrays that also have ``.numpy()``); returns
    a tensor per ``Tout`` dtype (one tensor when ``Tout`` is a single dtype)."""
    if not callable(func):
        raise TypeError(f"py_function: func must be callable, got {type(func).__name__}")

    def call(*args):
        return func(*[np.asarray(a).view(_EagerArray) for a in args])

    return py_func(call, inp, Tout, stateful=True, name=name or "EagerPyFunc")


def get_static_value(tensor, partial: bool = False):
    """``tensor``'s value when the graph fixes it (a constant, or an integer shape computation over
    static shapes), as a NumPy array; None when it is only known at run time. With ``partial``, an
    integer vector known in part comes back as an object array with None where unknown."""
    from trainer.partial_values import known_elements

    if not isinstance(tensor, Tensor):
        return np.asarray(tensor)
    if "value" in tensor.node.attrs and tensor.node.op_type in ("Constant", "Const"):
        return np.asarray(tensor.node.attrs["value"])
    elements = known_elements(tensor)
    if elements is None:
        return None
    shape = tensor.shape or ()
    if None not in elements:
        return np.asarray(elements, tensor.dtype).reshape(shape)
    return np.asarray(elements, object).reshape(shape) if partial else None


def op_scope(values, name, default_name=None):
    """TF 1.x's deprecated ``name_scope(name, default_name, values)`` with its arguments reordered."""
    from trainer.graph import name_scope

    return name_scope(name, default_name=default_name, values=values)


def variable_op_scope(values, name_or_scope, default_name=None, initializer=None, regularizer=None,
                      caching_device=None, partitioner=None, custom_getter=None, reuse=None, dtype=None,
                      use_resource=None, constraint=None):
    """TF 1.x's deprecated ``variable_scope(name_or_scope, default_name, values, ...)`` with its
    arguments reordered."""
    from trainer.variable_scopes import variable_scope

    return variable_scope(name_or_scope, default_name=default_name, values=values, initializer=initializer,
                          regularizer=regularizer, caching_device=caching_device, partitioner=partitioner,
                          custom_getter=custom_getter, reuse=reuse, dtype=dtype, use_resource=use_resource,
                          constraint=constraint)
