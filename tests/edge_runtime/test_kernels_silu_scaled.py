"""SiLU from halved weights (``fused.activate_scaled``): every kernel that scales its weights and bias
for it gives, to the bit, the convolution followed by the five-pass Swish; the paths that keep the
weights (weights larger than the output, Swish at another alpha) still match their formula."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import fused
from edge_runtime.kernels.fused import apply_activation, input_scale
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

SILU = {"activation": "Swish", "activation_params": [1.0]}


def _rand(rng, shape, dtype):
    return (rng.standard_normal(shape) * 3).astype(dtype)


def test_only_silu_scales() -> None:
    assert input_scale("Swish", [1.0]) == 0.5
    assert input_scale("Swish", [1.5]) == input_scale("Sigmoid", []) == input_scale("", []) == 1.0


# (x shape, weights shape, conv attributes): 1x1, depthwise stride 1 (flat columns), a strided stem,
# a strided depthwise (channels-last kernel), and a 1x1 convolution of a 1x1 plane (weights kept)
PLANAR = [
    ((1, 6, 9, 8), (10, 6, 1, 1), {}),
    ((2, 8, 11, 9), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ((1, 3, 16, 15), (8, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 8, 10, 10), (8, 1, 5, 5), {"group": 8, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 12, 1, 1), (5, 12, 1, 1), {}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, w_shape, attrs", PLANAR)
def test_fused_conv_silu_is_the_conv_then_swish_to_the_bit(x_shape, w_shape, attrs, dtype) -> None:
    rng = np.random.default_rng(sum(x_shape))
    x, w, b = _rand(rng, x_shape, dtype), _rand(rng, w_shape, dtype), _rand(rng, w_shape[:1], dtype)
    want = apply_activation(run("Conv", x, w, b, **attrs), np, "Swish", [1.0])
    got = run("FusedConv", x, w, b, domain=DOMAIN, **SILU, **attrs)
    np.testing.assert_array_equal(got, want)
    unbiased = run("FusedConv", x, w, None, domain=DOMAIN, **SILU, **attrs)
    np.testing.assert_array_equal(unbiased, apply_activation(run("Conv", x, w, None, **attrs), np, "Swish", [1.0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("x_shape, w_shape, attrs", [
    ((1, 7, 7, 16), (24, 1, 1, 16), {}),  # 1x1 over 49 rows: weights scaled
    ((1, 2, 2, 16), (24, 1, 1, 16), {}),  # 1x1 over 4 rows: fewer rows than channels, weights kept
    ((2, 9, 9, 12), (12, 3, 3, 1), {"group": 12, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 8, 8, 12), (12, 5, 5, 1), {"group": 12, "strides": [2, 2], "pads": [2, 2, 2, 2]}),
    ((2, 6, 6, 16), (8, 3, 3, 16), {"pads": [1, 1, 1, 1]}),  # dense
])
def test_channels_last_silu_is_the_conv_then_swish_to_the_bit(x_shape, w_shape, attrs, dtype) -> None:
    rng = np.random.default_rng(sum(x_shape))
    x, w, b = _rand(rng, x_shape, dtype), _rand(rng, w_shape, dtype), _rand(rng, w_shape[:1], dtype)
    kernel_shape = list(w_shape[1:-1])
    plain = run("ChannelsLastConv", x, w, b, domain=DOMAIN, kernel_shape=kernel_shape, **attrs)
    got = run("ChannelsLastConv", x, w, b, domain=DOMAIN, kernel_shape=kernel_shape, **SILU, **attrs)
    np.testing.assert_array_equal(got, apply_activation(plain, np, "Swish", [1.0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_pointwise_conv_silu_on_both_is_the_unscaled_path_to_the_bit(dtype, monkeypatch) -> None:
    rng = np.random.default_rng(3)
    x, w1, b1 = _rand(rng, (1, 4, 13, 12), dtype), _rand(rng, (10, 4, 1, 1), dtype), _rand(rng, (10,), dtype)
    w, b = _rand(rng, (10, 1, 3, 3), dtype), _rand(rng, (10,), dtype)
    attrs = {"group": 10, "strides": [2, 2], "pads": [1, 1, 1, 1], "pointwise_activation": "Swish",
             "pointwise_activation_params": [1.0], **SILU}
    got = run("FusedPointwiseConv", x, w1, b1, w, b, domain=DOMAIN, **attrs)
    monkeypatch.setattr(fused, "input_scale", lambda activation, params: 1.0)
    np.testing.assert_array_equal(got, run("FusedPointwiseConv", x, w1, b1, w, b, domain=DOMAIN, **attrs))


def test_swish_at_another_alpha_keeps_its_weights() -> None:
    rng = np.random.default_rng(4)
    x, w = _rand(rng, (1, 6, 9, 8), np.float32), _rand(rng, (10, 6, 1, 1), np.float32)
    y = run("Conv", x, w, None).astype(np.float64)
    got = run("FusedConv", x, w, None, domain=DOMAIN, activation="Swish", activation_params=[1.5])
    np.testing.assert_allclose(got, y / (1 + np.exp(-1.5 * y)), rtol=2e-6, atol=1e-5)
