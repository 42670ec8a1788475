"""Training-only ops (domain ``flowstack``), with TensorFlow's names.

Three kinds live here:
- graph inputs and state: Placeholder, Variable, Assign*, the fused optimizer updates (Apply*),
  sparse updates (Scatter*), queues, Save/Restore, Send/Recv, stacks for loop gradients;
- gradient helper ops: pure functions that backward passes are built from (ReluGrad,
  ConvBackpropInput, MaxPoolGrad, SumToShape, ...); their kernels live in ``trainer/kernels``;
- summaries, which turn values into serialized TensorBoard ``Summary`` protos.

Stateful ops mutate or read session state (variables, queues, files); their kernels live in
``trainer/`` because they need that state. A ``ref`` input is the variable being updated: its
kernel receives the variable's buffer and updates it in place.
"""

from __future__ import annotations

import numpy as np

from schemas.ops.nn import CONV_ATTRS
from schemas.ops.rules import const_ints, same_as_input, unknown_outputs
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


for _name in ("AssignAdd", "AssignSub"):
    op(_name, domain=D, inputs=["ref", "value"], outputs=["output_ref"], stateful=True)(same_as_input(0))

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
for _name in ("ScatterAdd", "ScatterSub"):
    op(_name, domain=D, inputs=["ref", "indices", "updates"], outputs=["output_ref"], stateful=True,
       doc="ref[indices] +=/-= updates, accumulating repeated indices (sparse gradient updates).")(
        same_as_input(0))

op("NoOp", domain=D, inputs=[], outputs=["dummy*"], doc="Groups control dependencies; no outputs.")(
    lambda ctx: [])

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
          "recv_device": Attr("string", "")})(unknown_outputs)

# -- per-step stacks that carry loop values from a forward loop to its gradient loop -----------
op("StackPush", domain=D, inputs=["value"], outputs=["output"], stateful=True,
   attrs={"stack_name": Attr("string", REQUIRED)}, doc="Push (by reference) and pass the value through.")(
    same_as_input(0))
op("StackPop", domain=D, inputs=["index"], outputs=["value"], stateful=True,
   attrs={"stack_name": Attr("string", REQUIRED)},
   doc="The value pushed at position ``index`` (a gradient loop reads iterations in reverse).")(unknown_outputs)

# -- summaries --------------------------------------------------------------------------------
op("ScalarSummary", domain=D, inputs=["value"], outputs=["summary"], attrs={"tag": Attr("string", REQUIRED)})(
    lambda ctx: [TensorType(_OBJECT, ())])
op("HistogramSummary", domain=D, inputs=["values"], outputs=["summary"],
   attrs={"tag": Attr("string", REQUIRED)})(lambda ctx: [TensorType(_OBJECT, ())])
op("MergeSummary", domain=D, inputs=["inputs+"], outputs=["summary"])(lambda ctx: [TensorType(_OBJECT, ())])
op("ImageSummary", domain=D, inputs=["tensor"], outputs=["summary"],
   attrs={"tag": Attr("string", REQUIRED), "max_images": Attr("int", 3)},
   doc="Up to max_images of a [batch, height, width, 1|3|4] batch as PNGs (floats in [0, 1] scale by 255, "
       "others are min-max normalized).")(lambda ctx: [TensorType(_OBJECT, ())])
op("AudioSummary", domain=D, inputs=["tensor", "sample_rate"], outputs=["summary"],
   attrs={"tag": Attr("string", REQUIRED), "max_outputs": Attr("int", 3)},
   doc="Up to max_outputs clips of a [batch, frames(, channels)] batch in [-1, 1] as 16-bit WAV.")(
    lambda ctx: [TensorType(_OBJECT, ())])
op("TextSummary", domain=D, inputs=["tensor"], outputs=["summary"], attrs={"tag": Attr("string", REQUIRED)},
   doc="A string tensor for TensorBoard's text plugin.")(lambda ctx: [TensorType(_OBJECT, ())])


