"""The error types of the trainer's execution core, in a leaf module every layer may import.

``GraphError`` is a graph that cannot be built or run as asked; ``KernelError`` a kernel that
failed while running; ``FailedPreconditionError`` and ``OutOfRangeError`` are session-state
errors that keep their type when re-raised with the failing node's name, so callers can catch
them (an uninitialized variable; a closed, drained queue ending an epoch loop).

The module is also ``tf.errors``: TensorFlow 1.x's names map onto these types, so
``except tf.errors.OutOfRangeError`` ends an input loop as in TensorFlow and ``OpError`` (TensorFlow's
base class) catches any of them.
"""

from __future__ import annotations

from schemas.registry import UnsupportedOpError

__all__ = [
    "DataLossError", "DeadlineExceededError", "FailedPreconditionError", "GraphError", "InvalidArgumentError", "KernelArgumentError", "KernelError",
    "OpError",
    "OutOfRangeError", "UnimplementedError", "UnknownError", "node_error",
]


class GraphError(ValueError):
    """A graph that cannot be built or run as asked (foreign tensor, cycle, missing feed, ...)."""


class KernelError(RuntimeError):
    """A kernel failed while running; names the node and its op."""


class FailedPreconditionError(RuntimeError):
    """The graph is fine but the session state is not (uninitialized variable, closed queue)."""


class OutOfRangeError(RuntimeError):
    """A closed, drained queue: the input pipeline is done (the normal way an epoch loop ends)."""


class DeadlineExceededError(RuntimeError):
    """A wait ran past its timeout (a token queue, an accumulator): a peer is dead or too slow."""


class DataLossError(RuntimeError):
    """Stored data is corrupt or truncated (a TFRecord whose checksum does not match)."""


class KernelArgumentError(GraphError, KernelError):
    """A kernel refused its inputs at run time (an index out of range, shapes that do not fit):
    TensorFlow's InvalidArgumentError, and still a ``KernelError`` naming the node."""


InvalidArgumentError = GraphError  # a bad feed, fetch or graph, or a kernel's bad inputs
UnimplementedError = UnsupportedOpError
UnknownError = KernelError  # a kernel failed (the message names the node)
OpError = (DataLossError, DeadlineExceededError, OutOfRangeError, FailedPreconditionError, GraphError, UnsupportedOpError, KernelError)


def node_error(node, e: Exception) -> Exception:
    """The error ``e`` re-raised naming the node; state errors keep their type so callers can catch them."""
    where = f"node {node.name!r} ({node.op_type})"
    if isinstance(e, (DeadlineExceededError, FailedPreconditionError, OutOfRangeError)):
        return type(e)(f"{where}: {e}")
    if isinstance(e, (IndexError, ValueError)):  # ShapeError too: the inputs, not the kernel, are wrong
        return KernelArgumentError(f"{where} failed: {type(e).__name__}: {e}")
    return KernelError(f"{where} failed: {type(e).__name__}: {e}")
