"""``tf.TensorShape`` and ``tf.Dimension``: what ``tensor.get_shape()`` returns in TensorFlow 1.x.

A TensorShape is a tuple of ints (None where unknown), so it compares and iterates like the
trainer's own shapes, with TF1's methods on top (``as_list``, ``ndims``, ``is_fully_defined``);
indexing it gives a ``Dimension``, as in TensorFlow 1.x (``x.get_shape()[1].value``).

>>> s = TensorShape([None, 784])
>>> s.as_list(), s.ndims, s.is_fully_defined(), s[1], s[1].value, s[0].value
([None, 784], 2, False, Dimension(784), 784, None)
"""

from __future__ import annotations

import functools
import math
import operator

__all__ = ["Dimension", "KnownDimension", "StaticShape", "TensorShape", "as_shape_tuple", "dimension_value",
           "merge_shapes", "shapes_compatible", "static_shape"]


class Dimension:
    """One dimension: ``value`` is its size or None. Arithmetic with ints or Dimensions gives a
    Dimension (unknown if either side is), and comparisons with an unknown one give None, as in
    TensorFlow 1.x."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = dimension_value(value)

    def __int__(self) -> int:
        if self.value is None:
            raise ValueError("an unknown dimension has no int value")
        return self.value

    __index__ = __int__

    def __eq__(self, other) -> bool | None:
        other = dimension_value(other) if isinstance(other, (Dimension, int)) else other
        if self.value is None or other is None:
            return None
        return self.value == other

    def __ne__(self, other) -> bool | None:
        equal = self.__eq__(other)
        return None if equal is None else not equal

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Dimension({self.value})"

    def __str__(self) -> str:
        return "?" if self.value is None else str(self.value)

    def _combine(self, other, fn, reverse: bool = False) -> Dimension:
        other = dimension_value(other)
        if self.value is None or other is None:
            return Dimension(None)
        return Dimension(fn(other, self.value) if reverse else fn(self.value, other))

    def _compare(self, other, fn) -> bool | None:
        other = dimension_value(other)
        return None if self.value is None or other is None else fn(self.value, other)

    def __add__(self, other):
        return self._combine(other, operator.add)

    def __radd__(self, other):
        return self._combine(other, operator.add, reverse=True)

    def __sub__(self, other):
        return self._combine(other, operator.sub)

    def __rsub__(self, other):
        return self._combine(other, operator.sub, reverse=True)

    def __mul__(self, other):
        return self._combine(other, operator.mul)

    def __rmul__(self, other):
        return self._combine(other, operator.mul, reverse=True)

    def __floordiv__(self, other):
        return self._combine(other, operator.floordiv)

    def __rfloordiv__(self, other):
        return self._combine(other, operator.floordiv, reverse=True)

    __truediv__ = __floordiv__  # TF1's Dimension divides as integers
    __rtruediv__ = __rfloordiv__

    def __mod__(self, other):
        return self._combine(other, operator.mod)

    def __rmod__(self, other):
        return self._combine(other, operator.mod, reverse=True)

    def __lt__(self, other):
        return self._compare(other, operator.lt)

    def __le__(self, other):
        return self._compare(other, operator.le)

    def __gt__(self, other):
        return self._compare(other, operator.gt)

    def __ge__(self, other):
        return self._compare(other, operator.ge)

    def is_compatible_with(self, other) -> bool:
        other = dimension_value(other)
        return self.value is None or other is None or self.value == other

    def assert_is_compatible_with(self, other) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {Dimension(other)} are not compatible")

    def merge_with(self, other) -> Dimension:
        self.assert_is_compatible_with(other)
        return Dimension(self.value if self.value is not None else dimension_value(other))


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

    def __getitem__(self, key):
        """A Dimension for an index (``shape[1].value``, TF1's idiom), a TensorShape for a slice."""
        if isinstance(key, slice):
            return TensorShape(None) if self._unknown_rank else TensorShape(tuple.__getitem__(self, key))
        if self._unknown_rank:
            return Dimension(None)
        return Dimension(tuple.__getitem__(self, key))

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


class KnownDimension(int):
    """A known size in ``Tensor.shape``: an int that also answers TF1's ``.value``."""

    __slots__ = ()

    @property
    def value(self) -> int:
        return int(self)


class StaticShape(TensorShape):
    """``Tensor.shape``: a TensorShape whose entries stay ints and None, as the trainer indexes
    shapes, and also answer TF1's idioms (``x.shape.as_list()``, ``x.shape[-1].value``)."""

    def __new__(cls, dims):
        obj = tuple.__new__(cls, tuple(None if d is None else KnownDimension(d) for d in dims))
        obj._unknown_rank = False
        return obj

    __getitem__ = tuple.__getitem__
    __repr__ = tuple.__repr__
    __str__ = tuple.__repr__


@functools.lru_cache(maxsize=4096)
def static_shape(shape: tuple | None) -> StaticShape | None:
    """The shared StaticShape of a shape tuple (None, an unknown rank, stays None)."""
    return None if shape is None else StaticShape(shape)


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

