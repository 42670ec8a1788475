"""Kernels of the dataflow primitives. Routing (dead outputs, frames) is the executor's job;
these only compute the values, so a plan can treat them like any other step."""

from __future__ import annotations

from edge_runtime.kernels import kernel

D = "flowstack"


@kernel("Switch", domain=D)
def switch(data, pred, *, xp):
    return (None, data) if bool(pred) else (data, None)


@kernel("Merge", domain=D)
def merge(*inputs, xp):
    for i, v in enumerate(inputs):
        if v is not None:
            return v, xp.asarray(i, dtype=xp.int32)
    raise ValueError("Merge: no input is alive")


@kernel("Enter", domain=D)
def enter(data, *, xp, frame_name, is_constant, parallel_iterations):
    return data


@kernel("Exit", domain=D)
def exit_(data, *, xp):
    return data


@kernel("NextIteration", domain=D)
def next_iteration(data, *, xp):
    return data


@kernel("LoopCond", domain=D)
def loop_cond(x, *, xp):
    return x


@kernel("NoOp", domain=D)
def no_op(*inputs, xp):
    return None
