"""``tf.TensorShape`` and ``tf.Dimension``: what ``tensor.get_shape()`` returns in TensorFlow 1.x.

A TensorShape is a tuple of ints (None where unknown), so it compares and indexes like the
trainer's own shapes, with TF1's methods on top (``as_list``, ``ndims``, ``is_fully_defined``).

>>> s = TensorShape([None, 784])
>>> s.as_list(), s.ndims, s.is_fully_defined(), s[1]
([None, 784], 2, False, 784)
"""

from __future__ import annotations

import math

__all__ = ["Dimension", "TensorShape", "as_shape_tuple", "dimension_value", "merge_shapes", "shapes_compatible"]


class Dimension:
    """One dimension: ``value`` is its size or None."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = None if value is None else int(value)

    def __int__(self) -> int:
        if self.value is None:
            raise ValueError("an unknown dimension has no int value")
        return self.value

    __index__ = __int__

    def __eq__(self, other) -> bool:
        other = other.value if isinstance(other, Dimension) else other
        return self.value == other

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Dimension({self.value})"

    def __str__(self) -> str:
        return "?" if self.value is None else str(self.value)


class TensorShape(tuple):
    """A (possibly partial) shape: ``TensorShape([None, 3]).as_list() == [None, 3]``."""

    def __new__(cls, dims=None):
        if dims is None:
            obj = super().__new__(cls, ())
            obj._unknown_rank = True
            return obj
        obj = super().__new__(cls, tuple(dimension_value(d) for d in dims))
        obj._unknown_rank = False
        return obj

    @property
    def ndims(self) -> int | None:
        return None if self._unknown_rank else len(self)

    rank = ndims

    @property
    def dims(self) -> list[Dimension] | None:
        return None if self._unknown_rank else [Dimension(d) for d in self]

    def as_list(self) -> list:
        if self._unknown_rank:
            raise ValueError("as_list() is not defined on an unknown TensorShape")
        return list(self)

    def is_fully_defined(self) -> bool:
        return not self._unknown_rank and all(d is not None for d in self)

    def num_elements(self) -> int | None:
        return math.prod(self) if self.is_fully_defined() else None

    def __repr__(self) -> str:
        return "TensorShape(None)" if self._unknown_rank else f"TensorShape({list(self)})"

    def __str__(self) -> str:
        """As TensorFlow 1.x prints a shape: ``(?, 784)``, ``(3,)``, ``()``, ``<unknown>``."""
        if self._unknown_rank:
            return "<unknown>"
        dims = ["?" if d is None else str(d) for d in self]
        return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"


def dimension_value(dimension):
    """The int (or None) of a Dimension, an int or None."""
    if isinstance(dimension, Dimension):
        return dimension.value
    return None if dimension is None else int(dimension)


def as_shape_tuple(shape) -> tuple | None:
    """A shape (a TensorShape, or a list or tuple of ints, None or Dimensions) as a tuple of ints
    and None; None for an unknown rank (``None`` or ``TensorShape(None)``)."""
    if shape is None or getattr(shape, "ndims", 0) is None:
        return None
    return tuple(dimension_value(d) for d in shape)


def shapes_compatible(a: tuple | None, b: tuple | None) -> bool:
    """Whether two partial shapes (tuples, None for an unknown rank) can describe the same tensor."""
    return a is None or b is None or (len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b)))


def merge_shapes(a: tuple | None, b: tuple | None) -> tuple | None:
    """What two compatible partial shapes say together (``shapes_compatible`` first)."""
    if a is None or b is None:
        return a if b is None else b
    return tuple(x if x is not None else y for x, y in zip(a, b))

