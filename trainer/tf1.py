"""The top-level names TensorFlow 1.15 scripts use that ``trainer`` adds for them (issue 21).

``trainer/__init__.py`` re-exports ``__all__`` from here after its own names, so the TF1 spellings
(reductions with ``reduction_indices``, ``argmax`` with ``dimension``, ``matmul`` with
``transpose_b``) are the ones ``import trainer as tf`` sees.
"""

from __future__ import annotations

from trainer import contrib, initializers
from trainer.array_ops import *  # noqa: F403 - the core ops as TensorFlow 1.15 spells them
from trainer.array_ops import __all__ as _ARRAY_OPS
from trainer.dtypes import *  # noqa: F403 - tf.float32 & co.
from trainer.dtypes import __all__ as _DTYPES
from trainer.functional_ops import foldl, foldr, map_fn, scan
from trainer.graph import get_default_graph
from trainer.initializers import (
    constant_initializer,
    glorot_normal_initializer,
    glorot_uniform_initializer,
    ones_initializer,
    random_normal_initializer,
    random_uniform_initializer,
    truncated_normal_initializer,
    variance_scaling_initializer,
    zeros_initializer,
)
from trainer.interactive import InteractiveSession, get_default_session
from trainer.ops import convert_to_tensor
from trainer.random_ops import multinomial, random_normal, random_shuffle, random_uniform, set_random_seed, truncated_normal
from trainer.variable_scopes import (
    AUTO_REUSE,
    VariableScope,
    get_local_variable,
    get_variable,
    get_variable_scope,
    variable_scope,
)
from trainer.tensor_shape import Dimension, TensorShape, dimension_value
from trainer.variables import local_variables, local_variables_initializer

newaxis = None


def get_collection(key: str, scope: str | None = None) -> list:
    return get_default_graph().get_collection(key, scope)


def add_to_collection(name: str, value) -> None:
    get_default_graph().add_to_collection(name, value)


def placeholder_with_default(input, shape, name=None):  # noqa: A002 - TF's name
    """``input`` unless fed: any tensor can be fed, so this is an Identity of ``input``."""
    from trainer.ops import identity

    return identity(input, name=name or "PlaceholderWithDefault")


def initialize_all_variables():
    """The deprecated name of ``global_variables_initializer``."""
    from trainer.variables import global_variables_initializer

    return global_variables_initializer()


__all__ = sorted(set(_ARRAY_OPS) | set(_DTYPES) | {
    "AUTO_REUSE", "Dimension", "InteractiveSession", "TensorShape", "dimension_value", "VariableScope", "add_to_collection", "constant_initializer", "contrib",
    "convert_to_tensor", "foldl", "foldr", "get_collection", "get_default_session", "get_local_variable", "get_variable",
    "get_variable_scope", "glorot_normal_initializer", "glorot_uniform_initializer", "initialize_all_variables",
    "initializers", "local_variables", "local_variables_initializer", "map_fn", "multinomial", "newaxis", "ones_initializer",
    "placeholder_with_default", "random_normal", "random_normal_initializer", "random_shuffle", "random_uniform",
    "random_uniform_initializer", "scan", "set_random_seed", "truncated_normal", "truncated_normal_initializer",
    "variable_scope", "variance_scaling_initializer", "zeros_initializer",
})
