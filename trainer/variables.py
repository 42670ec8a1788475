"""Variables: named mutable buffers owned by the session, read and updated by graph ops."""

from __future__ import annotations

import numpy as np

from trainer.graph import TRAINER_DOMAIN, Graph, GraphKeys, Tensor, get_default_graph
from trainer import ops, state_ops

__all__ = [
    "Variable",
    "count_up_to",
    "global_variables",
    "global_variables_initializer",
    "local_variables",
    "local_variables_initializer",
    "trainable_variables",
    "variables_initializer",
]


class Variable:
    """``Variable(initial_value, trainable=True, name=None)``: state that outlives a step.

    The variable node outputs the live buffer; ``assign*`` and optimizer updates change it in place.
    ``name`` is TensorFlow's: the name of that output tensor (``"layer/w:0"``); ``op.name`` is the
    node's (``"layer/w"``), the name checkpoints, slots and updates are keyed by.
    ``initializer`` is the Assign that sets the initial value. ``save_slice_info`` is set on the
    shards of a partitioned variable (trainer/partitioned_variables.py): the Saver saves them as
    one logical tensor.
    """

    save_slice_info = None

    # A function of the variable applied after each optimizer update (tf.layers' *_constraint,
    # get_variable's constraint=), as TensorFlow's optimizers apply it; None for none.
    constraint = None

    def __init__(self, initial_value, trainable: bool = True, name: str | None = None, dtype=None,
                 collections=None, validate_shape: bool = True, constraint=None):
        if constraint is not None and not callable(constraint):
            raise ValueError(f"Variable: constraint must be callable, got {constraint!r}")
        self.constraint = constraint
        graph = get_default_graph()
        # A variable's initial value and initializer run once, outside any cond or while_loop
        # and any control_dependencies being built (as the slots an optimizer makes inside a
        # tf.cond), as in TensorFlow.
        with graph.control_flow_context(None), graph.control_dependencies(None):
            if callable(initial_value):
                initial_value = initial_value()
            if isinstance(initial_value, Tensor):
                init = initial_value
            else:
                init = ops.constant(np.asarray(initial_value, dtype=dtype) if dtype is not None
                                    else _default_dtype(initial_value), name=(name or "Variable") + "/initial_value")
            if validate_shape and (init.shape is None or any(d is None for d in init.shape)):
                raise ValueError(f"variable {name!r}: the initial value needs a fully known shape, got {init.shape} "
                                 "(or pass validate_shape=False)")
            if init.shape is None:
                raise ValueError(f"variable {name!r}: the initial value needs a known rank")
            node = graph.create_op(
                # validate_shape=False: the value may change shape, so only the rank is known (TF: unknown)
                "Variable", [], {"dtype": init.dtype.name,
                                 "shape": [-1 if d is None or not validate_shape else d for d in init.shape]},
                domain=TRAINER_DOMAIN, name=name or "Variable", in_context=False,
            )
            node.attrs["shared_name"] = node.name
            self.node = node
            self.tensor = node.outputs[0]
            self.trainable = trainable
            with graph.colocate_with(node), graph.name_scope(node.name + "/"):
                self.initializer = graph.create_op("Assign", [self.tensor, init], {}, domain=TRAINER_DOMAIN,
                                                   name="Assign")
        self.initial_value = init
        node.variable = self
        for key in collections or [GraphKeys.GLOBAL_VARIABLES] + ([GraphKeys.TRAINABLE_VARIABLES] if trainable else []):
            graph.add_to_collection(key, self)

    @property
    def name(self) -> str:
        """The variable's tensor name, ``"<op name>:0"``, as TensorFlow 1.x spells it."""
        return self.tensor.name

    @property
    def graph(self):
        return self.node.graph

    @property
    def shape(self):
        return self.tensor.shape

    @property
    def dtype(self):
        return self.tensor.dtype

    def get_shape(self):
        return self.tensor.get_shape()

    @property
    def op(self):
        return self.node

    def as_tensor(self) -> Tensor:
        """The tensor an op reads this variable through: ``convert_to_tensor`` and the session
        convert anything with an ``as_tensor`` method this way."""
        return self.tensor

    def value(self) -> Tensor:
        return self.tensor

    def read_value(self) -> Tensor:
        """A snapshot copy (Identity), for reads that must not see later in-place updates."""
        return ops.identity(self.tensor)

    def _update(self, op_type: str, value, name):
        g = self.graph
        value = ops.convert_to_tensor(value, dtype=self.dtype, graph=g)
        with g.colocate_with(self.node), g.name_scope(self.node.name + "/"):
            return g.create_op(op_type, [self.tensor, value], {}, domain=TRAINER_DOMAIN,
                               name=name or op_type).outputs[0]

    def assign(self, value, name=None) -> Tensor:
        return self._update("Assign", value, name)

    def assign_add(self, value, name=None) -> Tensor:
        return self._update("AssignAdd", value, name)

    def assign_sub(self, value, name=None) -> Tensor:
        return self._update("AssignSub", value, name)

    def _scatter(self, op_name: str, sparse_delta, use_locking: bool, name):
        """``tf.scatter_<op>`` of an IndexedSlices' rows into this variable (TF 1.x's RefVariable methods)."""
        from trainer.gradients.registry import IndexedSlices  # trainer.gradients imports this module

        if not isinstance(sparse_delta, IndexedSlices):
            raise TypeError(f"sparse_delta is not IndexedSlices: {sparse_delta!r}")
        return getattr(state_ops, op_name)(self, sparse_delta.indices, sparse_delta.values, use_locking=use_locking,
                                           name=name)

    def scatter_update(self, sparse_delta, use_locking: bool = False, name=None) -> Tensor:
        return self._scatter("scatter_update", sparse_delta, use_locking, name)

    def scatter_add(self, sparse_delta, use_locking: bool = False, name=None) -> Tensor:
        return self._scatter("scatter_add", sparse_delta, use_locking, name)

    def scatter_sub(self, sparse_delta, use_locking: bool = False, name=None) -> Tensor:
        return self._scatter("scatter_sub", sparse_delta, use_locking, name)

    def scatter_mul(self, sparse_delta, use_locking: bool = False, name=None) -> Tensor:
        return self._scatter("scatter_mul", sparse_delta, use_locking, name)

    def scatter_div(self, sparse_delta, use_locking: bool = False, name=None) -> Tensor:
        return self._scatter("scatter_div", sparse_delta, use_locking, name)

    def scatter_max(self, sparse_delta, use_locking: bool = False, name=None) -> Tensor:
        return self._scatter("scatter_max", sparse_delta, use_locking, name)

    def scatter_min(self, sparse_delta, use_locking: bool = False, name=None) -> Tensor:
        return self._scatter("scatter_min", sparse_delta, use_locking, name)

    def scatter_nd_update(self, indices, updates, name=None) -> Tensor:
        return state_ops.scatter_nd_update(self, indices, updates, name=name)

    def scatter_nd_add(self, indices, updates, name=None) -> Tensor:
        return state_ops.scatter_nd_add(self, indices, updates, name=name)

    def scatter_nd_sub(self, indices, updates, name=None) -> Tensor:
        return state_ops.scatter_nd_sub(self, indices, updates, name=name)

    def count_up_to(self, limit: int, name=None) -> Tensor:
        """The value before adding 1; running it once the value reached ``limit`` raises OutOfRangeError."""
        g = self.graph
        with g.colocate_with(self.node), g.name_scope(self.node.name + "/"):
            return g.create_op("CountUpTo", [self.tensor], {"limit": int(limit)}, domain=TRAINER_DOMAIN,
                               name=name or "CountUpTo").outputs[0]

    def initialized_value(self) -> Tensor:
        """The initial value (a random initial value is drawn anew each time it is computed)."""
        return ops.identity(self.initial_value)

    def load(self, value, session=None) -> None:
        """Set the variable to ``value`` in ``session`` (default: the InteractiveSession)."""
        from trainer.interactive import eval_tensor

        eval_tensor(self.initializer, {self.initial_value: value}, session)

    def eval(self, session=None):
        from trainer.interactive import eval_tensor

        return eval_tensor(self.tensor, None, session)

    def __repr__(self) -> str:
        return f"<tf.Variable {self.name!r} shape={self.get_shape()} dtype={self.dtype.name}_ref>"

    __hash__ = object.__hash__


