"""TensorFlow 1.x's Python gradient registry: ``RegisterGradient``, ``NotDifferentiable`` and the
names ``Graph.gradient_override_map`` maps op types to.

TF 1.15 keeps one table of gradient functions keyed by name; an op type's own gradient is the entry
under its type, and ``gradient_override_map({"Sign": "MyGrad"})`` makes the ops built inside take
the entry under "MyGrad" instead. flowstack's built-in rules live in ``trainer.gradients`` (keyed by
op type, with the signature ``rule(node, grads) -> grads``); this module holds the functions TF1
scripts register, with TF's signature ``fn(op, *grads) -> grad or [grad per input]``, and
``gradient_rule(node)`` finds the rule the backward walk uses for a node: the override's, else a
registered function for its type, else the built-in one.

Override keys are op types as flowstack builds them, which are TF's for most ops (``Identity``,
``Sign``, ``Round``, ``Floor``, ``Relu``, ``MatMul``, ``PyFunc``, ...); ``OP_TYPE_ALIASES`` maps
the TF names whose flowstack op is the same op under another name.
"""

from __future__ import annotations

import functools
import itertools
from typing import Callable

from trainer.gradients.registry import NO_GRADIENT, get_gradient, has_gradient

__all__ = ["NoGradient", "NotDifferentiable", "OP_TYPE_ALIASES", "RegisterGradient", "custom_gradient",
           "flowstack_op_type", "gradient_rule", "no_gradient"]

# TF 1.15 op type -> the flowstack op type of the same op.
OP_TYPE_ALIASES = {
    "AddV2": "Add",
    "RealDiv": "Div",
    "Maximum": "Max",
    "Minimum": "Min",
    "Sum": "ReduceSum",
    "Mean": "ReduceMean",
    "Prod": "ReduceProd",
    "PyFuncStateless": "PyFunc",
    "EagerPyFunc": "PyFunc",
}

_NOT_DIFFERENTIABLE = object()  # the entry NotDifferentiable registers
_REGISTERED: dict[str, object] = {}


def flowstack_op_type(op_type: str) -> str:
    """The flowstack op type a TF 1.15 op type names (itself for most)."""
    return OP_TYPE_ALIASES.get(op_type, op_type)


def _check_new(name: str, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what}: the op type must be a non-empty string, got {name!r}")
    if name in _REGISTERED or has_gradient(flowstack_op_type(name)):
        raise KeyError(f"{what}: registering two gradient with name '{name}'; a gradient is already registered "
                       "under it (pick another name and map the op to it with Graph.gradient_override_map)")


class RegisterGradient:
    """``@tf.RegisterGradient("Name")`` registers ``fn(op, *grads)`` under "Name": it returns one
    gradient per input of ``op`` (a single tensor for a one-input op), None where none flows."""

    def __init__(self, op_type: str):
        _check_new(op_type, "RegisterGradient")
        self._op_type = op_type

    def __call__(self, fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"RegisterGradient({self._op_type!r}): expected a function, got {fn!r}")
        _check_new(self._op_type, "RegisterGradient")
        _REGISTERED[self._op_type] = fn
        return fn


def NotDifferentiable(op_type: str) -> None:  # noqa: N802 - TensorFlow's name
    """Declare that ops of ``op_type`` pass no gradient back (each input's gradient is None)."""
    _check_new(op_type, "NotDifferentiable")
    _REGISTERED[op_type] = _NOT_DIFFERENTIABLE


NoGradient = no_gradient = NotDifferentiable


def _python_rule(fn: Callable):
    """A built-in style rule calling a TF1 gradient function ``fn(op, *grads)``."""

    def rule(node, grads) -> list:
        from trainer.ops import zeros_like

        out_grads = [zeros_like(t) if g is None else g for g, t in zip(grads, node.outputs)]
        result = fn(node, *out_grads)
        result = list(result) if isinstance(result, (list, tuple)) else [result]
        inputs = [t for t in node.inputs if t is not None]
        if len(result) != len(inputs):
            raise ValueError(f"gradient function {getattr(fn, '__name__', fn)!r} for op {node.name!r} "
                             f"({node.op_type}) returned {len(result)} gradients for {len(inputs)} inputs")
        it = iter(result)
        return [None if t is None else next(it) for t in node.inputs]

    return rule


def _entry_rule(name: str):
    entry = _REGISTERED.get(name)
    if entry is _NOT_DIFFERENTIABLE:
        return NO_GRADIENT
    if entry is not None:
        return _python_rule(entry)
    return None


def gradient_rule(node):
    """The rule differentiating ``node``: its override's, a registered function for its type, or
    the built-in rule (a LookupError naming the op where there is none)."""
    override = getattr(node, "gradient_override", None)
    if override is not None:
        rule = _entry_rule(override)
        if rule is not None:
            return rule
        builtin = flowstack_op_type(override)
        if not has_gradient(builtin):
            raise LookupError(f"node {node.name!r} ({node.op_type}): gradient_override_map maps it to "
                              f"{override!r}, but no gradient is registered under that name")
        return get_gradient(builtin)
    return _entry_rule(node.op_type) or get_gradient(node.op_type, node.domain)


_CUSTOM_GRADIENTS = itertools.count()


def custom_gradient(f: Callable) -> Callable:
    """``@tf.custom_gradient``: ``f(*inputs)`` returns ``(outputs, grad_fn)``, and the gradients of
    the decorated call's outputs are ``grad_fn(*dys)`` (one per input) instead of those of the ops
    ``f`` built. As TensorFlow builds it in a graph: the outputs and the inputs go through one
    IdentityN node whose gradient, overridden, gives the inputs ``grad_fn``'s gradients and stops at
    the outputs, so nothing flows back through ``f``'s own ops."""
    from trainer.array_ops import identity_n_node
    from trainer.nest import flatten, pack_as
    from trainer.ops import convert_to_tensor

    @functools.wraps(f)
    def decorated(*args, **kwargs):
        if kwargs:
            raise ValueError(f"custom_gradient {f.__name__}: the decorated function takes tensors as positional "
                             f"arguments only (graph mode), got keywords {sorted(kwargs)}")
        inputs = [convert_to_tensor(a) for a in args]
        result, grad_fn = f(*inputs)
        outputs = [convert_to_tensor(r) for r in flatten(result)]
        name = f"CustomGradient-{next(_CUSTOM_GRADIENTS)}"

        def gradient(op, *dys):
            dxs = grad_fn(*dys[:len(outputs)])
            dxs = list(dxs) if isinstance(dxs, (list, tuple)) else [dxs]
            if len(dxs) != len(inputs):
                raise ValueError(f"custom_gradient {f.__name__}: grad_fn returned {len(dxs)} gradients for "
                                 f"{len(inputs)} inputs")
            return [None] * len(outputs) + [None if dx is None else convert_to_tensor(dx) for dx in dxs]

        RegisterGradient(name)(gradient)
        graph = outputs[0].graph
        with graph.gradient_override_map({"IdentityN": name}):
            passed = identity_n_node(outputs + inputs)
        return pack_as(result, passed[:len(outputs)])

    return decorated
