"""TF 1.15's remaining ``tf.assert_*`` checks: static ones (``assert_integer``, ``assert_scalar``,
``assert_rank_in``, ``assert_same_float_dtype``, ``assert_proper_iterable``) raise when the graph is
built, as TensorFlow's do where shapes and dtypes are known; ``assert_near`` and
``assert_variables_initialized`` are Assert ops that fail the run."""

from __future__ import annotations

import numpy as np

from trainer.debugging import Assert
from trainer.dtypes import as_dtype
from trainer.graph import Node, Tensor
from trainer.ops import convert_to_tensor, no_op

__all__ = ["assert_integer", "assert_near", "assert_proper_iterable", "assert_rank_in", "assert_same_float_dtype",
           "assert_scalar", "assert_variables_initialized"]


def _prefix(message) -> str:
    return f"{message}  " if message else ""


def assert_integer(x, message=None, name=None) -> Node:
    """A TypeError now unless ``x`` has an integer dtype (an op that does nothing otherwise)."""
    t = convert_to_tensor(x)
    if t.dtype is None or t.dtype.kind not in "iu":
        raise TypeError(f"{_prefix(message)}Expected \"x\" to be integer type.  Found: {t.name} of dtype {t.dtype}")
    return no_op(name=name or "assert_integer")


def assert_scalar(tensor, name=None, message=None) -> Tensor:
    """``tensor`` itself, after a ValueError now unless its static rank is 0."""
    t = convert_to_tensor(tensor)
    if t.shape is None:
        raise ValueError(f"{_prefix(message)}Expected scalar shape for {t.name}, the rank is unknown")
    if len(t.shape) != 0:
        raise ValueError(f"{_prefix(message)}Expected scalar shape for {t.name}, saw shape: {t.shape}.")
    return t


def assert_rank_in(x, ranks, data=None, summarize=None, message=None, name=None) -> Node:
    """``x``'s rank must be one of ``ranks``: a ValueError now when it is known, else a failing run."""
    from trainer.array_ops import reduce_any, size, stack
    from trainer.ops import cast, equal, shape

    t = convert_to_tensor(x)
    wanted = [int(r) for r in ranks]
    if t.shape is not None:
        if len(t.shape) not in wanted:
            raise ValueError(f"{_prefix(message)}Tensor {t.name} must have rank in {tuple(wanted)}.  Received rank "
                             f"{len(t.shape)}, shape {t.shape}")
        return no_op(name=name or "assert_rank_in")
    rank = cast(size(shape(t)), np.int32)
    test = reduce_any(stack([equal(rank, np.int32(r)) for r in wanted]))
    return Assert(test, list(data) if data is not None else [rank], summarize, name=name or "assert_rank_in",
                  message=f"{_prefix(message)}Tensor {t.name} must have rank in {tuple(wanted)}")


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None, name=None) -> Node:
    """Fails the run unless ``|x - y| <= atol + rtol * |y|`` everywhere (both default to 10 eps of
    the dtype, as TensorFlow's)."""
    from trainer.array_ops import less_equal, reduce_all
    from trainer.ops import abs as tf_abs

    a = convert_to_tensor(x)
    b = convert_to_tensor(y, dtype=a.dtype)
    if a.dtype is None or a.dtype.kind not in "fc":
        raise TypeError(f"assert_near: x and y must be floating point or complex, got {a.dtype}")
    eps = float(np.finfo(a.dtype).eps)
    r = 10 * eps if rtol is None else rtol
    t = 10 * eps if atol is None else atol
    tol = convert_to_tensor(np.asarray(t, a.dtype)) + convert_to_tensor(np.asarray(r, a.dtype)) * tf_abs(b)
    test = reduce_all(less_equal(tf_abs(a - b), tol))
    shown = list(data) if data is not None else [a, b]
    return Assert(test, shown, summarize, name=name or "assert_near",
                  message=f"{_prefix(message)}x and y not equal to tolerance rtol = {r}, atol = {t}")


def assert_same_float_dtype(tensors=None, dtype=None):
    """The one floating dtype of ``tensors`` (and ``dtype``), float32 when there is none to go by;
    a ValueError when they differ or one is not floating point."""
    found = as_dtype(dtype) if dtype is not None else None
    if found is not None and not found.is_floating:
        raise ValueError(f"Expected floating point type, got {found}.")
    for t in tensors or []:
        if not isinstance(t, Tensor) or t.dtype is None:
            continue
        this = as_dtype(t.dtype)
        if not this.is_floating:
            raise ValueError(f"Expected floating point type, got {this} for tensor {t.name}.")
        if found is None:
            found = this
        elif this != found:
            raise ValueError(f"Expected tensor {t.name} with dtype {found}, got dtype {this}.")
    return found if found is not None else as_dtype(np.float32)


def assert_proper_iterable(values) -> None:
    """A TypeError unless ``values`` is an iterable of values (not a tensor, array or string)."""
    if isinstance(values, (Tensor, np.ndarray, str, bytes)) or hasattr(values, "composite_parts"):
        raise TypeError(f"Expected argument \"values\" to be a \"proper\" iterable.  Found: {type(values)}")
    if not hasattr(values, "__iter__"):
        raise TypeError(f"Expected argument \"values\" to be iterable.  Found: {type(values)}")


def assert_variables_initialized(var_list=None) -> Node:
    """Fails the run unless every variable of ``var_list`` (default: all global and local ones) has
    been initialized in the session."""
    from trainer.array_ops import reduce_all, stack
    from trainer.initialization_checks import is_variable_initialized
    from trainer.variables import global_variables, local_variables

    variables = list(var_list) if var_list is not None else global_variables() + local_variables()
    if not variables:
        return no_op(name="assert_variables_initialized")
    ready = reduce_all(stack([is_variable_initialized(v) for v in variables]))
    return Assert(ready, [ready], name="assert_variables_initialized",
                  message="assert_variables_initialized: a variable is not initialized")
