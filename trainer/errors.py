"""The error types of the trainer's execution core, in a leaf module every layer may import.

``GraphError`` is a graph that cannot be built or run as asked; ``KernelError`` a kernel that
failed while running; ``FailedPreconditionError`` and ``OutOfRangeError`` are session-state
errors that keep their type when re-raised with the failing node's name, so callers can catch
them (an uninitialized variable; a closed, drained queue ending an epoch loop).
"""

from __future__ import annotations

__all__ = ["FailedPreconditionError", "GraphError", "KernelError", "OutOfRangeError", "node_error"]


class GraphError(ValueError):
    """A graph that cannot be built or run as asked (foreign tensor, cycle, missing feed, ...)."""


class KernelError(RuntimeError):
    """A kernel failed while running; names the node and its op."""


class FailedPreconditionError(RuntimeError):
    """The graph is fine but the session state is not (uninitialized variable, closed queue)."""


class OutOfRangeError(RuntimeError):
    """A closed, drained queue: the input pipeline is done (the normal way an epoch loop ends)."""


def node_error(node, e: Exception) -> Exception:
    """The error ``e`` re-raised naming the node; state errors keep their type so callers can catch them."""
    where = f"node {node.name!r} ({node.op_type})"
    if isinstance(e, (FailedPreconditionError, OutOfRangeError)):
        return type(e)(f"{where}: {e}")
    return KernelError(f"{where} failed: {type(e).__name__}: {e}")
