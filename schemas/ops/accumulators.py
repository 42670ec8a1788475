"""Gradient accumulators for synchronous training (domain ``flowstack``, TensorFlow's names).

A ConditionalAccumulator is session state tagged with a global step: AccumulatorApplyGradient
adds a gradient computed at ``local_step`` unless that step is older than the accumulator's (a
stale gradient is dropped); AccumulatorTakeGradient waits until ``num_required`` gradients are
in (at most ``timeout_ms``), returns their mean (or sum: ``reduction_type``), resets, and moves the accumulator's step on by
one; AccumulatorWaitAll waits for several at once without taking; AccumulatorSetGlobalStep moves it to the training's global step. The Sparse variants hold
IndexedSlices (indices, values, dense shape): their mean divides each row by the number of
gradients that touched it, as TensorFlow's SparseConditionalAccumulator does.
"""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import same_as_input
from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"
_OBJECT = np.dtype(object)
_INT64 = np.dtype(np.int64)
_ACC_ATTRS = {"dtype": Attr("string", REQUIRED), "shape": Attr("ints", REQUIRED), "shared_name": Attr("string", "")}
# max_accumulated > 0 keeps only the first that many gradients of a step (later ones are dropped,
# as backup workers' are); -1 keeps all (TensorFlow's accumulator).
_CREATE_ATTRS = {**_ACC_ATTRS, "max_accumulated": Attr("int", -1), "reduction_type": Attr("string", "MEAN")}


def _shape(attrs):
    return tuple(None if d < 0 else int(d) for d in attrs["shape"])


op("ConditionalAccumulator", domain=D, inputs=[], outputs=["handle"], stateful=True, attrs=_CREATE_ATTRS,
   doc="The accumulator's handle; created on first use, shared by every step naming it.")(
    lambda ctx: [TensorType(_OBJECT, ())])
op("SparseConditionalAccumulator", domain=D, inputs=[], outputs=["handle"], stateful=True, attrs=_CREATE_ATTRS,
   doc="The accumulator's handle; created on first use, shared by every step naming it.")(
    lambda ctx: [TensorType(_OBJECT, ())])

op("AccumulatorApplyGradient", domain=D, inputs=["handle", "local_step", "gradient"], outputs=["done*"],
   stateful=True, doc="Add gradient unless local_step is older than the accumulator's step.")(lambda ctx: [])
op("SparseAccumulatorApplyGradient", domain=D, inputs=["handle", "local_step", "indices", "values"],
   outputs=["done*"], stateful=True, doc="As AccumulatorApplyGradient, for rows ``values`` at ``indices``.")(
    lambda ctx: [])


@op("AccumulatorTakeGradient", domain=D, inputs=["handle", "num_required"], outputs=["average"], stateful=True,
    attrs={**_ACC_ATTRS, "timeout_ms": Attr("int", -1)})
def _take(ctx):
    """The mean of num_required gradients, once they are in; DeadlineExceeded past timeout_ms."""
    return [TensorType(np.dtype(ctx.attrs["dtype"]), _shape(ctx.attrs))]


@op("SparseAccumulatorTakeGradient", domain=D, inputs=["handle", "num_required"],
    outputs=["indices", "values", "shape"], stateful=True, attrs={**_ACC_ATTRS, "timeout_ms": Attr("int", -1)})
def _sparse_take(ctx):
    """The mean of num_required sparse gradients as unique sorted indices and their rows."""
    shape = _shape(ctx.attrs)
    return [TensorType(_INT64, (None,)), TensorType(np.dtype(ctx.attrs["dtype"]), (None,) + shape[1:]),
            TensorType(_INT64, (len(shape),))]


op("AccumulatorSetGlobalStep", domain=D, inputs=["handle", "new_global_step"], outputs=["done*"], stateful=True,
   doc="Move the accumulator's step to new_global_step (never back); older gradients become stale.")(
    lambda ctx: [])
op("AccumulatorWaitAll", domain=D, inputs=["handles+"], outputs=["done*"], stateful=True,
   attrs={"num_required": Attr("int", REQUIRED), "timeout_ms": Attr("int", -1)},
   doc="Wait until every accumulator holds num_required gradients, changing nothing (DeadlineExceeded "
       "past timeout_ms): takes that follow it do not block, so a step takes from all or from none.")(
    lambda ctx: [])
op("AccumulatorNumAccumulated", domain=D, inputs=["handle"], outputs=["num_accumulated"], stateful=True)(
    lambda ctx: [TensorType(_INT64, ())])
op("Snapshot", domain=D, inputs=["input"], outputs=["output"],
   doc="A copy of input taken when the op runs (Identity aliases a variable's live buffer): the "
       "global step a worker's gradients belong to.")(same_as_input(0))
