"""Stateful kernels of the training-only ops (family ``training``: ``schemas/ops/training.py``).

Each is registered with ``@stateful_kernel`` and receives the run's ``RunContext`` first:
``fn(rctx, *inputs, xp, **attrs)``. Variables and their updates work in place on the buffers in
``rctx.state.variables`` (an op's ``ref`` input is the variable's buffer); queues are
``QueueBuffer`` resources in ``rctx.state.resources``; loop stacks live in the step-local
``rctx.step``; Send and Recv meet in the step's ``rctx.rendezvous``.
"""

from __future__ import annotations

import contextlib
import json
import threading

import numpy as np

from trainer.checkpoint_format import (FORMAT_VERSION, CheckpointError, array_crc32, atomic_write, check_value,
                                       json_member, load_checkpoint, write_npz)
from trainer.dataflow_executor import DEAD
from trainer.devices import to_host
from trainer.errors import FailedPreconditionError, InvalidArgumentError, OutOfRangeError
from trainer.kernels.random import op_generator
from trainer.kernels.registry import stateful_kernel
from trainer.queue_buffer import QueueBuffer
from trainer.rendezvous import rendezvous_key
from trainer.slot_names import stored_name

__all__ = ["stack_pop_many", "stack_push_many"]

D = "flowstack"


# -- variables ------------------------------------------------------------------------------
@stateful_kernel("Variable")
def variable(rctx, *, xp, dtype, shape, shared_name):
    try:
        return rctx.state.variables[shared_name]
    except KeyError:
        raise FailedPreconditionError(
            f"variable {shared_name!r} is uninitialized; run global_variables_initializer() "
            "(local_variables_initializer() for local variables such as epoch counters) or restore a checkpoint first"
        ) from None


@stateful_kernel("IsVariableInitialized")
def is_variable_initialized(rctx, *, xp, shared_name):
    return np.asarray(shared_name in rctx.state.variables)


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


@stateful_kernel("CountUpTo")
def count_up_to(rctx, ref, *, xp, limit):
    with rctx.state.lock:  # several queue-runner threads may count one epoch variable
        value = ref.copy()
        if int(value) >= limit:
            raise OutOfRangeError(f"Reached limit of {limit}")
        ref += 1
    return value


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


# -- sparse updates of a variable (tf.scatter_*, tf.scatter_nd_*), in place ---------------------
def _check_rows(op_type: str, flat, rows: int) -> None:
    bad = np.flatnonzero((flat < 0) | (flat >= rows))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(f"{op_type}: indices[{i}] = {int(flat[i])} is not in [0, {rows})")


def _check_elements(op_type: str, index, shape: tuple) -> None:
    bounds = np.asarray(shape[:index.shape[1]], dtype=np.int64)
    bad = np.flatnonzero(((index < 0) | (index >= bounds)).any(axis=1))
    if bad.size:
        i = int(bad[0])
        raise InvalidArgumentError(
            f"{op_type}: indices[{i}] = [{', '.join(str(int(v)) for v in index[i])}] does not index into "
            f"[{','.join(str(d) for d in shape)}]")


def _apply_at(ufunc, ref, where, rows, xp) -> None:
    """``ref[where] (op)= rows``, each repeated index applied in turn (ufunc None: plain assignment)."""
    if ufunc is None:
        ref[where] = rows
    elif ufunc is np.divide and ref.dtype.kind in "iu":
        # TensorFlow divides integers as C++ does (truncating), one repeated index after another.
        for i, row in zip(zip(*where) if isinstance(where, tuple) else where, rows):
            quotient = ref[i] / row
            ref[i] = np.trunc(quotient).astype(ref.dtype)
    else:
        getattr(xp, ufunc.__name__).at(ref, where, rows)


