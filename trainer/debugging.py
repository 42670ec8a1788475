"""``tf.Print``, ``tf.Assert``, the ``tf.assert_*`` family and ``check_numerics``.

Assertions are ops: they run when something depends on them (``with tf.control_dependencies([...])``
or as a fetch) and fail the run with the message and the offending values.

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     x = tf.constant([1.0, -2.0])
...     with tf.control_dependencies([tf.assert_non_negative(x, message="x must be >= 0")]):
...         y = tf.identity(x)
>>> try:
...     tf.Session(g).run(y)
... except Exception as e:
...     print("assertion failed: x must be >= 0" in str(e))
True
"""

from __future__ import annotations

from trainer import ops
from trainer.graph import TRAINER_DOMAIN, Node, Tensor
from trainer.ops import convert_to_tensor, make_op

__all__ = [
    "Assert", "Print", "assert_equal", "assert_greater", "assert_greater_equal", "assert_less", "assert_less_equal",
    "assert_negative", "assert_non_negative", "assert_non_positive", "assert_none_equal", "assert_positive",
    "assert_rank", "assert_rank_at_least", "assert_type", "check_numerics", "verify_tensor_all_finite",
]


def Print(input_, data, message=None, first_n=None, summarize=None, name=None) -> Tensor:  # noqa: N802 - TF's name
    """``input_``, printing ``message`` and ``data`` to stderr each time it is computed."""
    data = list(data) if data else [input_]
    node = make_op("Print", [input_, *data], {"message": message or "", "first_n": -1 if first_n is None else first_n,
                                              "summarize": 3 if summarize is None else summarize},
                   domain=TRAINER_DOMAIN, name=name or "Print")
    return node.outputs[0]


def Assert(condition, data, summarize=None, name=None, message: str = "") -> Node:  # noqa: N802 - TF's name
    """An op failing the run unless ``condition`` holds everywhere, showing ``data``."""
    cond = convert_to_tensor(condition)
    data = list(data) if data else [cond]
    return make_op("Assert", [cond, *data], {"summarize": 3 if summarize is None else summarize,
                                             "message": message}, domain=TRAINER_DOMAIN, name=name or "Assert")


def _assert_all(test, what: str, tensors, data, summarize, message, name) -> Node:
    shown = list(data) if data is not None else list(tensors)
    text = f"{message + ': ' if message else ''}{what}"
    return Assert(test, shown, summarize, name=name or "assert", message=text)


def assert_equal(x, y, data=None, summarize=None, message=None, name=None) -> Node:
    return _assert_all(ops.equal(x, y), "x == y did not hold", [x, y], data, summarize, message, name)


def assert_none_equal(x, y, data=None, summarize=None, message=None, name=None) -> Node:
    from trainer.array_ops import not_equal

    return _assert_all(not_equal(x, y), "x != y did not hold", [x, y], data, summarize, message, name)


def assert_less(x, y, data=None, summarize=None, message=None, name=None) -> Node:
    return _assert_all(ops.less(x, y), "x < y did not hold", [x, y], data, summarize, message, name)


def assert_less_equal(x, y, data=None, summarize=None, message=None, name=None) -> Node:
    from trainer.array_ops import less_equal

    return _assert_all(less_equal(x, y), "x <= y did not hold", [x, y], data, summarize, message, name)


def assert_greater(x, y, data=None, summarize=None, message=None, name=None) -> Node:
    return _assert_all(ops.greater(x, y), "x > y did not hold", [x, y], data, summarize, message, name)


def assert_greater_equal(x, y, data=None, summarize=None, message=None, name=None) -> Node:
    from trainer.array_ops import greater_equal

    return _assert_all(greater_equal(x, y), "x >= y did not hold", [x, y], data, summarize, message, name)


def _against_zero(fn, what):
    def check(x, data=None, summarize=None, message=None, name=None) -> Node:
        x = convert_to_tensor(x)
        import numpy as np

        zero = ops.constant(np.zeros((), x.dtype), graph=x.graph)
        return _assert_all(fn(x, zero), what, [x], data, summarize, message, name)

    check.__doc__ = f"Fails the run unless every entry is {what.split()[1]} 0."
    return check


def _ge(a, b):
    from trainer.array_ops import greater_equal

    return greater_equal(a, b)


def _le(a, b):
    from trainer.array_ops import less_equal

    return less_equal(a, b)


assert_positive = _against_zero(ops.greater, "x > 0 did not hold")
assert_negative = _against_zero(ops.less, "x < 0 did not hold")
assert_non_negative = _against_zero(_ge, "x >= 0 did not hold")
assert_non_positive = _against_zero(_le, "x <= 0 did not hold")


def _assert_rank(x, rank, at_least: bool, data, summarize, message, name) -> Node:
    """Checked when built where ``x``'s rank and ``rank`` are known (ValueError, as TensorFlow),
    else by an Assert op when the step runs."""
    import numpy as np

    from trainer.array_ops import greater_equal, size

    x = convert_to_tensor(x)
    what = "rank at least" if at_least else "rank"
    static_rank = None if isinstance(rank, Tensor) else int(np.asarray(rank).reshape(()))
    if static_rank is not None and x.shape is not None:
        holds = len(x.shape) >= static_rank if at_least else len(x.shape) == static_rank
        if not holds:
            raise ValueError(f"{message or ''}.  Tensor {x.name} must have {what} {static_rank}.  Received rank "
                             f"{len(x.shape)}, shape {x.shape}")
        return ops.no_op(name=name or "static_checks_determined_all_ok")
    actual = ops.cast(size(ops.shape(x)), np.int32)
    wanted = ops.cast(convert_to_tensor(rank), np.int32)
    test = greater_equal(actual, wanted) if at_least else ops.equal(actual, wanted)
    text = f"{message + ': ' if message else ''}Tensor {x.name} must have {what}"
    return Assert(test, list(data) if data is not None else [wanted, "Received shape:", ops.shape(x)], summarize,
                  name=name or "assert_rank", message=text)


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None) -> Node:
    """``x`` must have rank ``rank``: a ValueError now where both are known, else a failing run."""
    return _assert_rank(x, rank, False, data, summarize, message, name)


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None) -> Node:
    return _assert_rank(x, rank, True, data, summarize, message, name)


def assert_type(tensor, tf_type, message=None, name=None) -> Node:
    """A TypeError now unless ``tensor`` has dtype ``tf_type`` (dtypes are static)."""
    from trainer.dtypes import as_dtype

    x = convert_to_tensor(tensor)
    if x.dtype != as_dtype(tf_type):
        raise TypeError(f"{message or ''}  {x.name} must be of type {as_dtype(tf_type)!r}, not {as_dtype(x.dtype)!r}")
    return ops.no_op(name=name or "statically_determined_correct_type")


def check_numerics(tensor, message: str, name=None) -> Tensor:
    """``tensor``, failing the run if it holds a NaN or an infinity."""
    from trainer.array_ops import is_finite, reduce_all

    x = convert_to_tensor(tensor)
    check = Assert(reduce_all(is_finite(x)), [x], message=f"{message}: tensor had NaN or Inf values")
    with x.graph.control_dependencies([check]):
        return ops.identity(x, name=name)


verify_tensor_all_finite = check_numerics
