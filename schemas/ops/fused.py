"""Fused ops (domain ``flowstack``): a linear op and the activation that follows it, in one node.

The exporter's ``fuse_activation`` pass produces them; the edge runtime runs the linear op's
kernel and applies the activation in place on its fresh output, saving one pass over memory and
one intermediate. ``FusedConvMaxPool`` (from the ``fuse_max_pool`` pass) adds the max pool that
reads the activation, ``FusedConvPointwise`` (from the ``fuse_pointwise`` pass) the 1x1 convolution
that reads it, ``FusedPointwiseConv`` (from the ``fuse_pointwise_strided`` pass) the 1x1 convolution
that feeds it, ``FusedMatMul`` (from the ``pointwise_to_matmul`` pass) a channels-last 1x1 convolution
as a product over the last axis. ``activation`` is the ONNX name of the activation op, ``activation_params``
its parameters in the order of ``ACTIVATIONS`` (``Clip`` bounds it lacks are -inf / +inf), so
writing the node back out as two standard ONNX ops is mechanical.
"""

from __future__ import annotations

from schemas.ops import math, nn  # noqa: F401  (Conv and Gemm are declared first; their attrs are reused)
from schemas.registry import REQUIRED, Attr, InferenceContext, ShapeError, TensorType, get_schema, op

DOMAIN = "flowstack"

# Activation name -> names of its parameters, in activation_params order.
ACTIVATIONS: dict[str, tuple[str, ...]] = {
    "Relu": (),
    "LeakyRelu": ("alpha",),
    "Clip": ("min", "max"),
    "Sigmoid": (),
    "Tanh": (),
    "HardSigmoid": ("alpha", "beta"),
    "Swish": ("alpha",),  # x * sigmoid(alpha x): SiLU at alpha 1, EfficientNet's activation
    "HardSwish": (),  # x * HardSigmoid(x) at (1/6, 1/2): MobileNetV3's activation
}

_ACTIVATION_ATTRS = {"activation": Attr("string", REQUIRED), "activation_params": Attr("floats", [])}


def check_activation(ctx, key: str = "activation") -> None:
    """The ``key`` and ``<key>_params`` attributes name a known activation and its parameters."""
    name = ctx.attrs[key]
    if name not in ACTIVATIONS:
        raise ctx.fail(f"{key} {name!r} is not one of {sorted(ACTIVATIONS)}")
    params = list(ctx.attrs[f"{key}_params"] or [])
    if len(params) != len(ACTIVATIONS[name]):
        raise ctx.fail(f"{key} {name} takes parameters {list(ACTIVATIONS[name])}, got {params}")


def _like(base: str):
    """Rule: the base op's rule, after checking the activation attributes."""

    def rule(ctx):
        check_activation(ctx)
        return get_schema(base).infer(ctx)

    return rule


op(
    "FusedConv",
    domain=DOMAIN,
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs={**get_schema("Conv").attrs, **_ACTIVATION_ATTRS},
    doc="Conv followed by an activation.",
)(_like("Conv"))

op(
    "FusedGemm",
    domain=DOMAIN,
    inputs=["A", "B", "C?"],
    outputs=["Y"],
    attrs={**get_schema("Gemm").attrs, **_ACTIVATION_ATTRS},
    doc="Gemm followed by an activation.",
)(_like("Gemm"))


# Attributes of the max pool in FusedConvMaxPool: MaxPool's, under a ``pool_`` prefix; dilations,
# auto_pad, ceil_mode and the indices output are left to a separate MaxPool.
POOL_ATTRS = {
    "pool_kernel_shape": Attr("ints", REQUIRED),
    "pool_strides": Attr("ints"),
    "pool_pads": Attr("ints"),
}


def monotone_activation(name: str, params) -> bool:
    """Whether the activation never decreases, so that it commutes with a max: max(f(a), f(b)) ==
    f(max(a, b)). "" (none) counts as monotone."""
    if name in ("LeakyRelu", "HardSigmoid"):
        return bool(len(params)) and params[0] >= 0  # alpha
    return name in ("", "Relu", "Clip", "Sigmoid", "Tanh")


def _conv_max_pool_rule(ctx):
    if ctx.attrs.get("activation"):
        check_activation(ctx)
    conv = get_schema("Conv").infer(ctx)
    pool = get_schema("MaxPool")
    attrs = {"kernel_shape": ctx.attrs["pool_kernel_shape"], "strides": ctx.attrs.get("pool_strides"),
             "pads": ctx.attrs.get("pool_pads"), "auto_pad": "NOTSET", "dilations": None, "ceil_mode": 0}
    try:
        return pool.infer(InferenceContext(pool, conv, attrs, (), 1, ctx.name))
    except ShapeError as exc:
        raise ctx.fail(f"its max pool: {exc}") from None


op(
    "FusedConvMaxPool",
    domain=DOMAIN,
    inputs=["X", "W", "B?"],
    outputs=["Y"],
    attrs={**get_schema("Conv").attrs, "activation": Attr("string", ""), "activation_params": Attr("floats", []),
           **POOL_ATTRS},
    doc="Conv, an optional activation, then MaxPool (no dilations, no ceil mode, no indices).",
)(_conv_max_pool_rule)


