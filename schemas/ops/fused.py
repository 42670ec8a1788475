"""Fused ops (domain ``flowstack``): a linear op and the activation that follows it, in one node.

The exporter's ``fuse_activation`` pass produces them; the edge runtime runs the linear op's
kernel and applies the activation in place on its fresh output, saving one pass over memory and
one intermediate. ``activation`` is the ONNX name of the activation op, ``activation_params``
its parameters in the order of ``ACTIVATIONS`` (``Clip`` bounds it lacks are -inf / +inf), so
writing the node back out as two standard ONNX ops is mechanical.
"""

from __future__ import annotations

from schemas.ops import math, nn  # noqa: F401  (Conv and Gemm are declared first; their attrs are reused)
from schemas.registry import REQUIRED, Attr, get_schema, op

DOMAIN = "flowstack"

# Activation name -> names of its parameters, in activation_params order.
ACTIVATIONS: dict[str, tuple[str, ...]] = {
    "Relu": (),
    "LeakyRelu": ("alpha",),
    "Clip": ("min", "max"),
    "Sigmoid": (),
    "Tanh": (),
    "HardSigmoid": ("alpha", "beta"),
}

_ACTIVATION_ATTRS = {"activation": Attr("string", REQUIRED), "activation_params": Attr("floats", [])}


def check_activation(ctx) -> None:
    """The ``activation`` and ``activation_params`` attributes name a known activation and its parameters."""
    name = ctx.attrs["activation"]
    if name not in ACTIVATIONS:
        raise ctx.fail(f"activation {name!r} is not one of {sorted(ACTIVATIONS)}")
    params = list(ctx.attrs["activation_params"] or [])
    if len(params) != len(ACTIVATIONS[name]):
        raise ctx.fail(f"activation {name} takes parameters {list(ACTIVATIONS[name])}, got {params}")


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
