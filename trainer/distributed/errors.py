"""Errors of the distributed runtime, and how a task's error crosses the wire and comes back typed.

A failing remote partition answers with ``{"error": {"type": ..., "message": ...}}``; the caller
re-raises it as the same family of exception (``FailedPreconditionError`` stays catchable as such)
with the task's name in front, so a user sees where it happened.
"""

from __future__ import annotations

from trainer import errors
from trainer.errors import FailedPreconditionError, OutOfRangeError

__all__ = ["AbortedError", "DeadlineExceededError", "DistributedError", "StaleIncarnationError",
           "UnavailableError", "UnknownTaskError", "error_from_wire", "error_to_wire"]


class DistributedError(RuntimeError):
    """A step or request failed on a task; the message names the task."""


class UnavailableError(DistributedError):
    """A peer task did not answer (not started, crashed, unreachable)."""


class DeadlineExceededError(DistributedError, errors.DeadlineExceededError, TimeoutError):
    """A wait (a Recv, a call, a startup check) ran out of time."""


class AbortedError(DistributedError):
    """The step was aborted because a partition of it failed elsewhere."""


class StaleIncarnationError(DistributedError):
    """A request meant for an earlier incarnation of a task (the task restarted since)."""


class UnknownTaskError(DistributedError):
    """A request from a job or task that is not in the receiver's cluster."""


class UnknownHandleError(DistributedError):
    """RunStep named a partition the task does not hold (never registered, or the task restarted)."""


# Types that keep their identity across the wire; anything else arrives as DistributedError.
_WIRE_TYPES = {cls.__name__: cls for cls in (
    AbortedError, DeadlineExceededError, StaleIncarnationError, UnknownTaskError, UnavailableError,
    UnknownHandleError, FailedPreconditionError, OutOfRangeError)}


def error_to_wire(error: BaseException) -> dict:
    name = type(error).__name__
    return {"type": name if name in _WIRE_TYPES else "DistributedError",
            "message": str(error) if name in _WIRE_TYPES else f"{name}: {error}"}


def error_from_wire(err: dict, task: str) -> Exception:
    """The exception a task reported, its message prefixed with the task's name (once)."""
    cls = _WIRE_TYPES.get(err.get("type"), DistributedError)
    message = str(err.get("message", "unknown error"))
    return cls(message if message.startswith("/job:") else f"{task}: {message}")