# Attributes of the 1x1 convolution in FusedConvPointwise: its activation only (it has no window).
POINTWISE_ATTRS = {"pointwise_activation": Attr("string", ""), "pointwise_activation_params": Attr("floats", [])}


def _conv_pointwise_rule(ctx):
    for key in ("activation", "pointwise_activation"):
        if ctx.attrs.get(key):
            check_activation(ctx, key)
    if not ctx.has_input(3):
        raise ctx.fail("input 3 (W_pointwise, the 1x1 convolution's weights) is missing")
    conv = get_schema("Conv").infer(ctx)[0]
    w2 = ctx.input(3)
    if w2.shape is not None:
        if len(w2.shape) < 3 or any(d not in (None, 1) for d in w2.shape[2:]):
            raise ctx.fail(f"W_pointwise must be (M, C, 1, ...), got shape {w2.shape}")
        if conv.shape is not None and None not in (w2.shape[1], conv.shape[1]) and w2.shape[1] != conv.shape[1]:
            raise ctx.fail(f"W_pointwise reads {w2.shape[1]} channels; the convolution makes {conv.shape[1]}")
    if conv.shape is None:
        return [conv]
    return [TensorType(conv.dtype, (conv.shape[0], None if w2.shape is None else w2.shape[0]) + tuple(conv.shape[2:]))]


op(
    "FusedConvPointwise",
    domain=DOMAIN,
    inputs=["X", "W", "B?", "W_pointwise", "B_pointwise?"],
    outputs=["Y"],
    attrs={**get_schema("Conv").attrs, "activation": Attr("string", ""), "activation_params": Attr("floats", []),
           **POINTWISE_ATTRS},
    doc="Conv, an optional activation, then a 1x1 Conv (stride 1, no pads, group 1) and its optional activation.",
)(_conv_pointwise_rule)


def _pointwise_conv_rule(ctx):
    """The 1x1 convolution's output type, then the windowed convolution's rule on it."""
    for key in ("pointwise_activation", "activation"):
        if ctx.attrs.get(key):
            check_activation(ctx, key)
    x, w1 = ctx.input(0), ctx.input(1)
    if not ctx.has_input(3):
        raise ctx.fail("input 3 (W, the windowed convolution's weights) is missing")
    if w1.shape is not None:
        if len(w1.shape) < 3 or any(d not in (None, 1) for d in w1.shape[2:]):
            raise ctx.fail(f"W_pointwise must be (M, C, 1, ...), got shape {w1.shape}")
        if x.shape is not None and None not in (w1.shape[1], x.shape[1]) and w1.shape[1] != x.shape[1]:
            raise ctx.fail(f"W_pointwise reads {w1.shape[1]} channels; X has {x.shape[1]}")
    expanded = TensorType(x.dtype, None if x.shape is None else
                          (x.shape[0], None if w1.shape is None else w1.shape[0]) + tuple(x.shape[2:]))
    conv = get_schema("Conv")
    attrs = {k: v for k, v in ctx.attrs.items() if k in conv.attrs}
    try:
        return conv.infer(InferenceContext(conv, [expanded, ctx.input(3), ctx.input(4) if ctx.has_input(4) else None],
                                           attrs, (), 1, ctx.name))
    except ShapeError as exc:
        raise ctx.fail(f"its convolution: {exc}") from None


op(
    "FusedPointwiseConv",
    domain=DOMAIN,
    inputs=["X", "W_pointwise", "B_pointwise?", "W", "B?"],
    outputs=["Y"],
    attrs={**get_schema("Conv").attrs, "activation": Attr("string", ""), "activation_params": Attr("floats", []),
           **POINTWISE_ATTRS},
    doc="A 1x1 Conv (stride 1, no pads, group 1) and its optional activation, then a Conv with the window "
        "attributes and its optional activation.",
)(_pointwise_conv_rule)


def _matmul_rule(ctx):
    """(..., K) times (K, N), plus an (N,) bias: (..., N)."""
    if ctx.attrs.get("activation"):
        check_activation(ctx)
    a, b = ctx.input(0), ctx.input(1)
    if b.shape is not None and len(b.shape) != 2:
        raise ctx.fail(f"B must be a (K, N) matrix, got shape {b.shape}")
    if a.shape is not None and not a.shape:
        raise ctx.fail("A must have at least one axis, got a scalar")
    k, n = (None, None) if b.shape is None else b.shape
    if a.shape is not None and None not in (a.shape[-1], k) and a.shape[-1] != k:
        raise ctx.fail(f"A's last axis has {a.shape[-1]} values; B has {k} rows")
    if ctx.has_input(2):
        bias = ctx.input(2).shape
        if bias is not None and (len(bias) != 1 or (None not in (bias[0], n) and bias[0] != n)):
            raise ctx.fail(f"C must be a bias of B's {n} columns, got shape {bias}")
    return [TensorType(a.dtype, None if a.shape is None else tuple(a.shape[:-1]) + (n,))]


op(
    "FusedMatMul",
    domain=DOMAIN,
    inputs=["A", "B", "C?"],
    outputs=["Y"],
    attrs={"activation": Attr("string", ""), "activation_params": Attr("floats", [])},
    doc="MatMul of A's last axis by the (K, N) matrix B, the bias C added along it, then an optional activation "
        "(a channels-last 1x1 convolution with its weights transposed).",
)(_matmul_rule)
