"""Dataflow control ops (domain ``flowstack``): the primitives ``cond`` and ``while_loop`` are built from.

Switch routes its data to one of two outputs by a boolean and marks the other *dead*; Merge
forwards whichever input is alive. Enter, Exit and NextIteration move values into a loop frame,
out of it, and on to the next iteration; LoopCond marks a loop's predicate. The trainer's executor
tags every value with its frame and iteration, so iterations can overlap and dead branches are
skipped (see trainer/dataflow_executor.py).
"""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import same_as_input
from schemas.registry import Attr, TensorType, op

D = "flowstack"


@op("Switch", domain=D, inputs=["data", "pred"], outputs=["output_false", "output_true"], differentiable=True)
def _switch(ctx):
    pred = ctx.input(1)
    if pred.shape not in (None, ()) and any(d not in (1, None) for d in pred.shape):
        raise ctx.fail(f"pred must be a scalar, got shape {pred.shape}")
    return [ctx.input(0), ctx.input(0)]


@op("Merge", domain=D, inputs=["inputs+"], outputs=["output", "value_index"], differentiable=True)
def _merge(ctx):
    types = [ctx.input(i) for i in range(ctx.num_inputs)]
    first = types[0]
    shape = first.shape
    for t in types[1:]:
        if shape is None or t.shape is None or len(t.shape) != len(shape):
            shape = None
            break
        shape = tuple(a if a == b else None for a, b in zip(shape, t.shape))
    return [TensorType(first.dtype, shape), TensorType(np.dtype(np.int32), ())]


op("Enter", domain=D, inputs=["data"], outputs=["output"], differentiable=True,
   attrs={"frame_name": Attr("string", ""), "is_constant": Attr("int", 0),
          "parallel_iterations": Attr("int", 10)})(same_as_input(0))
op("Exit", domain=D, inputs=["data"], outputs=["output"], differentiable=True)(same_as_input(0))
op("NextIteration", domain=D, inputs=["data"], outputs=["output"], differentiable=True)(same_as_input(0))
op("LoopCond", domain=D, inputs=["input"], outputs=["output"])(same_as_input(0))


op("NoOp", domain=D, inputs=[], outputs=["dummy*"], doc="Groups control dependencies; no outputs.")(
    lambda ctx: [])