# -- gradient helper ops (pure; kernels in trainer/kernels) -----------------------------------
@op("SumToShape", domain=D, inputs=["X", "like"], outputs=["Y"], differentiable=True,
    doc="Sum X down to the shape of ``like`` (undoes numpy broadcasting).")
def _sum_to_shape(ctx):
    return [TensorType(ctx.input(0).dtype, ctx.input(1).shape)]


op("ZerosLike", domain=D, inputs=["X"], outputs=["Y"])(same_as_input(0))
op("OnesLike", domain=D, inputs=["X"], outputs=["Y"])(same_as_input(0))
op("ReluGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"])(same_as_input(1))
op("SigmoidGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"])(same_as_input(1))
op("TanhGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"])(same_as_input(1))
op("SoftmaxGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"], attrs={"axis": Attr("int", -1)})(
    same_as_input(1))
op("LogSoftmaxGrad", domain=D, inputs=["dY", "Y"], outputs=["dX"], attrs={"axis": Attr("int", -1)})(
    same_as_input(1))


@op("BroadcastReduceGrad", domain=D, inputs=["dY", "X"], outputs=["dX"],
    attrs={"axes": Attr("ints"), "keepdims": Attr("int", 1), "scale": Attr("string", "sum")},
    doc="Gradient of ReduceSum/ReduceMean: dY re-expanded to X's shape (divided by the count for mean).")
def _broadcast_reduce_grad(ctx):
    return [ctx.input(1)]


@op("ReduceExtremumGrad", domain=D, inputs=["dY", "X", "Y"], outputs=["dX"],
    attrs={"axes": Attr("ints"), "keepdims": Attr("int", 1)},
    doc="Gradient of ReduceMax/ReduceMin: dY split evenly over the positions that attain Y.")
def _reduce_extremum_grad(ctx):
    return [ctx.input(1)]


def _two_outputs(ctx):
    logits = ctx.input(0)
    batch = None if logits.shape is None else tuple(logits.shape[:-1])
    return [TensorType(logits.dtype, batch), logits]


op("SoftmaxCrossEntropyWithLogits", domain=D, inputs=["logits", "labels"], outputs=["loss", "backprop"],
   differentiable=True, doc="Per-example -sum(labels * log_softmax(logits)) and its gradient.")(_two_outputs)
op("SparseSoftmaxCrossEntropyWithLogits", domain=D, inputs=["logits", "labels"],
   outputs=["loss", "backprop"], differentiable=True,
   doc="As SoftmaxCrossEntropyWithLogits with integer class labels.")(_two_outputs)

op("ConvBackpropInput", domain=D, inputs=["dY", "W", "X"], outputs=["dX"], attrs=CONV_ATTRS,
   doc="Gradient of Conv with respect to its input X (X supplies the shape).")(same_as_input(2))
op("ConvBackpropFilter", domain=D, inputs=["dY", "X", "W"], outputs=["dW"], attrs=CONV_ATTRS,
   doc="Gradient of Conv with respect to its filter W.")(same_as_input(2))
_POOL_ATTRS = {
    "auto_pad": Attr("string", "NOTSET"),
    "ceil_mode": Attr("int", 0),
    "dilations": Attr("ints"),
    "kernel_shape": Attr("ints", REQUIRED),
    "pads": Attr("ints"),
    "storage_order": Attr("int", 0),
    "strides": Attr("ints"),
    "count_include_pad": Attr("int", 0),
}
op("MaxPoolGrad", domain=D, inputs=["dY", "X"], outputs=["dX"], attrs=_POOL_ATTRS)(same_as_input(1))
op("AveragePoolGrad", domain=D, inputs=["dY", "X"], outputs=["dX"], attrs=_POOL_ATTRS)(same_as_input(1))


@op("ScatterToDense", domain=D, inputs=["values", "indices", "like"], outputs=["dense"],
    doc="Sum rows ``values`` into a zero tensor shaped like ``like`` at ``indices`` (densifies IndexedSlices).")
