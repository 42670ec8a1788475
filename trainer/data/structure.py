"""Nested element structures: a dataset element is a tensor, or a tuple or dict of elements.

A structure is flattened to a list of leaves (in tuple order, dicts by sorted key, as TensorFlow
does) for the graph, which only knows flat lists of tensors, and packed back for the user.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = [
    "DataStructureError", "as_numpy_dtype", "describe", "flatten", "flatten_shapes", "is_nest", "is_shape",
    "map_structure", "pack_as", "same_structure", "shapes_like",
]


class DataStructureError(ValueError):
    """An element, a function's result or two datasets whose nested structures do not fit together."""


def is_nest(x) -> bool:
    """Whether ``x`` is a tuple, list or dict (a nest), not a leaf."""
    return isinstance(x, (tuple, list, dict))


def flatten(structure) -> list:
    """Leaves of ``structure`` in order: ``flatten(({"b": 1, "a": 2}, 3)) == [2, 1, 3]``."""
    if isinstance(structure, dict):
        return [leaf for k in sorted(structure) for leaf in flatten(structure[k])]
    if isinstance(structure, (tuple, list)):
        return [leaf for item in structure for leaf in flatten(item)]
    return [structure]


def pack_as(structure, leaves) -> Any:
    """``structure`` with its leaves replaced, in order, by ``leaves`` (lists come back as tuples)."""
    leaves = list(leaves)
    it = iter(leaves)
    packed = _pack(structure, it)
    if next(it, _END) is not _END:
        raise DataStructureError(f"{len(leaves)} values for a structure of {len(flatten(structure))}")
    return packed


_END = object()


def _pack(structure, it):
    if isinstance(structure, dict):
        packed = {k: _pack(structure[k], it) for k in sorted(structure)}
        return {k: packed[k] for k in structure}
    if isinstance(structure, (tuple, list)):
        items = [_pack(s, it) for s in structure]
        return type(structure)(*items) if _is_namedtuple(structure) else tuple(items)
    leaf = next(it, _END)
    if leaf is _END:
        raise DataStructureError("too few values for the structure")
    return leaf


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def map_structure(fn: Callable, structure) -> Any:
    return pack_as(structure, [fn(leaf) for leaf in flatten(structure)])


def describe(structure) -> str:
    """A short shape of the nesting for error messages: ``(x, {a, b})``."""
    if isinstance(structure, dict):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in structure.items()) + "}"
    if isinstance(structure, (tuple, list)):
        return "(" + ", ".join(describe(v) for v in structure) + ("," if len(structure) == 1 else "") + ")"
    return "x"


def same_structure(a, b) -> bool:
    """Whether ``a`` and ``b`` nest the same way (tuples and lists count as the same)."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and set(a) == set(b)
                and all(same_structure(a[k], b[k]) for k in a))
    if is_nest(a) or is_nest(b):
        return is_nest(a) and is_nest(b) and len(a) == len(b) and all(map(same_structure, a, b))
    return True


def as_numpy_dtype(dtype) -> np.dtype:
    """``np.float32``, ``"float32"`` or a TensorFlow-style dtype object (``as_numpy_dtype``) as a NumPy dtype."""
    if hasattr(dtype, "as_numpy_dtype"):
        dtype = dtype.as_numpy_dtype
    if dtype is str or dtype is bytes:
        return np.dtype(object)
    return np.dtype(dtype)


def is_shape(x) -> bool:
    return isinstance(x, (tuple, list)) and all(d is None or isinstance(d, (int, np.integer)) for d in x)


def shapes_like(types, shapes):
    """``shapes`` laid over ``types``: a tuple of ints is one shape, not a nest of them."""
    if not is_nest(types):
        if shapes is not None and not is_shape(shapes):
            raise DataStructureError(f"{shapes!r} is not a shape (a tuple of ints or None)")
        return None if shapes is None else tuple(None if d is None or d < 0 else int(d) for d in shapes)
    if isinstance(types, dict):
        if not isinstance(shapes, dict) or set(shapes) != set(types):
            raise DataStructureError(f"shapes {shapes!r} do not match the structure {describe(types)}")
        return {k: shapes_like(types[k], shapes[k]) for k in types}
    if not isinstance(shapes, (tuple, list)) or len(shapes) != len(types):
        raise DataStructureError(f"shapes {shapes!r} do not match the structure {describe(types)}")
    return tuple(shapes_like(t, s) for t, s in zip(types, shapes))


def flatten_shapes(types, shapes) -> list:
    """Shapes in the order of ``flatten(types)`` (shapes are tuples, so plain flatten would split them)."""
    if isinstance(types, dict):
        return [s for k in sorted(types) for s in flatten_shapes(types[k], shapes[k])]
    if is_nest(types):
        return [s for t, sh in zip(types, shapes) for s in flatten_shapes(t, sh)]
    return [shapes]
