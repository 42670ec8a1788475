"""Gradients of convolution, pooling, normalization and the fused losses."""

from __future__ import annotations

from trainer.gradients.helpers import fs, ints_const, onnx, via_composite
from trainer.gradients.registry import NO_GRADIENT, register_gradient
from trainer.graph import GraphError

reg = register_gradient
_CONV_KEYS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_POOL_KEYS = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides")


def _pick(attrs, keys):
    return {k: attrs[k] for k in keys if attrs.get(k) is not None}


@reg("Conv")
def _conv(node, grads):
    x, w = node.inputs[:2]
    b = node.inputs[2] if len(node.inputs) > 2 else None
    g = grads[0]
    attrs = _pick(node.attrs, _CONV_KEYS)
    dx = fs("ConvBackpropInput", [g, w, x], attrs)
    dw = fs("ConvBackpropFilter", [g, x, w], attrs)
    db = None
    if b is not None:
        axes = [0] + list(range(2, len(g.shape))) if g.shape is not None else [0, 2, 3]
        db = onnx("ReduceSum", [g, ints_const(axes)], {"keepdims": 0})
    return [dx, dw, db][: len(node.inputs)]


@reg("MaxPool")
def _max_pool(node, grads):
    return [fs("MaxPoolGrad", [grads[0], node.inputs[0]], _pick(node.attrs, _POOL_KEYS))]


@reg("AveragePool")
def _avg_pool(node, grads):
    attrs = _pick(node.attrs, _POOL_KEYS + ("count_include_pad",))
    attrs.pop("storage_order", None)
    return [fs("AveragePoolGrad", [grads[0], node.inputs[0]], attrs)]


@reg("GlobalAveragePool")
def _global_avg_pool(node, grads):
    x = node.inputs[0]
    axes = list(range(2, len(x.shape)))
    return [fs("BroadcastReduceGrad", [grads[0], x], {"axes": axes, "keepdims": 1, "scale": "mean"})]


@reg("BatchNormTraining", "flowstack")
def _bn_training(node, grads):
    x, scale, _ = node.inputs
    _, mean, _, inv_std = node.outputs
    dx, dscale, db = fs("BatchNormTrainingGrad", [grads[0], x, scale, mean, inv_std], n=3)
    return [dx, dscale, db]


@reg("LayerNormalization")
def _layer_norm(node, grads):
    x, scale = node.inputs[:2]
    attrs = {"axis": node.attrs["axis"], "epsilon": node.attrs["epsilon"]}
    dx, dscale, db = fs("LayerNormGrad", [grads[0], x, scale], attrs, n=3)
    b = node.inputs[2] if len(node.inputs) > 2 else None
    if b is not None and (b.shape is None or b.shape != scale.shape or None in b.shape):
        db = fs("SumToShape", [grads[0], b])  # LayerNormGrad's dB is shaped like scale
    return [dx, dscale, db if b is not None else None][: len(node.inputs)]


def _xent(node, grads):
    g = grads[0]
    if g is None:
        return [None, None]
    backprop = node.outputs[1]
    return [onnx("Unsqueeze", [g, ints_const([-1])]) * backprop, None]


reg("SoftmaxCrossEntropyWithLogits", "flowstack")(_xent)
reg("SparseSoftmaxCrossEntropyWithLogits", "flowstack")(_xent)
reg("DropoutMask", "flowstack")(lambda node, grads: [None, None])
reg("Print", "flowstack")(lambda node, grads: [grads[0]] + [None] * (len(node.inputs) - 1))  # identity of input
reg("Assert", "flowstack")(NO_GRADIENT)
for _random in ("RandomStandardNormal", "RandomUniform", "TruncatedNormal", "LogUniformCandidateSampler"):
    reg(_random, "flowstack")(NO_GRADIENT)  # samples do not depend on their shape or classes smoothly


@reg("GlobalMaxPool")
def _global_max_pool(node, grads):
    x = node.inputs[0]
    axes = list(range(2, len(x.shape)))
    return [fs("ReduceExtremumGrad", [grads[0], x, node.outputs[0]], {"axes": axes, "keepdims": 1})]


