"""Neural-network ops: convolution, pooling, normalization, resampling, attention and losses."""

from __future__ import annotations

import math

import numpy as np

from schemas.ops.rules import BOOL, const_ints, normalize_axis, same_as_input
from schemas.registry import REQUIRED, Attr, TensorType, get_schema, op

INT64 = np.dtype(np.int64)

_WINDOW = {
    "auto_pad": Attr("string", "NOTSET"),
    "dilations": Attr("ints"),
    "pads": Attr("ints"),
    "strides": Attr("ints"),
}


# The attributes of Conv, shared by every op that convolves like it.
CONV_ATTRS = {**_WINDOW, "group": Attr("int", 1), "kernel_shape": Attr("ints")}


def _spatial_out(ctx, spatial, kernel, *, ceil_mode=0):
    """Output spatial dims of a sliding window (conv/pool), None where an input dim is unknown."""
    n = len(kernel)
    a = ctx.attrs
    strides = a.get("strides") or [1] * n
    dilations = a.get("dilations") or [1] * n
    pads = a.get("pads") or [0] * (2 * n)
    auto_pad = a.get("auto_pad", "NOTSET")
    out = []
    for i, size in enumerate(spatial):
        if size is None or kernel[i] is None:
            out.append(None)
            continue
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-size // strides[i]))
            continue
        eff = (kernel[i] - 1) * dilations[i] + 1
        total = size - eff if auto_pad == "VALID" else size + pads[i] + pads[i + n] - eff
        if ceil_mode:
            o = -(-total // strides[i]) + 1
            # the last window must start inside the (left-padded) input
            if (o - 1) * strides[i] >= size + (0 if auto_pad == "VALID" else pads[i]):
                o -= 1
        else:
            o = total // strides[i] + 1
        if o < 1:
            raise ctx.fail(f"window {kernel} does not fit spatial input {tuple(spatial)}")
        out.append(o)
    return out


def _kernel_spatial(ctx, w_shape):
    ks = ctx.attrs.get("kernel_shape")
    if ks:
        return list(ks)
    return None if w_shape is None else list(w_shape[2:])


@op(
    "Conv",
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs=CONV_ATTRS,
    differentiable=True,
)
def conv_output_types(ctx):
    """Conv's shape rule; also the rule of every op shaped like a convolution (ConvInteger, DeformConv, ...)."""
    x, w = ctx.input(0), ctx.input(1)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    if len(x.shape) < 3:
        raise ctx.fail(f"X must be (N, C, spatial...), got shape {x.shape}")
    kernel = _kernel_spatial(ctx, w.shape) or [None] * (len(x.shape) - 2)
    c_out = None if w.shape is None else w.shape[0]
    g = ctx.attrs["group"]
    if w.shape is not None and x.shape[1] is not None and w.shape[1] is not None:
        if x.shape[1] != w.shape[1] * g:
            raise ctx.fail(f"X has {x.shape[1]} channels but W {w.shape} with group={g} expects {w.shape[1] * g}")
    return [TensorType(x.dtype, (x.shape[0], c_out, *_spatial_out(ctx, x.shape[2:], kernel)))]


@op(
    "ConvTranspose",
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs={
        **_WINDOW,
        "group": Attr("int", 1),
        "kernel_shape": Attr("ints"),
        "output_padding": Attr("ints"),
        "output_shape": Attr("ints"),
    },
    differentiable=True,
)
def _conv_transpose(ctx):
    x, w = ctx.input(0), ctx.input(1)
    if x.shape is None:
        return [TensorType(x.dtype, None)]
    n = len(x.shape) - 2
    c_out = None if w.shape is None or w.shape[1] is None else w.shape[1] * ctx.attrs["group"]
    a = ctx.attrs
    if a["output_shape"]:
        return [TensorType(x.dtype, (x.shape[0], c_out, *list(a["output_shape"])[-n:]))]
    kernel = _kernel_spatial(ctx, w.shape) or [None] * n
    strides = a["strides"] or [1] * n
    dil = a["dilations"] or [1] * n
    pads = a["pads"] or [0] * (2 * n)
    opad = a["output_padding"] or [0] * n
    out = []
    for i, size in enumerate(x.shape[2:]):
        if size is None or kernel[i] is None:
            out.append(None)
        elif a["auto_pad"] in ("SAME_UPPER", "SAME_LOWER"):
            out.append(size * strides[i])
        else:
            p = 0 if a["auto_pad"] == "VALID" else pads[i] + pads[i + n]
            out.append(strides[i] * (size - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1 - p)
    return [TensorType(x.dtype, (x.shape[0], c_out, *out))]


def _pool_rule(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [TensorType(x.dtype, None)] + [TensorType(INT64, None)] * (ctx.num_outputs - 1)
    kernel = list(ctx.attrs["kernel_shape"])
    if len(kernel) != len(x.shape) - 2:
        raise ctx.fail(f"kernel_shape {kernel} does not match input rank {len(x.shape)}")
    shape = (*x.shape[:2], *_spatial_out(ctx, x.shape[2:], kernel, ceil_mode=ctx.attrs.get("ceil_mode", 0)))
    return [TensorType(x.dtype, shape), TensorType(INT64, shape)][: ctx.num_outputs]


_POOL = {**_WINDOW, "ceil_mode": Attr("int", 0), "kernel_shape": Attr("ints", REQUIRED)}

op(
    "MaxPool",
    inputs=["X"],
    outputs=["Y", "Indices?"],
    attrs={**_POOL, "storage_order": Attr("int", 0)},
    differentiable=True,
)(_pool_rule)
op(
    "AveragePool",
    inputs=["X"],
    outputs=["Y"],
    attrs={**_POOL, "count_include_pad": Attr("int", 0)},
    differentiable=True,
)(_pool_rule)
op("LpPool", inputs=["X"], outputs=["Y"], attrs={**_POOL, "p": Attr("int", 2)}, differentiable=True)(_pool_rule)


def _global_pool(ctx):
    x = ctx.input(0)
    if x.shape is None:
        return [x]
    return [TensorType(x.dtype, (*x.shape[:2], *[1] * (len(x.shape) - 2)))]


op("GlobalAveragePool", inputs=["X"], outputs=["Y"], differentiable=True)(_global_pool)
op("GlobalMaxPool", inputs=["X"], outputs=["Y"], differentiable=True)(_global_pool)
op("GlobalLpPool", inputs=["X"], outputs=["Y"], attrs={"p": Attr("int", 2)}, differentiable=True)(_global_pool)


@op(
    "MaxUnpool",
    inputs=["X", "I", "output_shape?"],
    outputs=["output"],
    attrs={"kernel_shape": Attr("ints", REQUIRED), "pads": Attr("ints"), "strides": Attr("ints")},
    differentiable=True,
)
def _max_unpool(ctx):
    x = ctx.input(0)
    given = const_ints(ctx, 2)
    if given is not None:
        return [TensorType(x.dtype, tuple(given))]
    if x.shape is None or ctx.has_input(2):
        return [TensorType(x.dtype, None if x.shape is None else (None,) * len(x.shape))]
    k = ctx.attrs["kernel_shape"]
    n = len(k)
    strides = ctx.attrs["strides"] or [1] * n
    pads = ctx.attrs["pads"] or [0] * (2 * n)
    out = [
        None if d is None else (d - 1) * strides[i] + k[i] - pads[i] - pads[i + n]
        for i, d in enumerate(x.shape[2:])
    ]
    return [TensorType(x.dtype, (*x.shape[:2], *out))]


@op(
    "BatchNormalization",
    inputs=["X", "scale", "B", "input_mean", "input_var"],
    outputs=["Y", "running_mean?", "running_var?"],
    attrs={"epsilon": Attr("float", 1e-5), "momentum": Attr("float", 0.9), "training_mode": Attr("int", 0)},
    differentiable=True,
)
def _batch_norm(ctx):
    return [ctx.input(0), ctx.input(3), ctx.input(4)][: ctx.num_outputs]


def _stats_shape(ctx, x, axis):
    if x.shape is None:
        return None
    return tuple(d if i < axis else 1 for i, d in enumerate(x.shape))


_STASH_DTYPES = {1: np.dtype(np.float32), 10: np.dtype(np.float16), 11: np.dtype(np.float64), 16: None}


@op(
    "LayerNormalization",
    inputs=["X", "Scale", "B?"],
    outputs=["Y", "Mean?", "InvStdDev?"],
    attrs={"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5), "stash_type": Attr("int", 1)},
    differentiable=True,
)
def _layer_norm(ctx):
    x = ctx.input(0)
    stats = None
    if x.shape is not None:
        stats = _stats_shape(ctx, x, normalize_axis(ctx, ctx.attrs["axis"], len(x.shape)))
    stash = _STASH_DTYPES.get(ctx.attrs["stash_type"], x.dtype)
    return [x, TensorType(stash, stats), TensorType(stash, stats)][: ctx.num_outputs]


op(
    "InstanceNormalization",
    inputs=["input", "scale", "B"],
    outputs=["output"],
    attrs={"epsilon": Attr("float", 1e-5)},
    differentiable=True,
)(same_as_input(0))
op(
    "GroupNormalization",
    inputs=["X", "scale", "bias"],
    outputs=["Y"],
    attrs={"epsilon": Attr("float", 1e-5), "num_groups": Attr("int", REQUIRED), "stash_type": Attr("int", 1)},
    differentiable=True,
)(same_as_input(0))
op(
    "RMSNormalization",
    inputs=["X", "scale"],
    outputs=["Y"],
    attrs={"axis": Attr("int", -1), "epsilon": Attr("float", 1e-5), "stash_type": Attr("int", 1)},
    differentiable=True,
)(same_as_input(0))
op(
    "LRN",
    inputs=["X"],
    outputs=["Y"],
    attrs={
        "alpha": Attr("float", 1e-4),
        "beta": Attr("float", 0.75),
        "bias": Attr("float", 1.0),
        "size": Attr("int", REQUIRED),
    },
    differentiable=True,
)(same_as_input(0))
op(
    "LpNormalization",
    inputs=["input"],
    outputs=["output"],
    attrs={"axis": Attr("int", -1), "p": Attr("int", 2)},
    differentiable=True,
)(same_as_input(0))
op(
    "MeanVarianceNormalization",
    inputs=["X"],
    outputs=["Y"],
    attrs={"axes": Attr("ints", [0, 2, 3])},
    differentiable=True,
)(same_as_input(0))


@op(
    "Dropout",
    inputs=["data", "ratio?", "training_mode?"],
    outputs=["output", "mask?"],
    attrs={"seed": Attr("int")},
    differentiable=True,
)
def _dropout(ctx):
    x = ctx.input(0)
    return [x, TensorType(BOOL, x.shape)][: ctx.num_outputs]


def scaled_length(length: int, scale: float) -> int:
    """floor(length * scale), the length Resize gives an axis it scales, computed in float32 as
    onnxruntime and ONNX's shape inference do: with scale the float32 0.7, 10 * 0.7 rounds to 7
    there (the 0.7 the exporting framework meant), where float64 gives 6.9999998 and so 6."""
    return math.floor(np.float32(length) * np.float32(scale))


def _resized_shape(ctx, x, scales, sizes, axes):
    if x.shape is None:
        return None
    rank = len(x.shape)
    axes = [normalize_axis(ctx, a, rank) for a in axes] if axes else list(range(rank))
    out = list(x.shape)
    if sizes is not None:
        if ctx.attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            return (None,) * rank
        for a, s in zip(axes, sizes):
            out[a] = int(s)
    elif scales is not None:
        for a, s in zip(axes, scales):
            out[a] = None if out[a] is None else scaled_length(out[a], s)
    else:
        return (None,) * rank
    return tuple(out)


@op(
    "Resize",
    inputs=["X", "roi?", "scales?", "sizes?"],
    outputs=["Y"],
    attrs={
        "antialias": Attr("int", 0),
        "axes": Attr("ints"),
        "coordinate_transformation_mode": Attr("string", "half_pixel"),
        "cubic_coeff_a": Attr("float", -0.75),
        "exclude_outside": Attr("int", 0),
        "extrapolation_value": Attr("float", 0.0),
        "keep_aspect_ratio_policy": Attr("string", "stretch"),
        "mode": Attr("string", "nearest"),
        "nearest_mode": Attr("string", "round_prefer_floor"),
    },
    differentiable=True,
)
def _resize(ctx):
    x = ctx.input(0)
    scales = ctx.value(2)
    sizes = ctx.value(3)
    if scales is not None and np.asarray(scales).size == 0:
        scales = None
    if sizes is not None and np.asarray(sizes).size == 0:
        sizes = None
    return [TensorType(x.dtype, _resized_shape(ctx, x, scales, sizes, ctx.attrs["axes"]))]


@op("Upsample", inputs=["X", "scales"], outputs=["Y"], attrs={"mode": Attr("string", "nearest")}, differentiable=True)
def _upsample(ctx):
    x = ctx.input(0)
    return [TensorType(x.dtype, _resized_shape(ctx, x, ctx.value(1), None, None))]


def _block_rule(to_space):
    def rule(ctx):
        x = ctx.input(0)
        if x.shape is None:
            return [x]
        if len(x.shape) != 4:
            raise ctx.fail(f"input must be 4-D (N, C, H, W), got shape {x.shape}")
        b = ctx.attrs["blocksize"]
        n, c, h, w = x.shape
        if to_space:
            if c is not None and c % (b * b):
                raise ctx.fail(f"channels {c} are not divisible by blocksize**2 = {b * b}")
            shape = (n, None if c is None else c // (b * b), None if h is None else h * b, None if w is None else w * b)
        else:
            for d in (h, w):
                if d is not None and d % b:
                    raise ctx.fail(f"spatial dims {(h, w)} are not divisible by blocksize {b}")
            shape = (n, None if c is None else c * b * b, None if h is None else h // b, None if w is None else w // b)
        return [TensorType(x.dtype, shape)]

    return rule


_BLOCK = {"blocksize": Attr("int", REQUIRED), "mode": Attr("string", "DCR")}
op("DepthToSpace", inputs=["input"], outputs=["output"], attrs=_BLOCK, differentiable=True)(_block_rule(True))
op("SpaceToDepth", inputs=["input"], outputs=["output"], attrs=_BLOCK, differentiable=True)(_block_rule(False))


@op(
    "Col2Im",
    inputs=["input", "image_shape", "block_shape"],
    outputs=["output"],
    attrs={"dilations": Attr("ints"), "pads": Attr("ints"), "strides": Attr("ints")},
    differentiable=True,
)
def _col2im(ctx):
    x = ctx.input(0)
    image, block = const_ints(ctx, 1), const_ints(ctx, 2)
    if x.shape is None or image is None or block is None:
        return [TensorType(x.dtype, None)]
    c = None if x.shape[1] is None else x.shape[1] // int(np.prod(block))
    return [TensorType(x.dtype, (x.shape[0], c, *image))]


CAUSAL_CONV_ACTIVATIONS = ("none", "silu", "swish")


@op(
    "CausalConvWithState",
    inputs=["input", "weight", "bias?", "past_state?"],
    outputs=["output", "present_state"],
    attrs={"activation": Attr("string", "none")},
    differentiable=True,
)
def _causal_conv_with_state(ctx):
    """Depthwise causal 1-D conv over (N, C, L) with a carried (N, C, k-1) state (opset 27)."""
    x, w = ctx.input(0), ctx.input(1)
    if ctx.attrs["activation"] not in CAUSAL_CONV_ACTIVATIONS:
        raise ctx.fail(f"activation must be one of {CAUSAL_CONV_ACTIVATIONS}, got {ctx.attrs['activation']!r}")
    for name, t in (("input", x), ("weight", w)):
        if t.shape is not None and len(t.shape) != 3:
            raise ctx.fail(f"{name} must be rank 3, got shape {t.shape}")
    if w.shape is not None and w.shape[1] not in (None, 1):
        raise ctx.fail(f"weight must be (channels, 1, k) for a depthwise conv, got shape {w.shape}")
    if x.shape is not None and w.shape is not None and None not in (x.shape[1], w.shape[0]) and x.shape[1] != w.shape[0]:
        raise ctx.fail(f"input has {x.shape[1]} channels but weight {w.shape} has {w.shape[0]}")
    k = None if w.shape is None else w.shape[2]
    n, c = (None, None) if x.shape is None else x.shape[:2]
    state = (n, c, None if k is None else k - 1)
    return [TensorType(x.dtype, x.shape), TensorType(x.dtype, state)]


@op(
    "GridSample",
    inputs=["X", "grid"],
    outputs=["Y"],
    attrs={
        "align_corners": Attr("int", 0),
        "mode": Attr("string", "linear"),
        "padding_mode": Attr("string", "zeros"),
    },
    differentiable=True,
)
def _grid_sample(ctx):
    x, grid = ctx.input(0), ctx.input(1)
    if x.shape is None or grid.shape is None:
        return [TensorType(x.dtype, None)]
    return [TensorType(x.dtype, (x.shape[0], x.shape[1], *grid.shape[1:-1]))]


@op("AffineGrid", inputs=["theta", "size"], outputs=["grid"], attrs={"align_corners": Attr("int", 0)}, differentiable=True)
def _affine_grid(ctx):
    theta = ctx.input(0)
    size = const_ints(ctx, 1)
    if size is None:
        return [TensorType(theta.dtype, None)]
    return [TensorType(theta.dtype, (size[0], *size[2:], len(size) - 2))]


@op(
    "Attention",
    inputs=["Q", "K", "V", "attn_mask?", "past_key?", "past_value?", "nonpad_kv_seqlen?"],
    outputs=["Y", "present_key?", "present_value?", "qk_matmul_output?"],
    attrs={
        "is_causal": Attr("int", 0),
        "kv_num_heads": Attr("int"),
        "left_window_size": Attr("int", -1),
        "q_num_heads": Attr("int"),
        "qk_matmul_output_mode": Attr("int", 0),
        "scale": Attr("float"),
        "right_window_size": Attr("int", -1),
        "softcap": Attr("float", 0.0),
        "softmax_precision": Attr("int"),
    },
    differentiable=True,
)
def _attention(ctx):
    q, v = ctx.input(0), ctx.input(2)
    y = TensorType(q.dtype, None)
    if q.shape is not None and v.shape is not None and len(q.shape) == len(v.shape):
        if len(q.shape) == 4:
            y = TensorType(q.dtype, (q.shape[0], q.shape[1], q.shape[2], v.shape[3]))
        elif len(q.shape) == 3 and ctx.attrs["kv_num_heads"] and v.shape[2] is not None:
            hv = v.shape[2] // ctx.attrs["kv_num_heads"]
            y = TensorType(q.dtype, (q.shape[0], q.shape[1], None if not ctx.attrs["q_num_heads"] else hv * ctx.attrs["q_num_heads"]))
    rest = [TensorType(q.dtype, None)] * 3
    return [y, *rest][: ctx.num_outputs]


# LinearAttention's update rules -> (decays the state by exp(decay), corrects by beta * (v - Sᵀk)).
LINEAR_ATTENTION_RULES = {
    "linear": (False, False),
    "gated": (True, False),
    "delta": (False, True),
    "gated_delta": (True, True),
}


@op(
    "LinearAttention",
    inputs=["query", "key", "value", "past_state?", "decay?", "beta?"],
    outputs=["output", "present_state"],
    attrs={
        "chunk_size": Attr("int", 64),
        "kv_num_heads": Attr("int", REQUIRED),
        "q_num_heads": Attr("int", REQUIRED),
        "scale": Attr("float", 0.0),
        "update_rule": Attr("string", "gated_delta"),
    },
)
def _linear_attention(ctx):
    """Recurrent linear attention over packed (B, T, H * D) heads with a (B, H_kv, d_k, d_v) state (opset 27)."""
    rule, hq, hkv = ctx.attrs["update_rule"], ctx.attrs["q_num_heads"], ctx.attrs["kv_num_heads"]
    if rule not in LINEAR_ATTENTION_RULES:
        raise ctx.fail(f"update_rule must be one of {tuple(LINEAR_ATTENTION_RULES)}, got {rule!r}")
    if hq <= 0 or hkv <= 0 or hq % hkv:
        raise ctx.fail(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")
    for index, name in ((4, "decay"), (5, "beta")):
        needed = LINEAR_ATTENTION_RULES[rule][index - 4]
        if needed != ctx.has_input(index):
            raise ctx.fail(f"update_rule {rule!r} {'requires' if needed else 'takes no'} {name} input")
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.shape is not None and len(t.shape) != 3:
            raise ctx.fail(f"{name} must be rank 3 (B, T, H * D), got shape {t.shape}")
    d_k = None if q.shape is None or q.shape[2] is None else q.shape[2] // hq
    d_v = None if v.shape is None or v.shape[2] is None else v.shape[2] // hkv
    batch, steps = (None, None) if q.shape is None else q.shape[:2]
    state_dtype = ctx.input(3).dtype if ctx.has_input(3) else q.dtype
    return [TensorType(q.dtype, (batch, steps, None if d_v is None else hq * d_v)),
            TensorType(state_dtype, (batch, hkv, d_k, d_v))]


@op(
    "FlexAttention",
    domain="ai.onnx.preview",
    inputs=["Q", "K", "V"],
    outputs=["Y"],
    attrs={
        "prob_mod": Attr("graph"),
        "scale": Attr("float"),
        "score_mod": Attr("graph"),
        "softmax_precision": Attr("int"),
    },
)
def _flex_attention(ctx):
    """softmax(score_mod(Q Kᵀ * scale)) then prob_mod, times V, over rank-4 heads (ai.onnx.preview 1)."""
    q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
    for name, t in (("Q", q), ("K", k), ("V", v)):
        if t.shape is not None and len(t.shape) != 4:
            raise ctx.fail(f"{name} must be rank 4 (batch, heads, sequence, head size), got shape {t.shape}")
    if q.shape is None or v.shape is None:
        return [TensorType(q.dtype, None)]
    return [TensorType(q.dtype, (*q.shape[:3], v.shape[3]))]


@op(
    "RotaryEmbedding",
    inputs=["X", "cos_cache", "sin_cache", "position_ids?"],
    outputs=["Y"],
    attrs={"interleaved": Attr("int", 0), "num_heads": Attr("int"), "rotary_embedding_dim": Attr("int", 0)},
    differentiable=True,
)
def _rotary(ctx):
    return [ctx.input(0)]


def _loss_shape(ctx, target_shape):
    if ctx.attrs["reduction"] == "none":
        return target_shape
    return ()


@op(
    "SoftmaxCrossEntropyLoss",
    inputs=["scores", "labels", "weights?"],
    outputs=["output", "log_prob?"],
    attrs={"ignore_index": Attr("int"), "reduction": Attr("string", "mean")},
    differentiable=True,
)
def _softmax_ce(ctx):
    scores, labels = ctx.input(0), ctx.input(1)
    return [TensorType(scores.dtype, _loss_shape(ctx, labels.shape)), scores][: ctx.num_outputs]


@op(
    "NegativeLogLikelihoodLoss",
    inputs=["input", "target", "weight?"],
    outputs=["loss"],
    attrs={"ignore_index": Attr("int"), "reduction": Attr("string", "mean")},
    differentiable=True,
)
def _nll(ctx):
    x, target = ctx.input(0), ctx.input(1)
    return [TensorType(x.dtype, _loss_shape(ctx, target.shape))]


# -- flowstack ops: gradient helpers, batch normalization with batch statistics -------------------
D = "flowstack"

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


op("ResizeGrad", domain=D, inputs=["dY", "X", "roi?", "scales?", "sizes?"], outputs=["dX"],
   attrs=get_schema("Resize").attrs,
   doc="Gradient of Resize with respect to X: the transpose of its per-axis interpolation (X supplies the shape).")(
    same_as_input(1))


@op("GridSampleGrad", domain=D, inputs=["dY", "X", "grid"], outputs=["dX", "dgrid"],
    attrs=get_schema("GridSample").attrs, doc="Gradients of GridSample with respect to X and the grid.")
def _grid_sample_grad(ctx):
    return [ctx.input(1), ctx.input(2)]


@op("AttentionGrad", domain=D,
    inputs=["dY", "dpresent_key?", "dpresent_value?", "dqk_matmul_output?", "Q", "K", "V", "attn_mask?",
            "past_key?", "past_value?", "nonpad_kv_seqlen?"],
    outputs=["dQ", "dK", "dV", "dattn_mask?", "dpast_key?", "dpast_value?"],
    attrs=get_schema("Attention").attrs,
    doc="Gradients of Attention with respect to Q, K, V, a float attn_mask and the past key/value cache "
        "(None where that input is absent or a boolean mask).")
def _attention_grad(ctx):
    return [ctx.input(i) for i in range(4, 10)][: ctx.num_outputs]


def _time_major_input(ctx):
    """Input 0 of a CTC op, [max_time, batch, classes], and its batch size (None where unknown)."""
    x = ctx.input(0)
    if x.shape is None:
        return x, None
    if len(x.shape) != 3:
        raise ctx.fail(f"input must be [max_time, batch, classes], got shape {x.shape}")
    return x, x.shape[1]


@op("CTCLoss", domain=D, inputs=["logits", "labels_indices", "labels_values", "sequence_length"],
    outputs=["loss", "gradient"],
    attrs={"preprocess_collapse_repeated": Attr("int", 0), "ctc_merge_repeated": Attr("int", 1),
           "ignore_longer_outputs_than_inputs": Attr("int", 0)},
    differentiable=True,
    doc="TensorFlow's CTCLoss: time-major logits [T, B, C] (blank = C - 1), sparse labels (indices [N, 2], "
        "values [N]); the per-example loss [B] and its gradient with respect to the logits.")
def _ctc_loss(ctx):
    logits, batch = _time_major_input(ctx)
    return [TensorType(logits.dtype, (batch,)), logits]



@op("CTCGreedyDecoder", domain=D, inputs=["inputs", "sequence_length"],
    outputs=["decoded_indices", "decoded_values", "decoded_shape", "log_probability"],
    attrs={"merge_repeated": Attr("int", 1)},
    doc="TensorFlow's CTCGreedyDecoder: the most likely class per frame of time-major inputs [T, B, C], "
        "repeats merged and blanks (C - 1) removed, as a sparse [B, max length] tensor; log_probability [B, 1] "
        "is minus the sum of each frame's largest logit.")
def _ctc_greedy_decoder(ctx):
    x, batch = _time_major_input(ctx)
    return [TensorType(INT64, (None, 2)), TensorType(INT64, (None,)), TensorType(INT64, (2,)),
            TensorType(x.dtype, (batch, 1))]


@op("CTCBeamSearchDecoder", domain=D, inputs=["inputs", "sequence_length"],
    outputs=["decoded_indices", "decoded_values", "decoded_shapes", "log_probability"],
    attrs={"beam_width": Attr("int", 100), "top_paths": Attr("int", 1), "merge_repeated": Attr("int", 1)},
    doc="TensorFlow's CTCBeamSearchDecoder: the top_paths most likely labelings of time-major inputs [T, B, C] "
        "(blank = C - 1) by prefix beam search, as one sparse tensor of indices [N, 3] (path, batch, position), "
        "values [N] and each path's dense shape [top_paths, 2]; log_probability [B, top_paths].")
def _ctc_beam_search_decoder(ctx):
    x, batch = _time_major_input(ctx)
    paths = ctx.attrs["top_paths"]
    return [TensorType(INT64, (None, 3)), TensorType(INT64, (None,)), TensorType(INT64, (paths, 2)),
            TensorType(x.dtype, (batch, paths))]


# -- TF's fractional pooling (Graham 2014): random pooling regions, the sequences returned ---------
_FRACTIONAL_ATTRS = {"pooling_ratio": Attr("floats", REQUIRED), "pseudo_random": Attr("int", 0),
                     "overlapping": Attr("int", 0), "deterministic": Attr("int", 0), "seed": Attr("int", 0),
                     "seed2": Attr("int", 0), "stream": Attr("string", "")}


def _fractional_pool(ctx):
    x = ctx.input(0)
    ratio = list(ctx.attrs["pooling_ratio"])
    if len(ratio) != 4 or ratio[0] != 1.0 or ratio[3] != 1.0 or min(ratio) < 1.0:
        raise ctx.fail(f"pooling_ratio must be [1.0, row_ratio, col_ratio, 1.0] with ratios >= 1, got {ratio}")
    if x.shape is not None and len(x.shape) != 4:
        raise ctx.fail(f"value must be 4-D [batch, height, width, channels], got shape {x.shape}")
    dims = x.shape or (None,) * 4
    out = tuple(None if d is None else int(math.floor(d / r)) for d, r in zip(dims, ratio))
    if any(d is not None and d <= 0 for d in out):
        raise ctx.fail(f"pooling_ratio {ratio} leaves no output for an input of shape {x.shape}")
    int64 = np.dtype(np.int64)
    return [TensorType(x.dtype, out), TensorType(int64, (None if out[1] is None else out[1] + 1,)),
            TensorType(int64, (None if out[2] is None else out[2] + 1,))]


op("FractionalMaxPool", domain=D, inputs=["value"], outputs=["output", "row_pooling_sequence",
                                                             "col_pooling_sequence"],
   attrs=_FRACTIONAL_ATTRS, stateful=True, differentiable=True,
   doc="Max over random regions of floor(in / ratio) rows and columns (TF's): the output and the "
       "cumulative row and column boundaries drawn this run (the same ones every run when deterministic).")(
    _fractional_pool)
op("FractionalAvgPool", domain=D, inputs=["value"], outputs=["output", "row_pooling_sequence",
                                                             "col_pooling_sequence"],
   attrs=_FRACTIONAL_ATTRS, stateful=True, differentiable=True,
   doc="FractionalMaxPool's regions, averaged.")(_fractional_pool)
op("FractionalMaxPoolGrad", domain=D, inputs=["orig_input", "out_backprop", "row_pooling_sequence",
                                              "col_pooling_sequence"], outputs=["dX"],
   attrs={"overlapping": Attr("int", 0)},
   doc="Each region's gradient to the first position holding its max.")(same_as_input(0))
op("FractionalAvgPoolGrad", domain=D, inputs=["orig_input", "out_backprop", "row_pooling_sequence",
                                              "col_pooling_sequence"], outputs=["dX"],
   attrs={"overlapping": Attr("int", 0)},
   doc="Each region's gradient spread evenly over it.")(same_as_input(0))
