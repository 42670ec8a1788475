"""Stateful kernels of the accumulator family (schemas/ops/accumulators.py); the state is a
``GradientAccumulator`` resource in ``rctx.state.resources`` (trainer/accumulator_buffer.py)."""

from __future__ import annotations

import numpy as np

from trainer.accumulator_buffer import GradientAccumulator, wait_all
from edge_runtime.kernels import kernel
from trainer.kernels.registry import stateful_kernel


def _handle(rctx, name, dtype, shape, sparse, max_accumulated, reduction_type):
    res = rctx.state.resources
    with rctx.state.lock:
        if name not in res:
            res[name] = GradientAccumulator(name, dtype, shape, sparse, max_accumulated, reduction_type)
    out = np.empty((), dtype=object)
    out[()] = name
    return out


def _acc(rctx, handle) -> GradientAccumulator:
    return rctx.state.resources[str(handle[()])]


def _timeout(timeout_ms: int):
    return None if timeout_ms < 0 else timeout_ms / 1000


@stateful_kernel("ConditionalAccumulator")
def conditional_accumulator(rctx, *, xp, dtype, shape, shared_name, max_accumulated, reduction_type):
    return _handle(rctx, shared_name, dtype, shape, False, max_accumulated, reduction_type)


@stateful_kernel("SparseConditionalAccumulator")
def sparse_conditional_accumulator(rctx, *, xp, dtype, shape, shared_name, max_accumulated, reduction_type):
    return _handle(rctx, shared_name, dtype, shape, True, max_accumulated, reduction_type)


@stateful_kernel("AccumulatorApplyGradient")
def accumulator_apply_gradient(rctx, handle, local_step, gradient, *, xp):
    _acc(rctx, handle).apply(int(local_step), np.asarray(gradient))


@stateful_kernel("SparseAccumulatorApplyGradient")
def sparse_accumulator_apply_gradient(rctx, handle, local_step, indices, values, *, xp):
    _acc(rctx, handle).apply(int(local_step), np.asarray(values), indices=np.asarray(indices))


@stateful_kernel("AccumulatorTakeGradient")
def accumulator_take_gradient(rctx, handle, num_required, *, xp, dtype, shape, shared_name, timeout_ms):
    return _acc(rctx, handle).take(int(num_required), _timeout(timeout_ms))


@stateful_kernel("SparseAccumulatorTakeGradient")
def sparse_accumulator_take_gradient(rctx, handle, num_required, *, xp, dtype, shape, shared_name, timeout_ms):
    indices, values = _acc(rctx, handle).take(int(num_required), _timeout(timeout_ms))
    return indices, values, np.asarray(shape, np.int64)


@stateful_kernel("AccumulatorSetGlobalStep")
def accumulator_set_global_step(rctx, handle, new_global_step, *, xp):
    _acc(rctx, handle).set_step(int(new_global_step))


@stateful_kernel("AccumulatorWaitAll")
def accumulator_wait_all(rctx, *handles, xp, num_required, timeout_ms):
    wait_all([_acc(rctx, h) for h in handles], num_required, _timeout(timeout_ms))


@stateful_kernel("AccumulatorNumAccumulated")
def accumulator_num_accumulated(rctx, handle, *, xp):
    return np.asarray(_acc(rctx, handle).num_accumulated(), np.int64)


@kernel("Snapshot", domain="flowstack")
def snapshot(x, *, xp):
    return xp.array(x, copy=True)
