"""Gradients of convolution, pooling, normalization and the fused losses."""

from __future__ import annotations

import numpy as np

from trainer.gradients.helpers import const_ints, fs, ints_const, onnx, via_composite
from trainer.gradients.registry import register_gradient
from trainer.graph import GraphError
from trainer.ops import constant

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


# -- attention ------------------------------------------------------------------------------------
# Gradients of the transformer ops: Attention and RotaryEmbedding.


@reg("Attention")
def _attention(node, grads):
    # Every output can carry gradient: Y, the present key/value cache (past concatenated with
    # K/V) and the qk_matmul_output; AttentionGrad takes them all in one pass.
    ins = list(node.inputs) + [None] * (7 - len(node.inputs))
    mask, past_key, past_value = ins[3:6]
    dy = grads[0] if grads[0] is not None else fs("ZerosLike", [node.outputs[0]])
    inputs = [dy, *(list(grads[1:]) + [None] * 3)[:3], *ins]
    while inputs[-1] is None:
        inputs.pop()
    dq, dk, dv, dmask, dpast_key, dpast_value = fs("AttentionGrad", inputs, dict(node.attrs), n=6)
    float_mask = mask is not None and mask.dtype is not None and mask.dtype.kind == "f"
    result = [dq, dk, dv, dmask if float_mask else None, dpast_key if past_key is not None else None,
              dpast_value if past_value is not None else None, None]
    return result[: len(node.inputs)]


def _halves(t, node, half):
    """The two halves that RotaryEmbedding rotates against each other, as (B, S, heads, half)."""
    if len(t.shape) == 4:  # (B, H, S, D)
        t = onnx("Transpose", [t], {"perm": [0, 2, 1, 3]})
    else:  # (B, S, H*D)
        t = onnx("Reshape", [t, ints_const([0, 0, node.attrs["num_heads"], -1])])
    if node.attrs["interleaved"]:
        starts, step = (0, 1), 2
    else:
        starts, step = (0, half), 1
    return [onnx("Slice", [t, ints_const([s]), ints_const([s + step * half]), ints_const([3]), ints_const([step])])
            for s in starts]


def _to_cache(d, cache, position_ids):
    """Per-position cache gradient (B, S, half) summed into the cache rows the positions read."""
    if position_ids is None:
        return d
    rows = onnx("Unsqueeze", [position_ids, ints_const([-1])])
    return onnx("ScatterND", [fs("ZerosLike", [cache]), rows, d], {"reduction": "add"})


@reg("RotaryEmbedding")
def _rotary_embedding(node, grads):
    # A rotation by the cached angle; its transpose rotates back, i.e. the same op with -sin.
    x, cos, sin = node.inputs[:3]
    position_ids = node.inputs[3] if len(node.inputs) > 3 else None
    g = grads[0]
    dx = onnx("RotaryEmbedding", [g, cos, -sin] + ([position_ids] if position_ids is not None else []),
              dict(node.attrs))
    # real = cos*x1 - sin*x2 and imag = sin*x1 + cos*x2, summed over heads for the caches.
    half = None if cos.shape is None else cos.shape[-1]
    if half is None or x.shape is None:
        raise GraphError(f"RotaryEmbedding gradient needs the rank of {x.name} and the last dim of {cos.name}")
    x1, x2 = _halves(x, node, half)
    g1, g2 = _halves(g, node, half)
    heads = ints_const([2])
    dcos = onnx("ReduceSum", [g1 * x1 + g2 * x2, heads], {"keepdims": 0})
    dsin = onnx("ReduceSum", [g2 * x1 - g1 * x2, heads], {"keepdims": 0})
    return [dx, _to_cache(dcos, cos, position_ids), _to_cache(dsin, sin, position_ids), None][: len(node.inputs)]


# -- resampling and patches -----------------------------------------------------------------------
# Gradients of resampling and patch ops: Resize, Upsample, GridSample, AffineGrid, Col2Im.
#
# Each is linear in its image input, so that gradient is the op's transpose: a helper op where
# the transpose is a scatter (ResizeGrad, GridSampleGrad), an existing op where one is the
# transpose already (Col2Im's is an im2col, a grouped Conv with one-hot filters).


def _optional(node, i):
    return node.inputs[i] if len(node.inputs) > i else None