def _row_scatter(op_type: str, ufunc):
    def scatter(rctx, ref, indices, updates, *, xp, use_locking):
        flat = np.asarray(indices).reshape(-1)
        _check_rows(op_type, flat, ref.shape[0])
        rows = xp.broadcast_to(xp.asarray(updates, dtype=ref.dtype), tuple(indices.shape) + ref.shape[1:])
        with _maybe_locked(rctx, use_locking):
            _apply_at(ufunc, ref, flat, rows.reshape((flat.size,) + ref.shape[1:]), xp)
        return ref

    scatter.__name__ = op_type
    return scatter


def _nd_scatter(op_type: str, ufunc):
    def scatter(rctx, ref, indices, updates, *, xp, use_locking):
        k = indices.shape[-1]
        index = np.asarray(indices).reshape(-1, k)
        _check_elements(op_type, index, ref.shape)
        rows = xp.asarray(updates, dtype=ref.dtype).reshape((index.shape[0],) + ref.shape[k:])
        with _maybe_locked(rctx, use_locking):
            _apply_at(ufunc, ref, tuple(index.T), rows, xp)
        return ref

    scatter.__name__ = op_type
    return scatter


def _maybe_locked(rctx, use_locking):
    return rctx.state.lock if use_locking else contextlib.nullcontext()


# op -> the update applied at each index (None: assignment).
_ROW_SCATTERS = {"ScatterUpdate": None, "ScatterAdd": np.add, "ScatterSub": np.subtract, "ScatterMul": np.multiply,
                 "ScatterDiv": np.divide, "ScatterMax": np.maximum, "ScatterMin": np.minimum}
_ND_SCATTERS = {"ScatterNdUpdate": None, "ScatterNdAdd": np.add, "ScatterNdSub": np.subtract}
for _op_type, _ufunc in _ROW_SCATTERS.items():
    stateful_kernel(_op_type)(_row_scatter(_op_type, _ufunc))
for _op_type, _ufunc in _ND_SCATTERS.items():
    stateful_kernel(_op_type)(_nd_scatter(_op_type, _ufunc))


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


# A fused loop body's StackPushes (and StackPops at one index) as one plan step (trainer/passes/lower.py).
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
def dropout_mask(rctx, x, rate, *, xp, seed, seed2, stream):
    keep = 1.0 - float(rate)
    rng = op_generator(rctx, seed, seed2, stream) if (seed or seed2) else rctx.state.rng
    mask = rng.random(x.shape, dtype=np.float32) < keep
    return mask.astype(x.dtype) * x.dtype.type(1.0 / keep) if keep > 0 else xp.zeros_like(x)


# -- queues --------------------------------------------------------------------------------------
def _queue(rctx, handle) -> QueueBuffer:
    # a handle picked at run time (QueueBase.from_list gathers one) may come as a bare string
    return rctx.state.resources[str(handle[()] if isinstance(handle, np.ndarray) else handle)]


def _create(rctx, name, factory):
    res = rctx.state.resources
    with rctx.state.lock:
        if name not in res:
            res[name] = factory()
    out = np.empty((), dtype=object)
    out[()] = name
    return out


@stateful_kernel("FIFOQueue")
def fifo_queue(rctx, *, xp, component_types, shapes, capacity, shared_name):
    return _create(rctx, shared_name, lambda: QueueBuffer(shared_name, capacity, component_types, shapes))


@stateful_kernel("RandomShuffleQueue")
def random_shuffle_queue(rctx, *, xp, component_types, shapes, capacity, shared_name, min_after_dequeue, seed):
    return _create(rctx, shared_name, lambda: QueueBuffer(shared_name, capacity, component_types, shapes,
                                                             True, min_after_dequeue, seed))


@stateful_kernel("PaddingFIFOQueue")
def padding_fifo_queue(rctx, *, xp, component_types, shapes, capacity, shared_name):
    return _create(rctx, shared_name, lambda: QueueBuffer(shared_name, capacity, component_types, shapes,
                                                             padding=True))


@stateful_kernel("PriorityQueue")
def priority_queue(rctx, *, xp, component_types, shapes, capacity, shared_name):
    return _create(rctx, shared_name, lambda: QueueBuffer(shared_name, capacity, component_types, shapes,
                                                             priority=True))