def _scatter_to_dense(ctx):
    return [TensorType(ctx.input(0).dtype, ctx.input(2).shape)]


@op("GatherGrad", domain=D, inputs=["dY", "indices", "X"], outputs=["dX"], attrs={"axis": Attr("int", 0)},
    doc="Dense gradient of Gather along any axis.")
def _gather_grad(ctx):
    return [ctx.input(2)]


@op("BatchNormTraining", domain=D, inputs=["X", "scale", "B"], outputs=["Y", "mean", "var", "inv_std"],
    attrs={"epsilon": Attr("float", 1e-5)}, differentiable=True,
    doc="Batch normalization over all axes but 1 (NCHW / NC) with batch statistics.")
def _bn_train(ctx):
    x = ctx.input(0)
    c = None if x.shape is None or len(x.shape) < 2 else (x.shape[1],)
    t = TensorType(x.dtype, c)
    return [x, t, t, t]


op("BatchNormTrainingGrad", domain=D, inputs=["dY", "X", "scale", "mean", "inv_std"],
   outputs=["dX", "dscale", "dB"])(lambda ctx: [ctx.input(1), ctx.input(2), ctx.input(2)])
op("LayerNormGrad", domain=D, inputs=["dY", "X", "scale"], outputs=["dX", "dscale", "dB"],
   attrs={"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5)})(lambda ctx: [ctx.input(1), ctx.input(2), ctx.input(2)])

op("DropoutMask", domain=D, inputs=["X", "rate"], outputs=["mask"], stateful=True,
   attrs={"seed": Attr("int", 0), "seed2": Attr("int", 0), "stream": Attr("string", "")},
   doc="A fresh keep-mask scaled by 1/(1-rate) each step (random state is why it is stateful); seeded "
       "by (seed, seed2) like the random ops when either is set, from the session's generator otherwise.")(
    same_as_input(0))
def _random_of_shape(ctx):
    shape = const_ints(ctx, 0)
    n = ctx.input(0).shape
    dims = tuple(shape) if shape is not None else (None if n is None or n[0] is None else (None,) * n[0])
    return [TensorType(np.dtype(ctx.attrs["dtype"]), dims)]


_RANDOM_ATTRS = {"dtype": Attr("string", "float32"), "seed": Attr("int", 0), "seed2": Attr("int", 0),
                 "stream": Attr("string", "")}
for _name, _doc in (("RandomStandardNormal", "Samples of N(0, 1)."),
                    ("RandomUniform", "Samples of U[0, 1)."),
                    ("TruncatedNormal", "Samples of N(0, 1) redrawn until within 2 standard deviations.")):
    op(_name, domain=D, inputs=["shape"], outputs=["output"], stateful=True, attrs=_RANDOM_ATTRS,
       doc=_doc + " Fresh values every run from the op's own generator, seeded by (seed, seed2) when "
                  "either is set (TensorFlow's graph- and op-level seeds), so a new session replays "
                  "the same sequence; ``stream`` names the generator (the node's name).")(_random_of_shape)
op("LogUniformCandidateSampler", domain=D, inputs=["true_classes"],
   outputs=["sampled_candidates", "true_expected_count", "sampled_expected_count"], stateful=True,
   attrs={"num_sampled": Attr("int", REQUIRED), "range_max": Attr("int", REQUIRED), "unique": Attr("int", 1),
          "seed": Attr("int", 0), "seed2": Attr("int", 0), "stream": Attr("string", "")},
   doc="num_sampled class ids drawn from P(k) = log((k+2)/(k+1)) / log(range_max+1) (Zipf-like, for "
       "sampled softmax / NCE), with the expected counts of the true and sampled classes.")(
    lambda ctx: [TensorType(_INT64, (ctx.attrs["num_sampled"],)),
                 TensorType(np.dtype(np.float32), ctx.input(0).shape),
                 TensorType(np.dtype(np.float32), (ctx.attrs["num_sampled"],))])
op("Print", domain=D, inputs=["input", "data+"], outputs=["output"], stateful=True,
   attrs={"message": Attr("string", ""), "first_n": Attr("int", -1), "summarize": Attr("int", 3)},
   doc="``input`` unchanged, printing ``message`` and the first ``summarize`` entries of each ``data`` "
       "tensor to stderr (the first ``first_n`` runs; -1: every run). Stateful: a side effect.")(same_as_input(0))
op("Assert", domain=D, inputs=["condition", "data+"], outputs=["output"], stateful=True,
   attrs={"summarize": Attr("int", 3), "message": Attr("string", "")},
   doc="Fails the run, showing ``data``, unless the boolean ``condition`` holds everywhere; outputs it.")(
    same_as_input(0))
op("ClipByGlobalNormScale", domain=D, inputs=["clip_norm", "tensors+"], outputs=["scale", "global_norm"],
   doc="min(1, clip_norm / global_norm) over all tensors, and global_norm.")(
    lambda ctx: [TensorType(ctx.input(1).dtype, ()), TensorType(ctx.input(1).dtype, ())])
op("SliceGrad", domain=D, inputs=["dY", "X"], outputs=["dX"],
   attrs={"starts": Attr("ints", REQUIRED), "ends": Attr("ints", REQUIRED), "axes": Attr("ints"),
          "steps": Attr("ints")},
   doc="Gradient of Slice: dY written into zeros shaped like X at the sliced positions.")(same_as_input(1))


@op("LSTMBlockCell", domain=D, inputs=["x", "h_prev", "c_prev", "W", "b"],
    outputs=["h", "c", "i", "f", "o", "g", "co"], attrs={"forget_bias": Attr("float", 0.0)}, differentiable=True,
    doc="One LSTM step, fused: z = [x, h_prev] @ W + b split into gates i, f, g, o; c = f*c_prev + i*g, "
        "h = o*tanh(c). The gate activations are outputs too, for the gradient (as TensorFlow's LSTMBlockCell).")
def _lstm_block_cell(ctx):
    x, h, w = ctx.input(0), ctx.input(1), ctx.input(3)
    if w.shape is not None and w.shape[1] is not None:
        if w.shape[1] % 4:
            raise ctx.fail(f"W must have 4*hidden columns, got shape {w.shape}")
        if x.shape is not None and h.shape is not None and None not in (x.shape[1], h.shape[1], w.shape[0]):
            if x.shape[1] + h.shape[1] != w.shape[0]:
                raise ctx.fail(f"W has {w.shape[0]} rows but x {x.shape} and h_prev {h.shape} give "
                               f"{x.shape[1] + h.shape[1]}")
    state = TensorType(x.dtype, None if h.shape is None else tuple(h.shape))
    return [state] * 7


op("LSTMBlockCellGrad", domain=D,
   inputs=["dh", "dc", "x", "h_prev", "c_prev", "W", "i", "f", "o", "g", "co"],
   outputs=["dx", "dh_prev", "dc_prev", "dW", "db"], attrs={"need_dx": Attr("int", 1)},
   doc="Gradient of LSTMBlockCell. need_dx=0 skips dx (None) where nothing reads it, e.g. a fed "
       "input sequence: a fifth of the step's backward GEMM work for the first layer.")(
    lambda ctx: [ctx.input(2), ctx.input(3), ctx.input(4), ctx.input(5),
                 TensorType(ctx.input(5).dtype, None if ctx.input(5).shape is None else (ctx.input(5).shape[1],))])
op("AccumulateAdd", domain=D, inputs=["accumulator", "value"], outputs=["output"], stateful=True,
   doc="accumulator += value in place, returning the accumulator. Only for loop-private gradient "
       "accumulators that gradients() creates (a fresh buffer per step), never for user tensors.")(
    same_as_input(0))


def _differ(a, b) -> bool:
    return a is not None and b is not None and a != b


def _lstm_fused_dims(ctx):
    """(T, B, I, H) of LSTMBlockFused's inputs, None where unknown; fails naming the shapes that disagree."""
    x, h0, c0, w = (ctx.input(k) for k in range(4))
    for name, t, rank in (("x", x, 3), ("h0", h0, 2), ("c0", c0, 2), ("W", w, 2)):
        if t.shape is not None and len(t.shape) != rank:
            layout = {"x": "[time, batch, input]", "W": "[input + hidden, 4 * hidden]"}.get(name, "[batch, hidden]")
            raise ctx.fail(f"{name} must be {layout}, got shape {t.shape}")
    xs = x.shape or (None,) * 3
    rows, cols = w.shape or (None, None)
    if cols is not None and cols % 4:
        raise ctx.fail(f"W must have 4 * hidden columns, got shape {w.shape}")
    hidden = cols // 4 if cols is not None else None
    batch = xs[1]
    for name, t in (("h0", h0), ("c0", c0)):
        if t.shape is None:
            continue
        if hidden is None:
            hidden = t.shape[1]
        if batch is None:
            batch = t.shape[0]
        if _differ(t.shape[0], batch) or _differ(t.shape[1], hidden):
            raise ctx.fail(f"{name} of shape {t.shape} does not match x {x.shape} and W {w.shape} "
                           f"(expected [batch {batch}, hidden {hidden}])")
    if None not in (rows, xs[2], hidden) and rows != xs[2] + hidden:
        raise ctx.fail(f"W has {rows} rows but x {x.shape} (input size {xs[2]}) and hidden size {hidden} "
                       f"need {xs[2] + hidden}")
    return xs[0], batch, xs[2], hidden


@op("LSTMBlockFused", domain=D, inputs=["x", "h0", "c0", "W", "b"],
    outputs=["y", "h_n", "c_n", "gates", "cs", "co"], attrs={"forget_bias": Attr("float", 0.0)},
    differentiable=True,
    doc="A whole time-major LSTM sequence as one op (TensorFlow's LSTMBlockFusedCell / BlockLSTM): "
        "x [T, B, I] from state h0, c0 [B, H] with W [I + H, 4H] and b [4H] in LSTMBlockCell's gate layout "
        "(i, f, g, o), so the weights are interchangeable. y [T, B, H] holds every step's h, h_n and c_n "
        "[B, H] the final state. gates [T, B, 4H] (the activations i, f, g, o), cs [T, B, H] (each c) and "
        "co [T, B, H] (tanh(c)) are saved for the gradient, not differentiable.")
def _lstm_block_fused(ctx):
    steps, batch, _, hidden = _lstm_fused_dims(ctx)
    dtype = ctx.input(0).dtype
    four = None if hidden is None else 4 * hidden
    seq, state = TensorType(dtype, (steps, batch, hidden)), TensorType(dtype, (batch, hidden))
    return [seq, state, state, TensorType(dtype, (steps, batch, four)), seq, seq]


@op("LSTMBlockFusedGrad", domain=D,
    inputs=["x", "h0", "c0", "W", "y", "gates", "cs", "co", "dy?", "dh_n?", "dc_n?"],
    outputs=["dz", "dh0", "dc0", "dW", "db"],
    doc="Gradient of LSTMBlockFused from those of y, h_n and c_n (each optional: absent is zero). dz "
        "[T * B, 4H] is the gates' pre-activation gradient; the gradient rule builds dx = dz @ W[:I]^T "
        "from it as ops of their own, which partial execution skips where nothing reads dx.")
def _lstm_block_fused_grad(ctx):
    steps, batch, _, hidden = _lstm_fused_dims(ctx)
    dtype = ctx.input(0).dtype
    rows = None if None in (steps, batch) else steps * batch
    state = TensorType(dtype, (batch, hidden))
    return [TensorType(dtype, (rows, None if hidden is None else 4 * hidden)), state, state, ctx.input(3),
            TensorType(dtype, (None if hidden is None else 4 * hidden,))]
