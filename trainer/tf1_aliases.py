"""TF 1.15 namespaces that hold, under their own names, functions flowstack has at ``tf.*`` or
``tf.nn.*`` (``tf.math.reduce_sum`` is ``tf.reduce_sum``, ``tf.random.uniform`` is
``tf.random_uniform``). Each namespace module resolves a name on first use through ``resolve``,
so the TF1 symbol lists (trainer/tf1_symbols.py) and the compatibility table see them as
supported exactly where the function exists."""

from __future__ import annotations

import importlib

__all__ = ["resolve"]

_SOURCES = ("trainer", "trainer.nn")


def resolve(namespace: str, name: str, renamed: dict[str, str], scope: dict):
    """``<namespace>.<name>``: the function ``renamed`` (or the same name) names in ``tf`` or
    ``tf.nn``, cached in the namespace module's ``scope``; a missing one raises the compatibility
    table's AttributeError."""
    from trainer.compat import missing_symbol
    from trainer.tf1_symbols import TF1_SYMBOLS

    if name.startswith("__") or name not in TF1_SYMBOLS[namespace].split():
        raise missing_symbol(namespace, name, scope)
    target = renamed.get(name, name)
    for source in _SOURCES:
        module = importlib.import_module(source)
        if target in vars(module) or target in getattr(module, "__all__", ()):
            value = getattr(module, target)
            scope[name] = value
            return value
    raise missing_symbol(namespace, name, scope)