@stateful_kernel("QueueEnqueue")
def queue_enqueue(rctx, handle, *components, xp):
    q = _queue(rctx, handle)
    item = tuple(np.array(c, copy=True) for c in components)
    q.check(item, batched=False)
    q.put(item)


@stateful_kernel("QueueEnqueueMany")
def queue_enqueue_many(rctx, handle, *components, xp):
    q = _queue(rctx, handle)
    q.check([np.asarray(c) for c in components], batched=True)
    for row in zip(*components):
        q.put(tuple(np.array(c, copy=True) for c in row))


@stateful_kernel("QueueDequeue")
def queue_dequeue(rctx, handle, *, xp, component_types, timeout_ms):
    item = _queue(rctx, handle).take(1, None if timeout_ms < 0 else timeout_ms / 1000)[0]
    return tuple(item) if len(item) > 1 else item[0]


@stateful_kernel("QueueDequeueMany")
def queue_dequeue_many(rctx, handle, n, *, xp, component_types):
    q = _queue(rctx, handle)
    out = q.batch(q.take(int(n)))  # dequeue_many(0): an empty batch of the declared shapes
    return out if len(out) > 1 else out[0]


@stateful_kernel("QueueClose")
def queue_close(rctx, handle, *, xp, cancel_pending_enqueues):
    _queue(rctx, handle).close(bool(cancel_pending_enqueues))


@stateful_kernel("QueueSize")
def queue_size(rctx, handle, *, xp):
    return np.asarray(len(_queue(rctx, handle)), dtype=np.int64)


# -- Save / Restore kernels ---------------------------------------------------------------------
@stateful_kernel("Save")
def save(rctx, filename, *tensors, xp, tensor_names, graph_json, slices):
    arrays = {}
    meta = {"format": "flowstack-checkpoint", "version": FORMAT_VERSION, "variables": {}, "crc32": {}}
    if slices:  # how the graph shards partitioned variables (trainer/saved_slices.py)
        meta["slices"] = json.loads(slices)
    for name, t in zip(tensor_names, tensors):
        host = t.get() if hasattr(t, "get") else np.asarray(t)
        arrays[name] = host
        meta["variables"][name] = {"dtype": host.dtype.name, "shape": list(host.shape)}
        meta["crc32"][name] = array_crc32(host)
    arrays["__meta__"] = json_member(meta)
    atomic_write(str(filename[()] if isinstance(filename, np.ndarray) else filename),
                  lambda f: write_npz(f, arrays))
    return None


@stateful_kernel("Restore")
def restore(rctx, filename, *, xp, tensor_name, dtype, shape):
    path = str(filename[()] if isinstance(filename, np.ndarray) else filename)
    cache = rctx.step.setdefault("restore_cache", {})
    if path not in cache:
        cache[path] = load_checkpoint(path)[1]
    values = cache[path]
    key = stored_name(tensor_name, values)  # a slot may be under its name from before TF's slot names
    if key not in values:
        raise CheckpointError(f"variable {tensor_name!r} is not in checkpoint {path!r}")
    value = values[key]
    check_value(tensor_name, value, dtype, shape, path)
    return xp.asarray(value)


# -- Send / Recv: a value crossing partitions (trainer/passes/partition.py adds the pairs) ---------
# (A value of an untaken cond branch crosses as the dataflow executor's DEAD marker: the receiver
# must not wait for a value that never comes.)
@stateful_kernel("Send")
def send(rctx, tensor, *, xp, tensor_name, send_device, recv_device):
    rctx.rendezvous.send(rendezvous_key(tensor_name, send_device, recv_device), tensor)


@stateful_kernel("Recv")
def recv(rctx, *, xp, tensor_name, send_device, recv_device, may_be_dead=0):
    value = rctx.rendezvous.recv(rendezvous_key(tensor_name, send_device, recv_device))
    if value is DEAD:
        return DEAD
    return rctx.session.device(recv_device).from_host(to_host(value))