@reg("Resize")
def _resize(node, grads):
    # roi only moves sample positions (tf_crop_and_resize); like scales and sizes, it gets no gradient.
    x = node.inputs[0]
    inputs = [grads[0], x, _optional(node, 1), _optional(node, 2), _optional(node, 3)]
    while inputs[-1] is None:
        inputs.pop()
    return [fs("ResizeGrad", inputs, dict(node.attrs))] + [None] * (len(node.inputs) - 1)


@reg("Upsample")
def _upsample(node, grads):
    # Upsample is Resize with the opset-9 conventions (as its kernel runs it).
    attrs = {"mode": node.attrs["mode"], "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    return [fs("ResizeGrad", [grads[0], node.inputs[0], None, node.inputs[1]], attrs), None]


@reg("GridSample")
def _grid_sample(node, grads):
    return fs("GridSampleGrad", [grads[0], *node.inputs], dict(node.attrs), n=2)


@reg("AffineGrid")
def _affine_grid(node, grads):
    # grid[n, pixel] = theta[n] @ (x, y[, z], 1)[pixel], so dtheta[n] = sum over pixels of
    # dgrid[n, pixel] (x) (x, y[, z], 1)[pixel]. AffineGrid itself, run on theta = [I | 0], lays
    # out those pixel coordinates, with its own conventions.
    theta, size = node.inputs
    dims = const_ints(size, "AffineGrid size")[2:]
    nd, pixels = len(dims), int(np.prod(dims))
    identity = constant(np.eye(nd, nd + 1, dtype=theta.dtype)[None])
    coords = onnx("Reshape", [onnx("AffineGrid", [identity, ints_const([1, 1, *dims])], dict(node.attrs)),
                              ints_const([pixels, nd])])
    base = onnx("Concat", [coords, constant(np.ones((pixels, 1), theta.dtype))], {"axis": 1})
    per_pixel = onnx("Reshape", [grads[0], ints_const([0, pixels, nd])])
    return [onnx("MatMul", [onnx("Transpose", [per_pixel], {"perm": [0, 2, 1]}), base]), None]


@reg("Col2Im")
def _col2im(node, grads):
    # Col2Im sums patches into an image; its transpose cuts the image into patches again: a Conv
    # with group = channels whose filters each pick one block position.
    x = node.inputs[0]
    block = const_ints(node.inputs[2], "Col2Im block_shape")
    k = int(np.prod(block))
    if x.shape is None or x.shape[1] is None:
        raise GraphError(f"Col2Im gradient needs the channel size of {x.name} to be known")
    c = x.shape[1] // k
    one_hot = np.eye(k, dtype=x.dtype).reshape([k, 1, *block])
    filters = constant(np.tile(one_hot, (c, 1) + (1,) * len(block)))
    attrs = {"group": c, "kernel_shape": block}
    for name in ("dilations", "pads", "strides"):
        if node.attrs.get(name) is not None:
            attrs[name] = node.attrs[name]
    patches = onnx("Conv", [grads[0], filters], attrs)
    return [onnx("Reshape", [patches, ints_const([0, c * k, -1])]), None, None]


# DepthToSpace and SpaceToDepth in the same mode are inverse permutations: each other's transpose.
@reg("DepthToSpace")
def _depth_to_space(node, grads):
    return [onnx("SpaceToDepth", [grads[0]], {"blocksize": node.attrs["blocksize"], "mode": node.attrs["mode"]})]


@reg("SpaceToDepth")
def _space_to_depth(node, grads):
    return [onnx("DepthToSpace", [grads[0]], {"blocksize": node.attrs["blocksize"], "mode": node.attrs["mode"]})]


@reg("CTCLoss", "flowstack")
def _ctc_loss(node, grads):
    # The kernel computes d loss / d logits with the loss, as TF's CTCLoss does; scale it per example.
    scale = onnx("Unsqueeze", [grads[0], ints_const([0, 2])])
    return [onnx("Mul", [node.outputs[1], scale]), None, None, None]


def _fractional(grad_op: str):
    def rule(node, grads):
        if grads[0] is None:
            return [None]
        _, rows, cols = node.outputs
        return [fs(grad_op, [node.inputs[0], grads[0], rows, cols], {"overlapping": node.attrs["overlapping"]})]

    return rule


reg("FractionalMaxPool", "flowstack")(_fractional("FractionalMaxPoolGrad"))
reg("FractionalAvgPool", "flowstack")(_fractional("FractionalAvgPoolGrad"))
