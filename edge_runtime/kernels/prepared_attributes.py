"""Arrays a kernel builds from its node's attributes, built once per node instead of once per call.

A tree ensemble or an SVM carries its model in attribute lists (tens of thousands of node ids,
thresholds, support vectors). Turning them into arrays and checking them costs milliseconds, far
more than evaluating a small batch, and the attributes never change: the plan hands a step the
same attribute objects on every call. So the built value is kept, keyed by the identity of those
objects (scalars, such as an input's width, by value). The entry holds the objects themselves, so
an id cannot be reused by another list while its entry lives; a bounded table keeps models that
were unloaded from pinning memory for long.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 64

_SCALARS = (type(None), bool, int, float, str)
_TABLE: OrderedDict[tuple, tuple[tuple, object]] = OrderedDict()
_LOCK = threading.Lock()


def prepared(what: str, sources: Sequence[object], build: Callable[[], T]) -> T:
    """``build()``'s result for these exact ``sources`` objects, built on the first call only.

    >>> calls = []
    >>> weights = [1.0, 2.0]
    >>> first = prepared("sum", [weights], lambda: calls.append(1) or sum(weights))
    >>> again = prepared("sum", [weights], lambda: calls.append(1) or sum(weights))
    >>> _ = [prepared("width", [weights, int("1000")], lambda: calls.append(2)) for _ in range(2)]
    >>> first, again, calls
    (3.0, 3.0, [1, 2])
    """
    key = (what, *(("=", s) if isinstance(s, _SCALARS) else id(s) for s in sources))
    with _LOCK:
        hit = _TABLE.get(key)
        if hit is not None and all(a is b or isinstance(b, _SCALARS) for a, b in zip(hit[0], sources)):
            _TABLE.move_to_end(key)
            return hit[1]  # type: ignore[return-value]
    value = build()  # outside the lock: a bad model's error must not hold other threads
    with _LOCK:
        _TABLE[key] = (tuple(sources), value)
        while len(_TABLE) > MAX_ENTRIES:
            _TABLE.popitem(last=False)
    return value