def count_up_to(ref: Variable, limit: int, name=None) -> Tensor:
    """``tf.count_up_to``: ``ref.count_up_to(limit)``."""
    return ref.count_up_to(limit, name=name)


def _default_dtype(value):
    arr = np.asarray(value)
    # np.float64 subclasses float, but it names its dtype: only plain Python floats default to float32.
    if arr.dtype == np.float64 and not isinstance(value, (np.ndarray, np.generic)):
        arr = arr.astype(np.float32)
    return arr


def _delegate(name):
    def method(self, *args):
        return getattr(self.tensor, name)(*args)

    method.__name__ = name
    return method


# A variable reads as its tensor in every operator the tensor has (the reflected ones included:
# NumPy defers ``array * variable`` to them, as it does for tensors).
Variable.__array_ufunc__ = None
for _m in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
           "__matmul__", "__rmatmul__", "__pow__", "__rpow__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__",
           "__lt__", "__gt__", "__le__", "__ge__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
           "__neg__", "__invert__", "__abs__", "__getitem__"):
    setattr(Variable, _m, _delegate(_m))


def _collected(key: str, scope, graph) -> list[Variable]:
    """Collection ``key``, filtered by ``scope`` as TF1's ``tf.global_variables(scope)`` filters it;
    the trainer's own callers pass the graph in scope's place."""
    if isinstance(scope, Graph):
        scope, graph = None, scope
    return (graph or get_default_graph()).get_collection(key, scope)


def global_variables(scope: str | None = None, graph=None) -> list[Variable]:
    """The graph's global variables; with ``scope``, those whose name it matches from the start."""
    return _collected(GraphKeys.GLOBAL_VARIABLES, scope, graph)


def trainable_variables(scope: str | None = None, graph=None) -> list[Variable]:
    """The graph's trainable variables; with ``scope`` (``tf.trainable_variables("generator")``),
    those whose name it matches from the start."""
    return _collected(GraphKeys.TRAINABLE_VARIABLES, scope, graph)


def variables_initializer(var_list, name: str = "init"):
    return ops.group(*[v.initializer for v in var_list], name=name)


def local_variables(scope: str | None = None, graph=None) -> list[Variable]:
    return _collected(GraphKeys.LOCAL_VARIABLES, scope, graph)


def local_variables_initializer():
    """One op that runs every LOCAL_VARIABLES initializer (metric counters, epoch counters)."""
    return variables_initializer(local_variables(), name="init_local")


def global_variables_initializer():
    """One op that runs every variable's initializer."""
    return variables_initializer(global_variables(), name="init")
