"""Training-only ops (domain ``flowstack``), with TensorFlow's names.

Graph inputs and state live here: Placeholder, Variable, Assign*, the fused optimizer updates
(Apply*), sparse updates (Scatter*), queues, Save/Restore, Send/Recv, stacks for loop gradients,
DropoutMask. The gradient helper ops (ReluGrad, ConvBackpropInput, SumToShape, ...) are declared
with the family of the op they differentiate (math, nn, shape, recurrent); summaries, random
and debugging ops have families of their own.

Stateful ops mutate or read session state (variables, queues, files); their kernels live in
``trainer/`` because they need that state. A ``ref`` input is the variable being updated: its
kernel receives the variable's buffer and updates it in place.
"""

from __future__ import annotations

import numpy as np

from schemas.ops.rules import same_as_input, unknown_outputs
from schemas.registry import REQUIRED, Attr, TensorType, op

D = "flowstack"
_OBJECT = np.dtype(object)
_INT64 = np.dtype(np.int64)


def _shape_attr(shape):
    return None if shape is None else tuple(None if d < 0 else int(d) for d in shape)


# -- graph inputs and variables -----------------------------------------------------------------
@op("Placeholder", domain=D, inputs=[], outputs=["output"], stateful=True,
    attrs={"dtype": Attr("string", REQUIRED), "shape": Attr("ints")})
def _placeholder(ctx):
    """A value fed by each run (session-supplied, hence stateful); -1 marks an unknown dim."""
    return [TensorType(np.dtype(ctx.attrs["dtype"]), _shape_attr(ctx.attrs["shape"]))]


@op("Variable", domain=D, inputs=[], outputs=["ref"], stateful=True,
    attrs={"dtype": Attr("string", REQUIRED), "shape": Attr("ints", REQUIRED),
           "shared_name": Attr("string", "")})
def _variable(ctx):
    """Mutable state that outlives a step; outputs the variable's buffer (not a copy)."""
    return [TensorType(np.dtype(ctx.attrs["dtype"]), _shape_attr(ctx.attrs["shape"]))]


op("IsVariableInitialized", domain=D, inputs=[], outputs=["is_initialized"], stateful=True,
   attrs={"shared_name": Attr("string", REQUIRED)},
   doc="Whether variable shared_name has a value in this session (built beside the variable).")(
    lambda ctx: [TensorType(np.dtype(bool), ())])


@op("Assign", domain=D, inputs=["ref", "value"], outputs=["output_ref"], stateful=True,
    attrs={"validate_shape": Attr("int", 1)}, doc="ref <- value (in place when shapes agree).")
def _assign(ctx):
    ref, value = ctx.input(0), ctx.input(1)
    if ctx.attrs["validate_shape"] and ref.shape is not None and value.shape is not None:
        if len(ref.shape) != len(value.shape) or any(
            a is not None and b is not None and a != b for a, b in zip(ref.shape, value.shape)
        ):
            raise ctx.fail(f"value of shape {value.shape} cannot be assigned to variable of shape {ref.shape}")
    return [ref]


op("AssignAdd", domain=D, inputs=["ref", "value"], outputs=["output_ref"], stateful=True)(same_as_input(0))
op("AssignSub", domain=D, inputs=["ref", "value"], outputs=["output_ref"], stateful=True)(same_as_input(0))
op("CountUpTo", domain=D, inputs=["ref"], outputs=["output"], stateful=True, attrs={"limit": Attr("int", REQUIRED)},
   doc="The variable's value before adding 1; OutOfRangeError once it has reached limit (epoch counters).")(
    lambda ctx: [TensorType(ctx.input(0).dtype, ())])

# The fused optimizer updates: one kernel each, in place on the variable's (and slots') buffers.
op("ApplyGradientDescent", domain=D, inputs=["var", "alpha", "delta"], outputs=["out"],
   stateful=True)(same_as_input(0))
op("ApplyMomentum", domain=D, inputs=["var", "accum", "lr", "grad", "momentum"], outputs=["out"],
   stateful=True, attrs={"use_nesterov": Attr("int", 0)})(same_as_input(0))
op("ApplyAdam", domain=D,
   inputs=["var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"],
   outputs=["out"], stateful=True)(same_as_input(0))
op("ApplyAdagrad", domain=D, inputs=["var", "accum", "lr", "grad"], outputs=["out"],
   stateful=True)(same_as_input(0))
op("ApplyRMSProp", domain=D, inputs=["var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"],
   outputs=["out"], stateful=True)(same_as_input(0))


