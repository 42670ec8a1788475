"""FusedConvPointwise against the convolution, its activation and the 1x1 convolution run one after another."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import sliding_windows
from schemas import ShapeError, TensorType, get_schema, infer_types
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

CASES = [
    # (x shape, w shape, conv attrs, pointwise output channels, takes the wide rows): the first four
    # run as flat im2col (grouped, per image, whole batch, 1-D), the strided and the channels-last
    # ones through the finished convolution
    ((1, 12, 10, 10), (12, 1, 3, 3), {"group": 12, "pads": [1, 1, 1, 1]}, 4, True),  # depthwise, as MobileNetV2
    ((3, 4, 9, 9), (5, 4, 3, 3), {"pads": [1, 0, 2, 1]}, 7, True),
    ((1, 4, 9, 11), (6, 4, 3, 3), {"pads": [1, 1, 1, 1], "dilations": [1, 2]}, 3, True),
    ((2, 3, 13), (4, 3, 3), {"pads": [1, 1]}, 2, True),
    ((2, 6, 10, 10), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}, 5, False),
    ((8, 16, 8, 8), (64, 16, 3, 3), {"pads": [1, 1, 1, 1]}, 8, False),
]
ACTIVATIONS = [("", []), ("Relu", []), ("Clip", [0.0, 6.0]), ("HardSigmoid", [0.2, 0.5])]


def _unfused(x, w, b, attrs, w2, b2, activation, params, pointwise_activation, pointwise_params):
    y = (run("FusedConv", x, w, b, domain=DOMAIN, activation=activation, activation_params=params, **attrs)
         if activation else run("Conv", x, w, b, **attrs))
    if pointwise_activation:
        return run("FusedConv", y, w2, b2, domain=DOMAIN, activation=pointwise_activation,
                   activation_params=pointwise_params)
    return run("Conv", y, w2, b2)


@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("activation, params", ACTIVATIONS)
@pytest.mark.parametrize("pointwise_activation, pointwise_params", [("", []), ("Relu", [])])
@pytest.mark.parametrize("x_shape, w_shape, attrs, m2, wide", CASES)
def test_fused_conv_pointwise_matches_the_two_convolutions(x_shape, w_shape, attrs, m2, wide, activation, params,
                                                           pointwise_activation, pointwise_params, with_bias) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    w2 = rng.standard_normal((m2, w_shape[0]) + (1,) * (len(x_shape) - 2)).astype(np.float32)
    b, b2 = ((rng.standard_normal(w_shape[0]).astype(np.float32), rng.standard_normal(m2).astype(np.float32))
             if with_bias else (None, None))
    want = _unfused(x, w, b, attrs, w2, b2, activation, params, pointwise_activation, pointwise_params)
    got = run("FusedConvPointwise", x, w, b, w2, b2, domain=DOMAIN, activation=activation, activation_params=params,
              pointwise_activation=pointwise_activation, pointwise_activation_params=pointwise_params, **attrs)
    assert got.shape == want.shape and got.dtype == want.dtype and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_the_wide_rows_are_taken_where_flat_im2col_runs(monkeypatch) -> None:
    calls = []
    original = sliding_windows.conv_wide_rows
    monkeypatch.setattr(sliding_windows, "conv_wide_rows", lambda *a: calls.append(a) or original(*a))
    rng = np.random.default_rng(2)
    for x_shape, w_shape, attrs, m2, wide in CASES:
        calls.clear()
        x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
        w2 = rng.standard_normal((m2, w_shape[0]) + (1,) * (len(x_shape) - 2)).astype(np.float32)
        run("FusedConvPointwise", x, w, None, w2, None, domain=DOMAIN, **attrs)
        assert len(calls) == int(wide), x_shape


def test_shape_rule_is_the_conv_then_the_pointwise() -> None:
    schema = get_schema("FusedConvPointwise", DOMAIN)
    f32 = np.dtype(np.float32)
    types = [TensorType(f32, (None, 8, 14, 14)), TensorType(f32, (8, 1, 3, 3)), None, TensorType(f32, (3, 8, 1, 1))]
    attrs = {"pads": [1, 1, 1, 1], "group": 8, "activation": "Clip", "activation_params": [0.0, 6.0]}
    (out,) = infer_types(schema, types, schema.resolve_attrs(attrs))
    assert out.shape == (None, 3, 14, 14)
    with pytest.raises(ShapeError, match="W_pointwise reads 5 channels; the convolution makes 8"):
        infer_types(schema, types[:3] + [TensorType(f32, (3, 5, 1, 1))], schema.resolve_attrs(attrs))
    with pytest.raises(ShapeError, match="W_pointwise must be"):
        infer_types(schema, types[:3] + [TensorType(f32, (3, 8, 3, 3))], schema.resolve_attrs(attrs))
    with pytest.raises(ShapeError, match="W_pointwise, the 1x1 convolution's weights"):
        infer_types(schema, types[:3], schema.resolve_attrs(attrs))
    with pytest.raises(ShapeError, match="pointwise_activation 'Gelu' is not one of"):
        infer_types(schema, types, schema.resolve_attrs({**attrs, "pointwise_activation": "Gelu"}))
