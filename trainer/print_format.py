"""How ``tf.print`` shows a value: TensorFlow 1.15's summarized layout, NumPy-free of its own options.

A tensor prints as nested brackets, entries separated by spaces and rows by a newline plus one space
per open bracket (``[[1 2]\\n [3 4]]``). With ``summarize`` n >= 0, a dim longer than 2n keeps its
first and last n entries around ``...``; -1 shows everything. Floats take their shortest exact form
(``2`` for 2.0, ``0.1``), strings print raw, scalars bare.
"""

from __future__ import annotations

import numpy as np

__all__ = ["format_tensor", "scalar_text"]


def scalar_text(x) -> str:
    """One value as TensorFlow prints it: floats in their shortest exact form, booleans as 1 and 0."""
    if isinstance(x, (bytes, np.bytes_)):
        return bytes(x).decode("utf-8", "replace")
    if isinstance(x, (np.floating, float)):
        text = str(x)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(x, (np.bool_, bool)):
        return "1" if x else "0"
    return str(x)


def _kept(n: int, summarize: int) -> list[int | None]:
    """The entry positions a dim of ``n`` shows, None where ``...`` stands."""
    if summarize < 0 or n <= 2 * summarize:
        return list(range(n))
    return list(range(summarize)) + [None] + list(range(n - summarize, n))


def _format(a: np.ndarray, summarize: int, depth: int) -> str:
    if a.ndim == 0:
        return scalar_text(a[()])
    parts = ["..." if i is None else _format(a[i], summarize, depth + 1) for i in _kept(a.shape[0], summarize)]
    sep = " " if a.ndim == 1 else "\n" * (a.ndim - 1) + " " * (depth + 1)
    return "[" + sep.join(parts) + "]"


def format_tensor(value, summarize: int = 3) -> str:
    """``value`` as tf.print shows it."""
    return _format(np.asarray(value), int(summarize), 0)
