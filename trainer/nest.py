"""Nested structures of values (TensorFlow's ``nest``): a value is a leaf, or a tuple, list,
namedtuple or dict of nested values.

A structure is flattened to a list of leaves (in sequence order, dicts by sorted key, as TensorFlow
does) for the graph, which only knows flat lists of tensors, and packed back for the user;
``tf.data`` elements and ``while_loop`` variables are such structures.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["StructureError", "describe", "flatten", "flatten_up_to", "is_nest", "map_structure", "pack_as",
           "same_structure"]


class StructureError(ValueError):
    """Values whose nested structures do not fit together."""


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


def flatten_up_to(structure, values) -> list:
    """``values`` (a nest whose leaves may themselves be sequences, such as shapes) flattened as deep
    as ``structure`` goes, in the order of ``flatten(structure)``."""
    if isinstance(structure, dict):
        if not isinstance(values, dict) or set(values) != set(structure):
            raise StructureError(f"{values!r} does not have the structure {describe(structure)}")
        return [v for k in sorted(structure) for v in flatten_up_to(structure[k], values[k])]
    if is_nest(structure):
        if not isinstance(values, (tuple, list)) or len(values) != len(structure):
            raise StructureError(f"{values!r} does not have the structure {describe(structure)}")
        return [v for s, sub in zip(structure, values) for v in flatten_up_to(s, sub)]
    return [values]


def pack_as(structure, leaves, keep_lists: bool = False) -> Any:
    """``structure`` with its leaves replaced, in order, by ``leaves``. Lists come back as tuples
    (``tf.data``'s rule) unless ``keep_lists``."""
    leaves = list(leaves)
    it = iter(leaves)
    packed = _pack(structure, it, keep_lists)
    if next(it, _END) is not _END:
        raise StructureError(f"{len(leaves)} values for a structure of {len(flatten(structure))}")
    return packed


_END = object()


def _pack(structure, it, keep_lists: bool):
    if isinstance(structure, dict):
        packed = {k: _pack(structure[k], it, keep_lists) for k in sorted(structure)}
        return {k: packed[k] for k in structure}
    if isinstance(structure, (tuple, list)):
        items = [_pack(s, it, keep_lists) for s in structure]
        if _is_namedtuple(structure):
            return type(structure)(*items)
        return items if keep_lists and isinstance(structure, list) else tuple(items)
    leaf = next(it, _END)
    if leaf is _END:
        raise StructureError("too few values for the structure")
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
