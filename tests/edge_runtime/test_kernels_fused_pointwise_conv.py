"""FusedPointwiseConv against the 1x1 convolution, its activation and the convolution that reads it,
run one after another: the stride-phase path (strided depthwise) and the fallback (anything else)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import stride_phases
from schemas import ShapeError, TensorType, get_schema, infer_types
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

# (x shape, expanded channels, kernel, conv attrs, takes the phase path)
CASES = [
    ((1, 4, 12, 12), 6, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True),  # as MobileNetV2
    ((2, 3, 13, 11), 5, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True),  # odd sizes, a batch
    ((1, 3, 14, 15), 4, (5, 5), {"strides": [2, 2], "pads": [2, 2, 2, 2]}, True),  # 5x5, as MobileNetV3
    ((1, 3, 10, 9), 4, (3, 5), {"strides": [2, 3], "pads": [0, 1, 2, 2]}, True),  # uneven strides and pads
    ((1, 3, 16, 16), 4, (3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}, True),
    ((1, 3, 17, 16), 4, (3, 3), {"strides": [3, 3], "pads": [1, 1, 1, 1]}, True),
    ((1, 3, 16, 16), 4, (3, 3), {"strides": [1, 2], "pads": [1, 1, 1, 1]}, True),
    ((1, 3, 8, 8), 4, (2, 2), {"strides": [2, 2]}, True),  # no padding, taps in every phase once
    ((1, 8, 30, 30), 200, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, True),  # several column blocks
    ((2, 3, 19, 17), 300, (7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}, True),  # 4 shifts across, blocks
    ((1, 3, 16, 20), 4, (5, 1), {"strides": [2, 2], "pads": [2, 0, 2, 0]}, True),  # one shift: no shifted adds
    ((1, 3, 12, 12), 4, (3, 3), {"pads": [1, 1, 1, 1]}, False),  # stride 1
    ((1, 3, 12, 12), 4, (3, 3), {"strides": [2, 2], "pads": [2, 2, 2, 2], "dilations": [2, 2]}, False),
    ((1, 3, 12, 12), 4, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "group": 1}, False),  # not depthwise
    ((2, 3, 13), 4, (3,), {"strides": [2], "pads": [1, 1]}, False),  # 1-D
    ((1, 3, 12, 12), 4, (5, 5), {"strides": [2, 2], "pads": [1, 1, 1, 1], "kernel_shape": [3, 3]}, False),  # W disagrees
]
ACTIVATIONS = [("", [], "", []), ("Clip", [0.0, 6.0], "Clip", [0.0, 6.0]), ("Relu", [], "HardSigmoid", [0.2, 0.5]),
               ("Sigmoid", [], "", []), ("Clip", [1.0, 6.0], "Relu", [])]  # the last two move 0: padding zeroed


def _unfused(x, w1, b1, w, b, pointwise_activation, pointwise_params, activation, params, attrs):
    e = (run("FusedConv", x, w1, b1, domain=DOMAIN, activation=pointwise_activation,
             activation_params=pointwise_params) if pointwise_activation else run("Conv", x, w1, b1))
    if activation:
        return run("FusedConv", e, w, b, domain=DOMAIN, activation=activation, activation_params=params, **attrs)
    return run("Conv", e, w, b, **attrs)


def _case(x_shape, m, kernel, attrs, seed=0):
    rng = np.random.default_rng(seed)
    attrs = {"group": m, **attrs}
    x = rng.standard_normal(x_shape).astype(np.float32)
    w1 = rng.standard_normal((m, x_shape[1]) + (1,) * len(kernel)).astype(np.float32)
    channels = 1 if attrs["group"] == m else m
    w = rng.standard_normal((m, channels) + kernel).astype(np.float32)
    return x, w1, rng.standard_normal(m).astype(np.float32), w, rng.standard_normal(m).astype(np.float32), attrs


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("pointwise_activation, pointwise_params, activation, params", ACTIVATIONS)
@pytest.mark.parametrize("x_shape, m, kernel, attrs, phases", CASES)
def test_fused_pointwise_conv_matches_the_two_convolutions(x_shape, m, kernel, attrs, phases, pointwise_activation,
                                                           pointwise_params, activation, params, with_bias) -> None:
    x, w1, b1, w, b, attrs = _case(x_shape, m, kernel, attrs)
    if not with_bias:
        b1 = b = None
    want = _unfused(x, w1, b1, w, b, pointwise_activation, pointwise_params, activation, params, attrs)
    got = run("FusedPointwiseConv", x, w1, b1, w, b, domain=DOMAIN, pointwise_activation=pointwise_activation,
              pointwise_activation_params=pointwise_params, activation=activation, activation_params=params, **attrs)
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("min_width", [1, 100])  # every kernel's taps across shifted; none
@pytest.mark.parametrize("x_shape, m, kernel, attrs, phases", [case for case in CASES if case[-1]])
def test_taps_across_copied_or_shifted_give_the_same_convolution(monkeypatch, x_shape, m, kernel, attrs, phases,
                                                                 min_width) -> None:
    monkeypatch.setattr(stride_phases, "SHIFT_ACROSS_MIN_WIDTH", min_width)
    x, w1, b1, w, b, attrs = _case(x_shape, m, kernel, attrs, seed=4)
    want = _unfused(x, w1, b1, w, b, "Relu", [], "Clip", [0.0, 6.0], attrs)
    got = run("FusedPointwiseConv", x, w1, b1, w, b, domain=DOMAIN, pointwise_activation="Relu",
              pointwise_activation_params=[], activation="Clip", activation_params=[0.0, 6.0], **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_the_phase_path_is_taken_exactly_where_it_fits(monkeypatch) -> None:
    calls = []
    original = stride_phases.depthwise_over_phases
    monkeypatch.setattr(stride_phases, "depthwise_over_phases", lambda *a: calls.append(a) or original(*a))
    for x_shape, m, kernel, attrs, phases in CASES:
        calls.clear()
        x, w1, b1, w, b, attrs = _case(x_shape, m, kernel, attrs)
        run("FusedPointwiseConv", x, w1, b1, w, b, domain=DOMAIN, **attrs)
        assert len(calls) == int(phases), (x_shape, attrs)


def test_padding_is_zero_after_an_activation_that_moves_zero() -> None:
    """The 1x1 convolution fills padding positions with act(bias); the depthwise convolution must
    still see zeros there (HardSigmoid(0) = 0.5, a large bias, a window that reads every border)."""
    x, w1, b1, w, b, attrs = _case((1, 2, 9, 9), 3, (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, seed=3)
    b1 = np.full(3, 40.0, np.float32)
    want = _unfused(x, w1, b1, w, b, "HardSigmoid", [0.2, 0.5], "", [], attrs)
    got = run("FusedPointwiseConv", x, w1, b1, w, b, domain=DOMAIN, pointwise_activation="HardSigmoid",
              pointwise_activation_params=[0.2, 0.5], **attrs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_shape_rule_is_the_pointwise_then_the_conv() -> None:
    schema = get_schema("FusedPointwiseConv", DOMAIN)
    f32 = np.dtype(np.float32)
    types = [TensorType(f32, (None, 16, 112, 112)), TensorType(f32, (96, 16, 1, 1)), None,
             TensorType(f32, (96, 1, 3, 3))]
    attrs = {"pads": [1, 1, 1, 1], "strides": [2, 2], "group": 96, "activation": "Clip", "activation_params": [0.0, 6.0]}
    (out,) = infer_types(schema, types, schema.resolve_attrs(attrs))
    assert out.shape == (None, 96, 56, 56) and out.dtype == f32
    with pytest.raises(ShapeError, match="W_pointwise reads 8 channels; X has 16"):
        infer_types(schema, [types[0], TensorType(f32, (96, 8, 1, 1))] + types[2:], schema.resolve_attrs(attrs))
    with pytest.raises(ShapeError, match="W_pointwise must be"):
        infer_types(schema, [types[0], TensorType(f32, (96, 16, 3, 3))] + types[2:], schema.resolve_attrs(attrs))
    with pytest.raises(ShapeError, match="input 3 .W, the windowed convolution's weights. is missing"):
        infer_types(schema, types[:3], schema.resolve_attrs(attrs))
    with pytest.raises(ShapeError, match="its convolution"):
        infer_types(schema, types[:3] + [TensorType(f32, (96, 2, 3, 3))], schema.resolve_attrs(attrs))
    with pytest.raises(ShapeError, match="pointwise_activation 'Gelu' is not one of"):
        infer_types(schema, types, schema.resolve_attrs({**attrs, "pointwise_activation": "Gelu"}))
