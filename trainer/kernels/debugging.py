"""Kernels of the debugging ops: Print and PrintV2 (side effects), Assert and EnsureShape (fail the
run), Timestamp (the clock)."""

from __future__ import annotations

import logging
import sys
import threading
import time

import numpy as np

from edge_runtime.kernels import kernel
from trainer.graph import GraphError
from trainer.kernels.registry import stateful_kernel
from trainer.print_format import format_tensor, scalar_text

__all__ = ["InvalidArgumentError", "PRINT_PLACEHOLDER"]

_counts: dict = {}
_lock = threading.Lock()


class InvalidArgumentError(GraphError):
    """A value that fails a graph assertion (tf.Assert, tf.assert_*, check_numerics)."""


def _show(values, summarize: int) -> str:
    """Each tensor as TensorFlow 1.x's Print shows it: ``[v v v...]``, the first ``summarize`` values."""
    parts = []
    for v in values:
        a = np.asarray(v)
        flat = a.reshape(-1)
        shown = " ".join(scalar_text(x) for x in flat[:summarize]) + ("..." if flat.size > summarize else "")
        parts.append(f"[{shown}]")
    return "".join(parts)


@stateful_kernel("Print")
def print_kernel(rctx, value, *data, xp, message, first_n, summarize):
    key = (id(rctx.state), message)
    with _lock:
        n = _counts[key] = _counts.get(key, 0) + 1
    if first_n < 0 or n <= first_n:
        print(f"{message}{_show(data, summarize)}", file=sys.stderr)
    return value


def _joined(values, summarize: int) -> str:
    """An assertion's data for its error message: arrays in brackets, scalars (the message parts
    tf.assert_* pass) as they are, space-separated."""
    parts = []
    for v in values:
        a = np.asarray(v)
        flat = a.reshape(-1)
        shown = " ".join(str(x) for x in flat[:summarize]) + (" ..." if flat.size > summarize else "")
        parts.append(f"[{shown}]" if a.ndim else str(a[()]))
    return " ".join(parts)


@stateful_kernel("Assert")
def assert_kernel(rctx, condition, *data, xp, summarize, message):
    if not bool(np.all(condition)):
        raise InvalidArgumentError(f"assertion failed: {message} {_joined(data, summarize)}".replace("  ", " "))
    return condition


# tf.print's template marks each input's place with this character (never in printable text).
PRINT_PLACEHOLDER = "\x1e"

_LOG_LEVELS = {"log://debug": 10, "log://info": 20, "log://warning": 30, "log://error": 40}


def _write(stream: str, text: str) -> None:
    if stream in ("stderr", "stdout"):
        out = sys.stderr if stream == "stderr" else sys.stdout
        out.write(text)
        out.flush()
    elif stream.startswith("file://"):
        with open(stream[len("file://"):], "a", encoding="utf-8") as f:
            f.write(text)
    else:
        logging.getLogger("tensorflow").log(_LOG_LEVELS[stream], text[:-1] if text.endswith("\n") else text)


@stateful_kernel("PrintV2")
def print_v2_kernel(rctx, *inputs, xp, template, output_stream, end, summarize):
    pieces = template.split(PRINT_PLACEHOLDER)
    shown = [format_tensor(v, summarize) for v in inputs]
    text = pieces[0] + "".join(s + p for s, p in zip(shown, pieces[1:]))
    _write(output_stream, text + end)
    return None


@kernel("EnsureShape", domain="flowstack")
def ensure_shape_kernel(x, *, xp, shape):
    want = [int(d) for d in shape]
    if len(x.shape) != len(want) or any(w >= 0 and w != h for h, w in zip(x.shape, want)):
        shown = "[" + ",".join("?" if w < 0 else str(w) for w in want) + "]"
        raise InvalidArgumentError(f"EnsureShape: shape of tensor {list(x.shape)} is not compatible with expected "
                                   f"shape {shown}")
    return x


@stateful_kernel("Timestamp")
def timestamp_kernel(rctx, *, xp):
    return np.asarray(time.time(), np.float64)
