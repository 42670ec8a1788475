"""``tf.case``: the first branch whose predicate holds, as nested ``cond``s (TensorFlow 1.15's way).

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     x = tf.placeholder(tf.int32, [])
...     y = tf.case([(tf.less(x, 0), lambda: tf.constant(-1)), (tf.equal(x, 0), lambda: tf.constant(0))],
...                 default=lambda: tf.constant(1))
>>> s = tf.Session(graph=g)
>>> [int(s.run(y, {x: v})) for v in (-5, 0, 7)]
[-1, 0, 1]
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np

from trainer.array_ops import reduce_sum, stack
from trainer.control_flow import cond
from trainer.debugging import Assert
from trainer.graph import Tensor, get_default_graph
from trainer.ops import cast, less

__all__ = ["case"]


def _pairs(pred_fn_pairs, exclusive: bool, name: str) -> list[tuple[Tensor, Callable]]:
    if isinstance(pred_fn_pairs, dict):
        if not exclusive:
            logging.getLogger("tensorflow").warning(
                "%s: An unordered dictionary of predicate/fn pairs was provided, but exclusive=False. The order of "
                "conditional tests is deterministic but not guaranteed.", name)
        pred_fn_pairs = sorted(pred_fn_pairs.items(), key=lambda item: item[0].name)
    elif not isinstance(pred_fn_pairs, (list, tuple)):
        raise TypeError("fns must be a list, tuple, or dict")
    pairs = []
    for pair in pred_fn_pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise TypeError("Each entry in pred_fn_pairs must be a 2-tuple")
        pred, fn = pair
        if not isinstance(pred, Tensor):
            raise TypeError(f"pred must be a Tensor, got: {pred!r}")
        if pred.dtype != np.dtype(bool):
            raise TypeError(f"pred must be Tensor of type bool: {pred.name}")
        if not callable(fn):
            raise TypeError(f"fn for pred {pred.name} must be callable.")
        pairs.append((pred, fn))
    if not pairs:
        raise ValueError("case: pred_fn_pairs is empty")
    return pairs


def _guarded(fn: Callable, check) -> Callable:
    def branch():
        with get_default_graph().control_dependencies([check()]):
            return fn()

    return branch


def _first_of(pred: Tensor, fn: Callable, rest: Callable, strict: bool) -> Callable:
    """``fn()`` where ``pred`` holds, else ``rest()``: one link of the chain of conds."""
    return lambda: cond(pred, fn, rest, strict=strict)


def case(pred_fn_pairs, default: Callable | None = None, exclusive: bool = False, strict: bool = False,
         name: str = "case"):
    """The result of the first ``fn`` in ``pred_fn_pairs`` whose predicate is True, else of ``default``.

    ``pred_fn_pairs`` is a list of ``(bool scalar tensor, fn)`` or a dict (taken in the order of
    the predicates' names). Without ``default`` the last pair's ``fn`` is the default, asserting
    that its predicate holds (InvalidArgumentError when none does). ``exclusive`` asserts that at
    most one predicate holds. Only the chosen ``fn``'s ops run.
    """
    pairs = _pairs(pred_fn_pairs, exclusive, name)
    g = get_default_graph()
    with g.name_scope(name):
        predicates = [p for p, _ in pairs]
        if default is None:
            (last_pred, last_fn), pairs = pairs[-1], pairs[:-1]
            default = _guarded(last_fn, lambda: Assert(
                last_pred, [stack(predicates)], message="Input error: None of conditions evaluated as True:"))
        result = default
        for pred, fn in reversed(pairs):
            result = _first_of(pred, fn, result, strict)
        if exclusive and len(predicates) > 1:
            preds = stack(predicates, name="preds_c")
            at_most_one = Assert(less(reduce_sum(cast(preds, np.int32)), 2), [preds], summarize=len(predicates),
                                 message="More than one condition evaluated as True but exclusive=True. Conditions: "
                                         f"({', '.join(p.name for p in predicates)}), Values:")
            result = _guarded(result, lambda: at_most_one)
        return result()

