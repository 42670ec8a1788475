"""How Keras objects become JSON and come back: ``{"class_name": ..., "config": {...}}``.

An object's config is read off its constructor's signature: each argument's value is the attribute
of the same name, as Keras objects keep them, so a class gets ``get_config`` without listing its
arguments twice. Values are made JSON-friendly here (tuples to lists, functions to their registered
names, nested objects to their own ``class_name``/``config``). Code is never serialized: a Lambda's
function or a custom loss comes back only by name, through ``custom_objects``.
"""

from __future__ import annotations

import inspect
import re

import numpy as np

from trainer.initializers import Initializer as TFInitializer

_CUSTOM_OBJECTS: list[dict] = [{}]


def snake_case(name: str) -> str:
    """Keras' default object names from class names: Dense -> dense, Conv2D -> conv2d,
    BatchNormalization -> batch_normalization (Keras' own two rules, so names match Keras').

    >>> [snake_case(n) for n in ("Dense", "Conv2D", "BatchNormalization", "GRU", "SparseCategoricalAccuracy")]
    ['dense', 'conv2d', 'batch_normalization', 'gru', 'sparse_categorical_accuracy']
    """
    intermediate = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    return re.sub(r"([a-z])([A-Z])", r"\1_\2", intermediate).lower()


def custom_objects() -> dict:
    """The names ``CustomObjectScope``/``get_custom_objects`` registered, innermost last."""
    merged: dict = {}
    for scope in _CUSTOM_OBJECTS:
        merged.update(scope)
    return merged


class CustomObjectScope:
    """``with CustomObjectScope({"MyLayer": MyLayer}):`` makes names resolvable while loading."""

    def __init__(self, *scopes: dict):
        self.scope = {k: v for s in scopes for k, v in s.items()}

    def __enter__(self):
        _CUSTOM_OBJECTS.append(self.scope)
        return self

    def __exit__(self, *exc):
        _CUSTOM_OBJECTS.pop()


def get_custom_objects() -> dict:
    return _CUSTOM_OBJECTS[0]


def constructor_arguments(cls) -> list[str]:
    """The named arguments of ``cls.__init__`` (not ``self``, ``*args``, ``**kwargs``)."""
    params = inspect.signature(cls.__init__).parameters.values()
    return [p.name for p in params if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def to_json_value(value) -> object:
    """``value`` as JSON can hold it; an object with ``get_config`` as ``{"class_name", "config"}``."""
    from trainer.keras import activations

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, np.dtype) or isinstance(value, type) and issubclass(value, np.generic):
        return np.dtype(value).name
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json_value(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if hasattr(value, "get_config"):
        return {"class_name": type(value).__name__, "config": to_json_value(value.get_config())}
    if isinstance(value, TFInitializer):  # tf.*_initializer objects: their arguments are their attributes
        return {"class_name": type(value).__name__, "config": config_from_attributes(value)}
    if callable(value):
        name = activations.serialize(value) if activations.is_registered(value) else getattr(value, "__name__", None)
        if name is None or name == "<lambda>":
            raise ValueError(f"cannot serialize {value!r}: flowstack never pickles code; use a named function "
                             "and pass it back in custom_objects when loading")
        return name
    raise ValueError(f"cannot serialize a value of type {type(value).__name__}: {value!r}")


# constructor arguments that are never config fields (a layer's ``weights`` are its variables)
_NOT_CONFIG = ("weights",)


def config_from_attributes(obj) -> dict:
    """``{argument: getattr(obj, argument)}`` over ``obj``'s constructor arguments it keeps."""
    return {name: to_json_value(getattr(obj, name)) for name in constructor_arguments(type(obj))
            if name not in _NOT_CONFIG and hasattr(obj, name)}


def deserialize(identifier, table: dict, kind: str, custom: dict | None = None) -> object:
    """An object from a name (looked up in ``custom``, the custom-object scopes, then ``table``) or a
    ``{"class_name", "config"}`` dict; a clear ValueError naming ``kind`` for anything unknown."""
    lookup = {**table, **custom_objects(), **(custom or {})}
    if isinstance(identifier, dict):
        name, config = identifier.get("class_name"), identifier.get("config", {})
        if name not in lookup:
            raise ValueError(f"Unknown {kind}: {name!r}" + _nearest(name, lookup))
        target = lookup[name]
        if hasattr(target, "from_config"):
            return target.from_config(config)
        return target(**config)
    if isinstance(identifier, str):
        if identifier not in lookup:
            raise ValueError(f"Unknown {kind}: {identifier!r}" + _nearest(identifier, lookup))
        return lookup[identifier]
    raise ValueError(f"Could not interpret {kind} identifier: {identifier!r}")


def _nearest(name, table: dict) -> str:
    import difflib

    close = difflib.get_close_matches(str(name), list(table), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""


def get_object(identifier, table: dict, kind: str) -> object:
    """Keras' ``get`` for objects made from a class: None stays None; a name makes an instance of what
    ``table`` (or a custom-object scope) names; a config dict is deserialized; a callable is kept."""
    if identifier is None:
        return None
    if isinstance(identifier, str):
        return deserialize(identifier, table, kind)()  # the tables hold classes and factories
    if isinstance(identifier, dict):
        return deserialize(identifier, table, kind)
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret {kind} identifier: {identifier!r}")
