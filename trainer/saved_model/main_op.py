"""``tf.saved_model.main_op``: the op a loaded SavedModel runs after its variables are restored."""

from __future__ import annotations

from trainer.ops import group
from trainer.variables import local_variables_initializer

__all__ = ["main_op", "main_op_with_restore"]


def main_op():
    """Initialize the local variables (flowstack has no lookup tables to initialize)."""
    return group(local_variables_initializer(), name="main_op")


def main_op_with_restore(restore_op_name: str):
    """``main_op`` after the op named ``restore_op_name``."""
    from trainer.graph import get_default_graph

    restore = get_default_graph().get_operation_by_name(restore_op_name)
    return group(restore, local_variables_initializer(), name="main_op_with_restore")
