"""``arg_scope`` and ``add_arg_scope`` (``tf.contrib.framework``, as ``slim`` exposes them).

``with arg_scope([conv2d, fully_connected], activation_fn=..., weights_regularizer=...):`` sets
default keyword arguments for the listed functions while the block runs; nested scopes merge with
the enclosing ones, and an argument passed explicitly wins. Only functions decorated with
``add_arg_scope`` take part: listing any other raises a ValueError, as TensorFlow's does. Scopes
are kept per thread, so two threads building graphs do not see each other's defaults.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator

__all__ = ["add_arg_scope", "arg_scope", "arg_scope_func_key", "arg_scoped_arguments", "current_arg_scope",
           "has_arg_scope"]

_DECORATED: set[tuple[str, str]] = set()  # keys of the functions add_arg_scope decorated
_stacks = threading.local()


def _stack() -> list[dict]:
    if not hasattr(_stacks, "scopes"):
        _stacks.scopes = [{}]
    return _stacks.scopes


def arg_scope_func_key(op: Callable) -> tuple[str, str]:
    """The key a function's defaults are stored under: its module and name, as TensorFlow keys them."""
    return getattr(op, "__module__", ""), getattr(op, "__name__", repr(op))


def current_arg_scope() -> dict:
    """{function key: {argument: default}} in force here."""
    return _stack()[-1]


def has_arg_scope(func: Callable) -> bool:
    return arg_scope_func_key(func) in _DECORATED


def arg_scoped_arguments(func: Callable) -> list[str]:
    """The names of ``func``'s arguments an arg_scope may set (those of the decorated function)."""
    import inspect

    return list(inspect.signature(func).parameters)


def add_arg_scope(func: Callable) -> Callable:
    """Decorate ``func`` so that the arg_scopes around a call supply its keyword defaults."""
    key = arg_scope_func_key(func)

    @functools.wraps(func)
    def with_scope_defaults(*args, **kwargs):
        defaults = current_arg_scope().get(key)
        return func(*args, **({**defaults, **kwargs} if defaults else kwargs))

    _DECORATED.add(key)
    return with_scope_defaults


@contextlib.contextmanager
def arg_scope(list_ops_or_scope, **kwargs) -> Iterator[dict]:
    """Defaults ``kwargs`` for every function in ``list_ops_or_scope`` within the block; or, given
    the dict a ``with arg_scope(...) as sc:`` yielded, that saved scope again (then without kwargs)."""
    if isinstance(list_ops_or_scope, dict):
        if kwargs:
            raise ValueError("When attempting to re-use a scope by suppling a dictionary, kwargs must be empty.")
        scope = list_ops_or_scope
    elif isinstance(list_ops_or_scope, (list, tuple)):
        scope = dict(current_arg_scope())
        for op in list_ops_or_scope:
            if not has_arg_scope(op):
                raise ValueError(f"{getattr(op, '__name__', op)} is not decorated with @add_arg_scope "
                                 f"(arg_scope sets defaults only for such functions)")
            key = arg_scope_func_key(op)
            scope[key] = {**scope.get(key, {}), **kwargs}
    else:
        raise TypeError("list_ops_or_scope must either be a list/tuple or reused scope (i.e. dict), "
                        f"got {type(list_ops_or_scope).__name__}")
    stack = _stack()
    stack.append(scope)
    try:
        yield scope
    finally:
        stack.pop()