# -- sparse updates of a variable's rows (tf.scatter_*) and elements (tf.scatter_nd_*), in place --
def _scatter_rule(ctx):
    """updates must be indices.shape + ref.shape[1:] (or a scalar, broadcast to every row)."""
    ref, indices, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    _check_integer_indices(ctx, indices)
    if ref.shape is not None and indices.shape is not None and updates.shape not in (None, ()):
        _check_updates(ctx, tuple(indices.shape) + tuple(ref.shape[1:]), updates.shape)
    return [ref]


def _scatter_nd_rule(ctx):
    """indices [..., K] picks elements (K = rank) or slices of ref; updates must be
    indices.shape[:-1] + ref.shape[K:]."""
    ref, indices, updates = ctx.input(0), ctx.input(1), ctx.input(2)
    _check_integer_indices(ctx, indices)
    if ref.shape is None or indices.shape is None or not indices.shape or indices.shape[-1] is None:
        return [ref]
    k = indices.shape[-1]
    if k > len(ref.shape):
        raise ctx.fail(f"indices.shape[-1] = {k} exceeds the rank {len(ref.shape)} of ref")
    if updates.shape is not None:
        _check_updates(ctx, tuple(indices.shape[:-1]) + tuple(ref.shape[k:]), updates.shape)
    return [ref]


def _check_integer_indices(ctx, indices):
    if indices.dtype is not None and indices.dtype.kind not in "iu":
        raise ctx.fail(f"indices must be int32 or int64, got {indices.dtype}")


def _check_updates(ctx, expected, actual):
    known_differ = any(a is not None and b is not None and a != b for a, b in zip(expected, actual))
    if len(expected) != len(actual) or known_differ:
        raise ctx.fail(f"updates of shape {tuple(actual)} do not match the shape {tuple(expected)} "
                       "that indices and ref call for")


op("ScatterUpdate", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 1)}, doc="ref[indices] = updates (rows; the last of repeated indices wins).")(
    _scatter_rule)
op("ScatterAdd", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)},
   doc="ref[indices] += updates, accumulating repeated indices (sparse gradient updates).")(_scatter_rule)
op("ScatterSub", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)},
   doc="ref[indices] -= updates, accumulating repeated indices (sparse gradient updates).")(_scatter_rule)
op("ScatterMul", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)}, doc="ref[indices] *= updates, accumulating repeated indices.")(
    _scatter_rule)
op("ScatterDiv", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)}, doc="ref[indices] /= updates, accumulating repeated indices.")(
    _scatter_rule)
op("ScatterMax", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)}, doc="ref[indices] = max(ref[indices], updates), over repeated indices.")(
    _scatter_rule)
op("ScatterMin", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)}, doc="ref[indices] = min(ref[indices], updates), over repeated indices.")(
    _scatter_rule)
op("ScatterNdUpdate", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 1)}, doc="ref[indices[i]] = updates[i] for each index tuple (element or slice).")(
    _scatter_nd_rule)
op("ScatterNdAdd", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)}, doc="ref[indices[i]] += updates[i], accumulating repeated indices.")(
    _scatter_nd_rule)
op("ScatterNdSub", domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
   attrs={"use_locking": Attr("int", 0)}, doc="ref[indices[i]] -= updates[i], accumulating repeated indices.")(
    _scatter_nd_rule)


# -- checkpoints ------------------------------------------------------------------------------
op("Save", domain=D, inputs=["filename", "tensors*"], outputs=["done*"], stateful=True,
   attrs={"tensor_names": Attr("strings", REQUIRED), "graph_json": Attr("string", ""), "slices": Attr("string", "")},
   doc="Atomically write the tensors (and the graph) as a checkpoint at ``filename``; ``slices`` (JSON) "
       "records how the graph shards partitioned variables (trainer/saved_slices.py).")(
    lambda ctx: [])


@op("Restore", domain=D, inputs=["filename"], outputs=["tensor"], stateful=True,
    attrs={"tensor_name": Attr("string", REQUIRED), "dtype": Attr("string", REQUIRED),
           "shape": Attr("ints")})
def _restore(ctx):
    return [TensorType(np.dtype(ctx.attrs["dtype"]), _shape_attr(ctx.attrs["shape"]))]


