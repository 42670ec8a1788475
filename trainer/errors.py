"""``tf.errors``: TensorFlow 1.x's error classes as the trainer's own exceptions.

``except tf.errors.OutOfRangeError`` ends an input loop here as it does in TensorFlow; ``OpError``
(TensorFlow's base class) catches any of them.
"""

from schemas.registry import UnsupportedOpError
from trainer.executor import KernelError
from trainer.graph import GraphError
from trainer.state import FailedPreconditionError, OutOfRangeError

__all__ = [
    "FailedPreconditionError", "InvalidArgumentError", "OpError", "OutOfRangeError", "UnimplementedError",
    "UnknownError",
]

InvalidArgumentError = GraphError  # a bad feed, fetch or graph
UnimplementedError = UnsupportedOpError
UnknownError = KernelError  # a kernel failed (the message names the node)
OpError = (OutOfRangeError, FailedPreconditionError, GraphError, UnsupportedOpError, KernelError)
