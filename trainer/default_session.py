"""Each thread's default sessions: ``with sess:`` and ``with sess.as_default():`` push one, and
``tensor.eval()`` / ``op.run()`` use the innermost (trainer/interactive.py), as in TensorFlow 1.x."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

__all__ = ["default_session_stack", "pushed_session"]

_local = threading.local()


def default_session_stack() -> list:
    """This thread's sessions made default by ``with``, innermost last."""
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


@contextlib.contextmanager
def pushed_session(session) -> Iterator:
    """Make ``session`` this thread's default session inside the block."""
    stack = default_session_stack()
    stack.append(session)
    try:
        yield session
    finally:
        stack.pop()
