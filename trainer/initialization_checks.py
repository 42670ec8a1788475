"""``tf.is_variable_initialized`` and ``tf.report_uninitialized_variables``: graph ops telling
whether variables have values in the session that runs them (a ``SessionManager``'s ready checks).

Each check is an ``IsVariableInitialized`` op built beside its variable (colocated, as TF does),
so on a cluster it runs on the parameter server holding the variable and reads that task's state.
"""

from __future__ import annotations

import numpy as np

from trainer.graph import get_default_graph
from trainer.ops import constant, make_op

__all__ = ["is_variable_initialized", "report_uninitialized_variables"]


def _variable_node(variable, where: str):
    node = getattr(variable, "node", None)
    if node is None or node.op_type != "Variable":
        raise TypeError(f"{where}: expected a tf.Variable, got {type(variable).__name__} {variable!r}")
    return node


def is_variable_initialized(variable, name: str | None = None):
    """A scalar bool: whether ``variable`` has a value in the session running the op."""
    node = _variable_node(variable, "is_variable_initialized")
    graph = node.graph
    with graph.as_default(), graph.colocate_with(node):
        return make_op("IsVariableInitialized", [], {"shared_name": node.attrs["shared_name"]},
                       domain="flowstack", name=name or "IsVariableInitialized").outputs[0]


def report_uninitialized_variables(var_list=None, name: str = "report_uninitialized_variables"):
    """A 1-D string tensor of the names (``v.op.name``) of the variables of ``var_list`` (default:
    the global and local variables) that have no value yet; empty when all do."""
    from trainer.array_ops import boolean_mask, stack
    from trainer.variables import global_variables, local_variables

    graph = get_default_graph()
    if var_list is None:
        var_list = global_variables(graph) + local_variables(graph)
    var_list = list(var_list)
    with graph.as_default(), graph.name_scope(name):
        names = np.array([_variable_node(v, "report_uninitialized_variables").name for v in var_list], dtype=object)
        if not var_list:
            return constant(names.astype(object), name="names")
        missing = [make_op("Not", [is_variable_initialized(v)]).outputs[0] for v in var_list]
        return boolean_mask(constant(names, name="names"), stack(missing))
