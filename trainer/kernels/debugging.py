"""Stateful kernels of the debugging ops: Print (a side effect) and Assert (fails the run)."""

from __future__ import annotations

import sys
import threading

import numpy as np

from trainer.graph import GraphError
from trainer.kernels.registry import stateful_kernel

__all__ = ["InvalidArgumentError"]

_counts: dict = {}
_lock = threading.Lock()


class InvalidArgumentError(GraphError):
    """A value that fails a graph assertion (tf.Assert, tf.assert_*, check_numerics)."""


def _show(values, summarize: int) -> str:
    parts = []
    for v in values:
        a = np.asarray(v)
        flat = a.reshape(-1)
        shown = " ".join(str(x) for x in flat[:summarize]) + (" ..." if flat.size > summarize else "")
        parts.append(f"[{shown}]" if a.ndim else str(a[()]))
    return " ".join(parts)


@stateful_kernel("Print")
def print_kernel(rctx, value, *data, xp, message, first_n, summarize):
    key = (id(rctx.state), message)
    with _lock:
        n = _counts[key] = _counts.get(key, 0) + 1
    if first_n < 0 or n <= first_n:
        print(f"{message}{_show(data, summarize)}", file=sys.stderr)
    return value


@stateful_kernel("Assert")
def assert_kernel(rctx, condition, *data, xp, summarize, message):
    if not bool(np.all(condition)):
        raise InvalidArgumentError(f"assertion failed: {message} {_show(data, summarize)}".replace("  ", " "))
    return condition
