"""Session state and the kernels that need it (variables, optimizer updates, stacks).

A stateful kernel has the forward-kernel signature with a leading ``RunContext``:
``fn(rctx, *inputs, xp, **attrs)``. It is registered by op name with ``@stateful_kernel``; the
executor passes the context of the current ``Session.run`` call. Queues, checkpoints and
Send/Recv register their kernels the same way from their own modules.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from schemas.registry import UnsupportedOpError, get_schema

__all__ = [
    "FailedPreconditionError",
    "OutOfRangeError",
    "RunContext",
    "SessionState",
    "get_stateful_kernel",
    "stateful_kernel",
]

_STATEFUL: dict[tuple[str, str], Callable] = {}
D = "flowstack"


class FailedPreconditionError(RuntimeError):
    """The graph is fine but the session state is not (uninitialized variable, closed queue)."""


def stateful_kernel(name: str, domain: str = D):
    def register(fn):
        get_schema(name, domain)
        if (domain, name) in _STATEFUL:
            raise ValueError(f"stateful kernel for {name} registered twice")
        _STATEFUL[(domain, name)] = fn
        return fn

    return register


def get_stateful_kernel(name: str, domain: str = D):
    import trainer.queues  # noqa: F401  (each module registers its own stateful kernels)
    import trainer.saver  # noqa: F401
    import trainer.partition  # noqa: F401
    import trainer.kernels.sparse_apply  # noqa: F401

    try:
        return _STATEFUL[(domain, name)]
    except KeyError:
        raise UnsupportedOpError(f"stateful op {domain}::{name} has no trainer kernel") from None


def has_stateful_kernel(name: str, domain: str = D) -> bool:
    try:
        get_stateful_kernel(name, domain)
        return True
    except UnsupportedOpError:
        return False


class OutOfRangeError(RuntimeError):
    """A closed, drained queue: the input pipeline is done (the normal way an epoch loop ends)."""


class SessionState:
    """What outlives a step: variable buffers, queues, random state. One per Session."""

    def __init__(self):
        self.variables: dict[str, np.ndarray] = {}
        self.resources: dict[str, object] = {}
        self.lock = threading.RLock()
        self.rng = np.random.default_rng()


class RunContext:
    """What one ``Session.run`` call shares among its kernels: session state and step-local state."""

    __slots__ = ("state", "session", "step", "rendezvous")

    def __init__(self, session, rendezvous=None):
        self.session = session
        self.state: SessionState = session._state
        self.step: dict = {}
        self.rendezvous = rendezvous


# -- variables ------------------------------------------------------------------------------
@stateful_kernel("Variable")
def variable(rctx, *, xp, dtype, shape, shared_name):
    try:
        return rctx.state.variables[shared_name]
    except KeyError:
        raise FailedPreconditionError(
            f"variable {shared_name!r} is uninitialized; run global_variables_initializer() "
            "(or restore a checkpoint) first"
        ) from None


@stateful_kernel("Assign")
def assign(rctx, ref, value, *, xp, validate_shape, _var):
    variables = rctx.state.variables
    cur = variables.get(_var)
    value = xp.asarray(value)
    if cur is not None and cur.shape == value.shape and cur.dtype == value.dtype and cur is not value:
        xp.copyto(cur, value)
        return cur
    new = value.copy()
    variables[_var] = new
    return new


@stateful_kernel("AssignAdd")
def assign_add(rctx, ref, value, *, xp):
    xp.add(ref, value, out=ref)
    return ref


@stateful_kernel("AssignSub")
def assign_sub(rctx, ref, value, *, xp):
    xp.subtract(ref, value, out=ref)
    return ref


# -- fused optimizer updates, in place on the variable and slot buffers ------------------------
@stateful_kernel("ApplyGradientDescent")
def apply_gradient_descent(rctx, var, alpha, delta, *, xp):
    tmp = _scratch_like(var, xp)
    xp.multiply(delta, alpha, out=tmp)
    var -= tmp
    return var


@stateful_kernel("ApplyMomentum")
def apply_momentum(rctx, var, accum, lr, grad, momentum, *, xp, use_nesterov):
    accum *= momentum
    accum += grad
    tmp = _scratch_like(var, xp)
    if use_nesterov:
        xp.multiply(accum, momentum, out=tmp)
        tmp += grad
        tmp *= lr
    else:
        xp.multiply(accum, lr, out=tmp)
    var -= tmp
    return var


_scratch = threading.local()


def _scratch_like(a, xp):
    """A per-thread work buffer shaped like ``a``: fused updates allocate nothing per step."""
    cache = getattr(_scratch, "bufs", None)
    if cache is None:
        cache = _scratch.bufs = {}
    key = (a.shape, a.dtype.str, xp.__name__)
    buf = cache.get(key)
    if buf is None:
        buf = cache[key] = xp.empty_like(a)
    return buf


@stateful_kernel("ApplyAdam")
def apply_adam(rctx, var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad, *, xp):
    alpha = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)
    tmp = _scratch_like(var, xp)
    m *= beta1
    xp.multiply(grad, 1 - beta1, out=tmp)
    m += tmp
    v *= beta2
    xp.multiply(grad, grad, out=tmp)
    tmp *= 1 - beta2
    v += tmp
    xp.sqrt(v, out=tmp)
    tmp += epsilon
    xp.divide(m, tmp, out=tmp)
    tmp *= alpha
    var -= tmp
    return var


@stateful_kernel("ApplyAdagrad")
def apply_adagrad(rctx, var, accum, lr, grad, *, xp):
    accum += grad * grad
    var -= lr * grad / xp.sqrt(accum)
    return var


@stateful_kernel("ApplyRMSProp")
def apply_rmsprop(rctx, var, ms, mom, lr, rho, momentum, epsilon, grad, *, xp):
    ms *= rho
    ms += (1 - rho) * (grad * grad)
    mom *= momentum
    mom += lr * grad / xp.sqrt(ms + epsilon)
    var -= mom
    return var


@stateful_kernel("AccumulateAdd")
def accumulate_add(rctx, accumulator, value, *, xp):
    accumulator += value
    return accumulator


@stateful_kernel("ScatterAdd")
def scatter_add(rctx, ref, indices, updates, *, xp):
    xp.add.at(ref, indices.reshape(-1), updates.reshape((-1,) + ref.shape[1:]))
    return ref


@stateful_kernel("ScatterSub")
def scatter_sub(rctx, ref, indices, updates, *, xp):
    xp.subtract.at(ref, indices.reshape(-1), updates.reshape((-1,) + ref.shape[1:]))
    return ref


@stateful_kernel("Placeholder")
def placeholder(rctx, *, xp, dtype, shape):
    raise FailedPreconditionError("placeholder was not fed")  # the planner reports it first


# -- step-local stacks: a forward loop pushes per-iteration values, its gradient loop pops them --
@stateful_kernel("StackPush")
def stack_push(rctx, value, *, xp, stack_name):
    rctx.step.setdefault(stack_name, []).append(value)
    return value


@stateful_kernel("StackPop")
def stack_pop(rctx, index, *, xp, stack_name):
    # Read by position, not popped: backward iterations may run out of order.
    stack = rctx.step.get(stack_name)
    i = int(index)
    if not stack or i >= len(stack):
        raise FailedPreconditionError(f"stack {stack_name!r} has no entry {i}: its forward loop did not run in this step")
    return stack[i]


# A fused loop body's StackPushes (and StackPops at one index) as one plan step (trainer/executor.py).
def stack_push_many(rctx, *values, stack_names):
    step = rctx.step
    for name, value in zip(stack_names, values):
        stack = step.get(name)
        if stack is None:
            step[name] = [value]
        else:
            stack.append(value)


def stack_pop_many(rctx, index, *, stack_names):
    step, i = rctx.step, int(index)
    try:
        return tuple(step[name][i] for name in stack_names)
    except (KeyError, IndexError):
        return tuple(stack_pop(rctx, index, xp=None, stack_name=name) for name in stack_names)  # names the stack


@stateful_kernel("DropoutMask", domain=D)
def dropout_mask(rctx, x, rate, *, xp, seed):
    keep = 1.0 - float(rate)
    mask = rctx.state.rng.random(x.shape, dtype=np.float32) < keep
    return mask.astype(x.dtype) * x.dtype.type(1.0 / keep) if keep > 0 else xp.zeros_like(x)