@reg("ConvTranspose")
def _conv_transpose(node, grads):
    # ConvTranspose is the input-gradient of a Conv; so its own gradients are a Conv and a
    # filter gradient with the roles of input and output swapped, over the pads the forward used.
    x, w = node.inputs[:2]
    g = grads[0]
    attrs = _pick(node.attrs, _CONV_KEYS)
    pads = _derived_pads(node)
    if pads is not None:
        n = len(pads) // 2
        attrs.update(auto_pad="NOTSET", pads=[max(p, 0) for p in pads])
        if any(p < 0 for p in pads):  # output positions past the taps depend on no x: drop them
            crop = [min(p, 0) for p in pads]
            g = onnx("Pad", [g, ints_const([0, 0] + crop[:n] + [0, 0] + crop[n:])])
    dx = onnx("Conv", [g, w], attrs)
    dw = fs("ConvBackpropFilter", [x, g, w], attrs)
    db = None
    if len(node.inputs) > 2 and node.inputs[2] is not None:
        db = onnx("ReduceSum", [grads[0], ints_const([0] + list(range(2, len(grads[0].shape))))], {"keepdims": 0})
    return [dx, dw, db][: len(node.inputs)]


def _derived_pads(node) -> list[int] | None:
    """The begin and end pads the ConvTranspose kernel derives from output_shape or a SAME auto_pad
    (negative where the output reaches past the taps), or None where its pads attribute applies."""
    attrs, x, w = node.attrs, node.inputs[0], node.inputs[1]
    if not attrs.get("output_shape") and attrs.get("auto_pad") not in ("SAME_UPPER", "SAME_LOWER"):
        return None
    if x.shape is None or None in x.shape[2:] or w.shape is None or None in w.shape[2:]:
        raise GraphError(f"ConvTranspose {node.name!r}: the gradient with output_shape or auto_pad needs static "
                         f"spatial shapes, got X {x.shape} and W {w.shape}")
    spatial, n = x.shape[2:], len(x.shape) - 2
    kernel = attrs.get("kernel_shape") or w.shape[2:]
    strides, dilations = attrs.get("strides") or [1] * n, attrs.get("dilations") or [1] * n
    extra = attrs.get("output_padding") or [0] * n
    full = [s * (i - 1) + e + (k - 1) * d + 1 for s, i, e, k, d in zip(strides, spatial, extra, kernel, dilations)]
    out = list(attrs["output_shape"])[-n:] if attrs.get("output_shape") else [i * s for i, s in zip(spatial, strides)]
    total = [f - o for f, o in zip(full, out)]
    if attrs.get("auto_pad") == "SAME_UPPER":
        begin = [t // 2 for t in total]
    elif attrs.get("auto_pad") == "SAME_LOWER":
        begin = [t - t // 2 for t in total]
    else:  # an output_shape: what the taps miss goes at the end
        begin = [max(t - t // 2, 0) for t in total]
    return begin + [t - b for t, b in zip(total, begin)]


@reg("BatchNormalization")
def _batch_norm(node, grads):
    if node.attrs["training_mode"]:
        return via_composite(_batch_norm_training_mode)(node, grads)
    x, scale, b, mean, var = node.inputs
    g = grads[0]
    shape = ints_const([1, -1] + [1] * (len(x.shape) - 2))
    axes = ints_const([0] + list(range(2, len(x.shape))))

    def ch(t):
        return onnx("Reshape", [t, shape])

    inv = onnx("Reciprocal", [onnx("Sqrt", [var + node.attrs["epsilon"]])])
    xc = x - ch(mean)
    gsum = onnx("ReduceSum", [g, axes], {"keepdims": 0})
    gxc = onnx("ReduceSum", [g * xc, axes], {"keepdims": 0})
    dx = g * ch(scale * inv)
    dscale = gxc * inv
    dmean = -(gsum * scale * inv)
    dvar = gxc * scale * inv * inv * inv * -0.5
    return [dx, dscale, gsum, dmean, dvar]


def _batch_norm_training_mode(node, x, scale, b, mean, var):
    """Y normalized with the batch's statistics, and the running statistics updated with them."""
    rank = len(x.shape)
    axes = [0] + list(range(2, rank))
    xc = x - _mean(x, axes)
    batch_var = _mean(xc * xc, axes)
    y = xc / onnx("Sqrt", [batch_var + node.attrs["epsilon"]]) * _channel(scale, rank) + _channel(b, rank)
    momentum = node.attrs["momentum"]

    def running(stat, batch):
        return stat * momentum + onnx("Reshape", [batch, ints_const([-1])]) * (1.0 - momentum)

    return [y, running(mean, _mean(x, axes)), running(var, batch_var)]


@reg("Dropout")
def _dropout(node, grads):
    from trainer.graph import constant_value

    training = node.inputs[2] if len(node.inputs) > 2 else None
    if training is None or not bool(constant_value(training) if constant_value(training) is not None else True):
        return [grads[0]] + [None] * (len(node.inputs) - 1)
    if len(node.outputs) < 2:
        raise NotImplementedError("training-mode Dropout gradient needs the mask output")
    ratio = node.inputs[1]
    keep = onnx("Cast", [node.outputs[1]], {"to": _code(node.inputs[0])})
    scale = 1.0 / (1.0 - float(constant_value(ratio))) if ratio is not None else 2.0
    return [grads[0] * keep * scale] + [None] * (len(node.inputs) - 1)


def _code(t):
    from schemas.dtypes import from_numpy

    return from_numpy(t.dtype)


# -- normalizations without a hand-written adjoint: differentiate an equivalent composite --------
def _mean(x, axes):
    return onnx("ReduceMean", [x, ints_const(axes)], {"keepdims": 1})


def _channel(t, rank):
    return onnx("Reshape", [t, ints_const([1, -1] + [1] * (rank - 2))])


def _standardize(x, axes, eps):
    xc = x - _mean(x, axes)
    return xc / onnx("Sqrt", [_mean(xc * xc, axes) + eps])


def _instance_norm(node, x, scale, b):
    rank = len(x.shape)
    y = _standardize(x, list(range(2, rank)), node.attrs["epsilon"])
    return y * _channel(scale, rank) + _channel(b, rank)


def _group_norm(node, x, scale, bias):
    rank = len(x.shape)
    grouped = onnx("Reshape", [x, ints_const([0, node.attrs["num_groups"], -1])])
    y = onnx("Reshape", [_standardize(grouped, [2], node.attrs["epsilon"]), onnx("Shape", [x])])
    return y * _channel(scale, rank) + _channel(bias, rank)


def _rms_norm(node, x, scale):
    axes = list(range(node.attrs["axis"] % len(x.shape), len(x.shape)))
    return x / onnx("Sqrt", [_mean(x * x, axes) + node.attrs["epsilon"]]) * scale


def _mvn(node, x):
    axes = [a % len(x.shape) for a in node.attrs["axes"]]
    xc = x - _mean(x, axes)
    return xc / (onnx("Sqrt", [_mean(xc * xc, axes)]) + 1e-9)


def _lp_norm(node, x):
    axis, p = node.attrs["axis"], node.attrs["p"]
    if p == 1:
        norm = onnx("ReduceSum", [onnx("Abs", [x]), ints_const([axis])], {"keepdims": 1})
    else:
        norm = onnx("Sqrt", [onnx("ReduceSum", [x * x, ints_const([axis])], {"keepdims": 1})])
    return x / norm  # (an all-zero vector has no gradient worth defining)


def _global_lp_pool(node, x):
    p = float(node.attrs["p"])
    s = onnx("ReduceSum", [onnx("Pow", [onnx("Abs", [x]), p]), ints_const(list(range(2, len(x.shape))))],
             {"keepdims": 1})
    return onnx("Pow", [s, 1.0 / p])


reg("InstanceNormalization")(via_composite(_instance_norm))
reg("GroupNormalization")(via_composite(_group_norm))
reg("RMSNormalization")(via_composite(_rms_norm))
reg("MeanVarianceNormalization")(via_composite(_mvn))
reg("LpNormalization")(via_composite(_lp_norm))
reg("GlobalLpPool")(via_composite(_global_lp_pool))


def _nll_composite(node, logp, target, weight):
    ignore = node.attrs.get("ignore_index")
    if ignore is not None:
        keep = onnx("Not", [onnx("Equal", [target, ints_const(ignore)])])
        target = onnx("Where", [keep, target, fs("ZerosLike", [target])])
    picked = onnx("Squeeze", [onnx("GatherElements", [logp, onnx("Unsqueeze", [target, ints_const([1])])], {"axis": 1}),
                              ints_const([1])])
    w = fs("OnesLike", [picked]) if weight is None else onnx("Gather", [weight, target], {"axis": 0})
    if ignore is not None:
        w = w * onnx("Cast", [keep], {"to": _code(logp)})
    loss = -(picked * w)
    reduction = node.attrs["reduction"]
    if reduction == "none":
        return loss
    total = onnx("ReduceSum", [loss], {"keepdims": 0})
    return total if reduction == "sum" else total / onnx("ReduceSum", [w], {"keepdims": 0})


reg("NegativeLogLikelihoodLoss")(via_composite(lambda node, x, t, w=None: _nll_composite(node, x, t, w)))


def _softmax_xent_composite(node, scores, target, weight=None):
    # Both outputs: the loss and the log-probabilities (its optional second output).
    log_prob = onnx("LogSoftmax", [scores], {"axis": 1})
    return [_nll_composite(node, log_prob, target, weight), log_prob]


reg("SoftmaxCrossEntropyLoss")(via_composite(_softmax_xent_composite))


@reg("LpPool")
def _lp_pool(node, grads):
    if node.attrs.get("ceil_mode"):
        raise NotImplementedError("LpPool gradient supports ceil_mode=0")
    return via_composite(_lp_pool_composite)(node, grads)


def _lp_pool_composite(node, x):
    # sum over each window = average (counting pads) * window size
    p = float(node.attrs["p"])
    attrs = {k: node.attrs[k] for k in ("auto_pad", "kernel_shape", "pads", "strides", "dilations")
             if node.attrs.get(k) is not None}
    k = 1
    for d in node.attrs["kernel_shape"]:
        k *= d
    avg = onnx("AveragePool", [onnx("Pow", [onnx("Abs", [x]), p])], {**attrs, "count_include_pad": 1})
    return onnx("Pow", [avg * float(k), 1.0 / p])


def _lrn(node, x):
    size, rank = node.attrs["size"], len(x.shape)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = onnx("Pad", [x * x, ints_const([0, lo] + [0] * (rank - 2) + [0, hi] + [0] * (rank - 2))])
    c = x.shape[1]
    window = onnx("Sum", [onnx("Slice", [sq, ints_const([k]), ints_const([k + c]), ints_const([1])])
                          for k in range(size)])
    scale = window * (node.attrs["alpha"] / size) + node.attrs["bias"]
    return x / onnx("Pow", [scale, float(node.attrs["beta"])])


reg("LRN")(via_composite(_lrn))


@reg("MaxUnpool")
def _max_unpool(node, grads):
    # Each input value went to one flat position of the output: read its gradient back from there.
    flat = onnx("Reshape", [grads[0], ints_const([-1])])
    return [onnx("Gather", [flat, node.inputs[1]], {"axis": 0}), None, None][: len(node.inputs)]


def _causal_conv_with_state(node, x, w, b=None, past_state=None):
    """CausalConvWithState as the pattern it fuses: [state, x] -> depthwise Conv -> SiLU; the new
    state is the last k - 1 positions of [state, x]."""
    from trainer.graph import GraphError

    if w.shape is None or None in w.shape:
        raise GraphError(f"CausalConvWithState {node.name!r}: the gradient needs the weight's static shape, got {w.shape}")
    channels, _, k = w.shape
    if past_state is None:
        padded = onnx("Pad", [x, ints_const([0, 0, k - 1, 0, 0, 0])])
    else:
        padded = onnx("Concat", [past_state, x], {"axis": 2})
    y = onnx("Conv", [padded, w] + ([b] if b is not None else []), {"group": channels})
    if node.attrs["activation"] != "none":
        y = onnx("Mul", [y, onnx("Sigmoid", [y])])
    state = onnx("Slice", [padded, ints_const([-(k - 1)]), ints_const([2**62]), ints_const([2])]) if k > 1 else None
    return [y, state] if state is not None else [y]


reg("CausalConvWithState")(via_composite(_causal_conv_with_state))
