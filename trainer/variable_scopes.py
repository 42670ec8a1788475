"""``get_variable`` and ``variable_scope``: named, shareable variables as in TensorFlow 1.x.

Each graph keeps a store of the variables ``get_variable`` made, by full name ("layer1/weights").
A scope's ``reuse`` decides what a second request for a name does: ``False`` (the default) raises
"already exists", ``True`` returns the existing variable (and raises if there is none), and
``AUTO_REUSE`` creates it the first time and returns it afterwards. Scopes also carry default
initializers, regularizers and dtypes for the variables made inside them; a regularizer's loss
goes to ``GraphKeys.REGULARIZATION_LOSSES``.

>>> import trainer as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     with tf.variable_scope("layer"):
...         w = tf.get_variable("w", [2, 2])
...     with tf.variable_scope("layer", reuse=True):
...         same = tf.get_variable("w")
>>> same is w, w.name, w.op.name
(True, 'layer/w:0', 'layer/w')
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import numpy as np

from trainer import initializers
from trainer.dtypes import as_numpy_dtype
from trainer.graph import Graph, GraphKeys, Tensor, get_default_graph
from trainer.ops import convert_to_tensor
from trainer.variables import Variable

__all__ = [
    "AUTO_REUSE", "VariableScope", "get_local_variable", "get_variable", "get_variable_scope", "variable_scope",
]


class _AutoReuse:
    def __repr__(self) -> str:
        return "tf.AUTO_REUSE"


AUTO_REUSE = _AutoReuse()


@dataclass
class VariableScope:
    """A variable scope: its full ``name`` and the defaults it gives the variables made in it."""

    name: str = ""
    reuse: Any = False
    initializer: Callable | None = None
    regularizer: Callable | None = None
    dtype: Any = None
    name_scope: str = ""
    partitioner: Callable | None = None

    @property
    def original_name_scope(self) -> str:
        return self.name_scope

    def reuse_variables(self) -> None:
        """Reuse variables from here on within this scope (TensorFlow's ``scope.reuse_variables()``)."""
        self.reuse = True

    def set_initializer(self, initializer) -> None:
        self.initializer = initializer

    def set_regularizer(self, regularizer) -> None:
        self.regularizer = regularizer


@dataclass
class _Store:
    """A graph's ``get_variable`` variables by full name, and how many times each variable scope
    (by full name) is open, which ``default_name`` makes unique against, as TensorFlow does."""

    variables: dict[str, Variable] = field(default_factory=dict)
    scope_counts: dict[str, int] = field(default_factory=dict)
    local: threading.local = field(default_factory=threading.local)

    def unique_leaf(self, outer: str, default_name: str) -> str:
        """``default_name``, or ``default_name_<i>`` with the first i no scope of that name was opened."""
        prefix = f"{outer}/{default_name}" if outer else default_name
        if not self.scope_counts.get(prefix):
            return default_name
        i = 1
        while self.scope_counts.get(f"{prefix}_{i}"):
            i += 1
        return f"{default_name}_{i}"

    def close_subscopes(self, name: str) -> None:
        """Leaving the named scope ``name`` forgets the scopes opened inside it, so entering it again
        (with reuse) names them as the first time: unnamed layers get dense, dense_1 again."""
        for key in list(self.scope_counts):
            if key.startswith(name + "/"):
                self.scope_counts[key] = 0

    def stack(self) -> list[VariableScope]:
        if not hasattr(self.local, "stack"):
            self.local.stack = [VariableScope()]
        return self.local.stack


_STORES: "weakref.WeakKeyDictionary[Graph, _Store]" = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def _store(graph: Graph) -> _Store:
    with _STORES_LOCK:
        store = _STORES.get(graph)
        if store is None:
            store = _STORES[graph] = _Store()
        return store


def get_variable_scope() -> VariableScope:
    """The innermost variable scope of this thread in the default graph."""
    return _store(get_default_graph()).stack()[-1]


@contextlib.contextmanager
def variable_scope(name_or_scope=None, default_name: str | None = None, values=None, initializer=None,
                   regularizer=None, caching_device=None, partitioner=None, custom_getter=None, reuse=None,
                   dtype=None, use_resource=None, constraint=None, auxiliary_name_scope: bool = True):
    """Enter a variable scope (and a name scope of the same name for the ops built inside).

    ``reuse=None`` inherits the enclosing scope's reuse; ``True`` or ``AUTO_REUSE`` set it.
    """
    if name_or_scope is None and default_name is None:
        raise ValueError("variable_scope needs name_or_scope or default_name")
    graph = get_default_graph()
    store = _store(graph)
    stack = store.stack()
    outer = stack[-1]
    if isinstance(name_or_scope, VariableScope):
        full = leaf = name_or_scope.name
        base = name_or_scope
    else:
        leaf = name_or_scope if name_or_scope is not None else store.unique_leaf(outer.name, default_name)
        full = f"{outer.name}/{leaf}" if outer.name else leaf
        base = outer
    store.scope_counts[full] = store.scope_counts.get(full, 0) + 1
    inherited = outer.reuse if reuse is None else reuse
    if isinstance(name_or_scope, VariableScope) and reuse is None:
        inherited = name_or_scope.reuse or outer.reuse
    scope = replace(base, name=full, reuse=inherited,
                    initializer=initializer if initializer is not None else base.initializer,
                    regularizer=regularizer if regularizer is not None else base.regularizer,
                    dtype=dtype if dtype is not None else base.dtype,
                    partitioner=partitioner if partitioner is not None else base.partitioner)
    with contextlib.ExitStack() as names:
        if auxiliary_name_scope:
            if isinstance(name_or_scope, VariableScope) and name_or_scope.name_scope:
                scope.name_scope = names.enter_context(graph.name_scope(name_or_scope.name_scope))
            else:
                scope.name_scope = names.enter_context(graph.name_scope(leaf))
        stack.append(scope)
        opened = dict(store.scope_counts)
        try:
            yield scope
        finally:
            stack.pop()
            if isinstance(name_or_scope, VariableScope):  # re-entering a scope object: as TensorFlow
                store.scope_counts = opened
            else:
                store.close_subscopes(full)


def _initial_value(name: str, shape, dtype: np.dtype, initializer) -> Tensor:
    if initializer is None:
        initializer = initializers.GlorotUniform() if dtype.kind == "f" else initializers.Zeros()
    if isinstance(initializer, type) and issubclass(initializer, initializers.Initializer):
        initializer = initializer()  # tf.zeros_initializer passed without calling it
    if isinstance(initializer, Tensor) or hasattr(initializer, "as_tensor"):
        return convert_to_tensor(initializer)
    if callable(initializer):
        if shape is None:
            raise ValueError(f"get_variable {name!r}: an initializer needs the variable's shape")
        if any(d is None for d in shape):
            shown = "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"
            raise ValueError(f"Shape of a new variable ({name}) must be fully defined, but instead was {shown}.")
        return initializer(shape, dtype=dtype)
    value = np.asarray(initializer, dtype)
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise ValueError(f"get_variable {name!r}: initial value has shape {value.shape}, shape= says {tuple(shape)}")
    return convert_to_tensor(value)


def _value_dtype(initializer) -> np.dtype | None:
    """The dtype of an initial value given as the initializer (a tensor, array or number), as
    TensorFlow takes a variable's dtype from it when no dtype is given; None for an initializer
    function. Python floats are float32, as ``tf.constant`` makes them."""
    if initializer is None or callable(initializer):
        return None
    if isinstance(initializer, Tensor) or hasattr(initializer, "as_tensor"):
        return as_numpy_dtype(initializer.dtype)
    value = np.asarray(initializer)
    if value.dtype == np.float64 and not isinstance(initializer, (np.ndarray, np.generic)):
        return np.dtype(np.float32)
    return None if value.dtype.kind in "OUS" else value.dtype


def get_variable(name: str, shape=None, dtype=None, initializer=None, regularizer=None, trainable=None,
                 collections=None, caching_device=None, partitioner=None, validate_shape=True, use_resource=None,
                 custom_getter=None, constraint=None, synchronization=None, aggregation=None):
    """The variable ``<scope>/<name>``: created, or returned when the scope reuses variables."""
    graph = get_default_graph()
    store = _store(graph)
    scope = store.stack()[-1]
    full = f"{scope.name}/{name}" if scope.name else name
    existing = store.variables.get(full)
    reuse = scope.reuse
    if existing is not None:
        if reuse is False or reuse is None:
            raise ValueError(f"Variable {full} already exists, disallowed. Did you mean to set reuse=True or "
                             "reuse=tf.AUTO_REUSE in VarScope?")
        if shape is not None and tuple(existing.shape) != tuple(int(d) for d in shape):
            raise ValueError(f"Trying to share variable {full}, but specified shape {tuple(shape)} and found "
                             f"shape {tuple(existing.shape)}.")
        if dtype is not None and as_numpy_dtype(dtype) != existing.dtype:
            raise ValueError(f"Trying to share variable {full}, but specified dtype {as_numpy_dtype(dtype).name} "
                             f"and found dtype {existing.dtype.name}.")
        return existing
    if reuse is True:
        raise ValueError(f"Variable {full} does not exist, or was not created with tf.get_variable(). Did you "
                         "mean to set reuse=tf.AUTO_REUSE in VarScope?")
    initializer = initializer if initializer is not None else scope.initializer
    dt = (as_numpy_dtype(dtype) or as_numpy_dtype(scope.dtype) or _value_dtype(initializer)
          or np.dtype(np.float32))
    trainable = True if trainable is None else trainable
    partitioner = partitioner if partitioner is not None else scope.partitioner
    # The initializer's ops, as the variable's, never wait on the control dependencies around.
    with graph.control_dependencies(None):
        var = _new_variable(graph, scope, full, name, shape, dt, initializer, partitioner, trainable, collections)
    if constraint is not None:
        if not callable(constraint):
            raise ValueError(f"get_variable {full!r}: constraint must be callable, got {constraint!r}")
        for part in getattr(var, "variables", None) or [var]:  # each shard of a partitioned variable
            part.constraint = constraint
    store.variables[full] = var
    regularizer = regularizer if regularizer is not None else scope.regularizer
    if regularizer is not None:
        with graph.name_scope(f"{full}/Regularizer/"):
            loss = regularizer(var)
        if loss is not None:
            graph.add_to_collection(GraphKeys.REGULARIZATION_LOSSES, loss)
    return var


def _new_variable(graph, scope, full, name, shape, dt, initializer, partitioner, trainable, collections):
    """The variable ``full`` made as ``get_variable`` asks: one Variable, or a partitioned one."""
    if partitioner is not None:
        return _partitioned(full, shape, dt, initializer, partitioner, trainable, collections)
    with graph.name_scope(f"{scope.name}/" if scope.name else "/"):
        with graph.name_scope(f"{full}/Initializer/"):  # exact scope: leaves the name <full> free
            init = _initial_value(full, shape, dt, initializer)
        if init.dtype != dt:
            from trainer.ops import cast

            init = cast(init, dt)
        if collections is None:
            collections = [GraphKeys.GLOBAL_VARIABLES] + ([GraphKeys.TRAINABLE_VARIABLES] if trainable else [])
        return Variable(init, trainable=trainable, name=name, collections=collections)


def _partitioned(full, shape, dtype, initializer, partitioner, trainable, collections):
    try:
        from trainer.partitioned_variables import partitioned_variable
    except ImportError:
        raise NotImplementedError(
            f"get_variable {full!r}: partitioner= needs partitioned variables (trainer.partitioned_variables), "
            "which this build does not have; drop partitioner= to make one unpartitioned variable"
        ) from None
    return partitioned_variable(full, shape, dtype=dtype, initializer=initializer, partitioner=partitioner,
                                trainable=trainable, collections=collections)


def get_local_variable(name: str, shape=None, dtype=None, initializer=None, **kwargs):
    """A non-trainable variable in LOCAL_VARIABLES (run by ``local_variables_initializer``)."""
    return get_variable(name, shape, dtype, initializer, trainable=False,
                        collections=[GraphKeys.LOCAL_VARIABLES], **kwargs)