# -- queues -----------------------------------------------------------------------------------
_QUEUE_ATTRS = {
    "component_types": Attr("strings", REQUIRED),
    "shapes": Attr("strings", ()),  # JSON per component ("[28, 28]"), "" for unknown
    "capacity": Attr("int", -1),
    "shared_name": Attr("string", ""),
}
op("FIFOQueue", domain=D, inputs=[], outputs=["handle"], stateful=True, attrs=_QUEUE_ATTRS)(
    lambda ctx: [TensorType(_OBJECT, ())])
op("RandomShuffleQueue", domain=D, inputs=[], outputs=["handle"], stateful=True,
   attrs={**_QUEUE_ATTRS, "min_after_dequeue": Attr("int", 0), "seed": Attr("int", 0)})(
    lambda ctx: [TensorType(_OBJECT, ())])
op("PaddingFIFOQueue", domain=D, inputs=[], outputs=["handle"], stateful=True, attrs=_QUEUE_ATTRS,
   doc="A FIFO queue whose shapes may leave dimensions unknown; dequeue_many pads along them.")(
    lambda ctx: [TensorType(_OBJECT, ())])
op("PriorityQueue", domain=D, inputs=[], outputs=["handle"], stateful=True, attrs=_QUEUE_ATTRS,
   doc="A queue that dequeues the smallest int64 priority (component 0) first.")(
    lambda ctx: [TensorType(_OBJECT, ())])
op("QueueEnqueue", domain=D, inputs=["handle", "components+"], outputs=["done*"], stateful=True)(
    lambda ctx: [])
op("QueueEnqueueMany", domain=D, inputs=["handle", "components+"], outputs=["done*"], stateful=True)(
    lambda ctx: [])
op("QueueDequeue", domain=D, inputs=["handle"], outputs=["components+"], stateful=True,
   attrs={"component_types": Attr("strings", REQUIRED), "timeout_ms": Attr("int", -1)},
   doc="One element; waits at most timeout_ms (-1: no limit), then fails with DeadlineExceeded.")(unknown_outputs)
op("QueueDequeueMany", domain=D, inputs=["handle", "n"], outputs=["components+"], stateful=True,
   attrs={"component_types": Attr("strings", REQUIRED)})(unknown_outputs)
op("QueueClose", domain=D, inputs=["handle"], outputs=["done*"], stateful=True,
   attrs={"cancel_pending_enqueues": Attr("int", 0)})(lambda ctx: [])
op("QueueSize", domain=D, inputs=["handle"], outputs=["size"], stateful=True)(
    lambda ctx: [TensorType(_INT64, ())])

# -- devices: partitions exchange tensors through a rendezvous ---------------------------------
op("Send", domain=D, inputs=["tensor"], outputs=["done*"], stateful=True,
   attrs={"tensor_name": Attr("string", REQUIRED), "send_device": Attr("string", ""),
          "recv_device": Attr("string", "")})(lambda ctx: [])
op("Recv", domain=D, inputs=[], outputs=["tensor"], stateful=True,
   attrs={"tensor_name": Attr("string", REQUIRED), "send_device": Attr("string", ""),
          "recv_device": Attr("string", ""), "may_be_dead": Attr("int", 0)},
   doc="may_be_dead: the value comes from a cond branch (the plan runs on the dataflow executor).")(unknown_outputs)

# -- per-step stacks that carry loop values from a forward loop to its gradient loop -----------
op("StackPush", domain=D, inputs=["value"], outputs=["output"], stateful=True,
   attrs={"stack_name": Attr("string", REQUIRED)}, doc="Push (by reference) and pass the value through.")(
    same_as_input(0))
op("StackPop", domain=D, inputs=["index"], outputs=["value"], stateful=True,
   attrs={"stack_name": Attr("string", REQUIRED)},
   doc="The value pushed at position ``index`` (a gradient loop reads iterations in reverse).")(unknown_outputs)

op("DropoutMask", domain=D, inputs=["X", "rate"], outputs=["mask"], stateful=True,
   attrs={"seed": Attr("int", 0), "seed2": Attr("int", 0), "stream": Attr("string", "")},
   doc="A fresh keep-mask scaled by 1/(1-rate) each step (random state is why it is stateful); seeded "
       "by (seed, seed2) like the random ops when either is set, from the session's generator otherwise.")(
    same_as_input(0))
op("AccumulateAdd", domain=D, inputs=["accumulator", "value"], outputs=["output"], stateful=True,
   doc="accumulator += value in place, returning the accumulator. Only for loop-private gradient "
       "accumulators that gradients() creates (a fresh buffer per step), never for user tensors.")(
    same_as_input(0))


