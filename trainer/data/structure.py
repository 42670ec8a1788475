"""Nested element structures: a dataset element is a tensor, or a tuple or dict of elements.

The nest functions themselves are ``trainer/nest.py``'s; here are the element-specific ones
(dtypes, shapes laid over a structure).
"""

from __future__ import annotations

import numpy as np

from trainer.nest import StructureError, describe, flatten, flatten_up_to, is_nest, map_structure, pack_as, same_structure

__all__ = [
    "DataStructureError", "as_numpy_dtype", "describe", "flatten", "flatten_shapes", "is_nest", "is_shape",
    "map_structure", "pack_as", "same_structure", "shapes_like",
]


# One error for every nest that does not fit: a dataset's element, a function's result, two datasets.
DataStructureError = StructureError


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
    return flatten_up_to(types, shapes)
