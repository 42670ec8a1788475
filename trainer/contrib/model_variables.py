"""Slim's variable helpers (``tf.contrib.framework``'s): model variables, variables by scope, name
or suffix, the subset to restore, and restoring it from a checkpoint.

``scope`` and ``suffix`` filter as TensorFlow's do: ``scope`` is a regular expression matched
from the start of a variable's name, ``suffix`` one matched at its end (before ``:0``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from trainer.graph import GraphKeys, get_default_graph
from trainer.variable_scopes import VariableScope, get_variable

__all__ = ["add_model_variable", "assign_from_checkpoint_fn", "get_local_variables", "get_model_variables",
           "get_trainable_variables", "get_unique_variable", "get_variable_full_name", "get_variables",
           "get_variables_by_name", "get_variables_by_suffix", "get_variables_to_restore",
           "global_variable", "local_variable", "model_variable", "variable"]


def variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None, trainable: bool = True,
             collections=None, caching_device=None, device=None, partitioner=None, custom_getter=None,
             use_resource=None, synchronization=None, aggregation=None):
    """``get_variable`` that also files the variable under ``collections`` (beside GLOBAL_VARIABLES)."""
    from trainer.graph import device as device_scope

    keys = list(dict.fromkeys([GraphKeys.GLOBAL_VARIABLES] + list(collections or [])
                              + ([GraphKeys.TRAINABLE_VARIABLES] if trainable else [])))
    with device_scope(device) if device is not None else contextlib.nullcontext():
        return get_variable(name, shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
                            trainable=trainable, collections=keys, partitioner=partitioner)


def model_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None, trainable: bool = True,
                   collections=None, caching_device=None, device=None, partitioner=None, custom_getter=None,
                   use_resource=None, synchronization=None, aggregation=None):
    """A ``variable`` that is part of the model (MODEL_VARIABLES): what ``get_model_variables`` and
    checkpoints of the model hold."""
    return variable(name, shape, dtype, initializer, regularizer, trainable,
                    [GraphKeys.MODEL_VARIABLES] + list(collections or []), device=device, partitioner=partitioner)


def local_variable(initial_value, validate_shape: bool = True, name=None, use_resource=None):
    """A non-trainable variable in LOCAL_VARIABLES (a counter or a streaming metric's total)."""
    from trainer.variables import Variable

    return Variable(initial_value, trainable=False, name=name, collections=[GraphKeys.LOCAL_VARIABLES],
                    validate_shape=validate_shape)


def global_variable(initial_value, validate_shape: bool = True, name=None, use_resource=None):
    """A non-trainable variable in GLOBAL_VARIABLES (saved in checkpoints, not trained)."""
    from trainer.variables import Variable

    return Variable(initial_value, trainable=False, name=name, collections=[GraphKeys.GLOBAL_VARIABLES],
                    validate_shape=validate_shape)


def get_variable_full_name(var) -> str:
    """The name ``var`` is saved under: its op's name."""
    return var.op.name


def add_model_variable(var) -> None:
    """File ``var`` under MODEL_VARIABLES (once)."""
    graph = get_default_graph()
    if not any(v is var for v in graph.get_collection(GraphKeys.MODEL_VARIABLES)):
        graph.add_to_collection(GraphKeys.MODEL_VARIABLES, var)


def get_variables(scope=None, suffix: str | None = None, collection: str = GraphKeys.GLOBAL_VARIABLES) -> list:
    """The variables of ``collection`` whose names ``scope`` matches from the start and end in ``suffix``."""
    if isinstance(scope, VariableScope):
        scope = scope.name
    if suffix is not None:
        if ":" not in suffix:
            suffix += ":"
        scope = (scope or "") + ".*" + suffix
    return get_default_graph().get_collection(collection, scope)


def get_model_variables(scope=None, suffix: str | None = None) -> list:
    return get_variables(scope, suffix, GraphKeys.MODEL_VARIABLES)


def get_trainable_variables(scope=None, suffix: str | None = None) -> list:
    return get_variables(scope, suffix, GraphKeys.TRAINABLE_VARIABLES)


def get_local_variables(scope=None, suffix: str | None = None) -> list:
    return get_variables(scope, suffix, GraphKeys.LOCAL_VARIABLES)


def get_variables_by_suffix(suffix: str, scope=None) -> list:
    return get_variables(scope=scope, suffix=suffix)


def get_variables_by_name(given_name: str, scope=None) -> list:
    """The variables whose last name component is ``given_name`` (``weights`` finds ``conv1/weights``)."""
    return get_variables(scope=scope, suffix=f"/{given_name}:|^{given_name}:")


def get_unique_variable(var_op_name: str):
    """The one variable named exactly ``var_op_name``."""
    for var in get_variables(scope=var_op_name):
        if var.op.name == var_op_name:
            return var
    raise ValueError(f"Couldn't find variable {var_op_name}")


def get_variables_to_restore(include=None, exclude=None) -> list:
    """The variables under the scopes in ``include`` (all of them by default) less those under the
    scopes in ``exclude``: what to restore from a checkpoint of another model (a new head)."""
    if include is None:
        candidates = get_variables()
    else:
        if not isinstance(include, (list, tuple)):
            raise TypeError(f"include is provided but is not a list or a tuple, got {type(include).__name__}")
        candidates = [v for scope in include for v in get_variables(scope)]
    if exclude is not None and not isinstance(exclude, (list, tuple)):
        raise TypeError(f"exclude is provided but is not a list or a tuple, got {type(exclude).__name__}")
    excluded = {id(v) for scope in exclude or [] for v in get_variables(scope)}
    return [v for v in dict.fromkeys(candidates) if id(v) not in excluded]


def assign_from_checkpoint_fn(model_path: str, var_list, ignore_missing_vars: bool = False,
                              reshape_variables: bool = False) -> Callable | None:
    """A function ``fn(session)`` restoring ``var_list`` (a list, or a dict {name in the checkpoint:
    variable}) from the checkpoint ``model_path``; with ``ignore_missing_vars`` the variables the
    checkpoint lacks are skipped (None when it holds none of them)."""
    from trainer.checkpoint_utils import list_variables
    from trainer.saver import Saver

    if reshape_variables:
        raise NotImplementedError("assign_from_checkpoint_fn: reshape_variables=True is not supported")
    if not var_list:
        raise ValueError("assign_from_checkpoint_fn: var_list is empty")
    named = var_list if isinstance(var_list, dict) else {v.op.name: v for v in var_list}
    if ignore_missing_vars:
        stored = {name for name, _ in list_variables(model_path)}
        named = {name: v for name, v in named.items() if name in stored}
        if not named:
            return None
    saver = Saver(named)

    def restore(session) -> None:
        saver.restore(session, model_path)

    return restore
