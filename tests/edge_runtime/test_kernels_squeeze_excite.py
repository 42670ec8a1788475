"""SqueezeExciteConv against ReduceMean, the gate's two 1x1 convolutions, Mul and the projection run
one after another: planar and channels-last, the gates scaling the weights (fewer output channels
than pixels) or the input (not), batches, float64, no biases; and its shape rule."""

from __future__ import annotations

import numpy as np
import pytest

from schemas import ShapeError, TensorType, get_schema, infer_types
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run

ACTS = {"reduce_activation": "Swish", "reduce_activation_params": [1.0], "gate_activation": "Sigmoid",
        "gate_activation_params": []}


def _conv(x, w, b, activation, params, channels_last):
    if channels_last:
        return run("ChannelsLastConv", x, w, b, domain=DOMAIN, activation=activation, activation_params=params,
                   kernel_shape=list(w.shape[1:-1]))
    if activation:
        return run("FusedConv", x, w, b, domain=DOMAIN, activation=activation, activation_params=params)
    return run("Conv", x, w, b)


def _unfused(x, weights, attrs, channels_last):
    w_reduce, b_reduce, w_expand, b_expand, w, b = weights
    rank = x.ndim
    axes = np.arange(1, rank - 1) if channels_last else np.arange(2, rank)
    s = run("ReduceMean", x, axes, keepdims=1)
    r = _conv(s, w_reduce, b_reduce, attrs["reduce_activation"], attrs["reduce_activation_params"], channels_last)
    g = _conv(r, w_expand, b_expand, attrs["gate_activation"], attrs["gate_activation_params"], channels_last)
    if channels_last:  # the projection's (C, M) weights as ChannelsLastConv's (M, 1..., C)
        w = np.ascontiguousarray(w.T).reshape((w.shape[1],) + (1,) * (rank - 2) + (w.shape[0],))
    return _conv(x * g, w, b, attrs.get("activation", ""), attrs.get("activation_params", []), channels_last)


def _weights(c, r, m, rank, channels_last, dtype, bias, rng):
    ones = (1,) * (rank - 2)

    def conv_w(out, into):
        return rng.standard_normal((out,) + ones + (into,) if channels_last else (out, into) + ones).astype(dtype)

    def b(n):
        return rng.standard_normal(n).astype(dtype) if bias else None

    projection = rng.standard_normal((c, m)).astype(dtype) if channels_last else conv_w(m, c)  # (C, M) channels-last
    return conv_w(r, c), b(r), conv_w(c, r), b(c), projection, b(m)


# (planar x shape, reduced channels, output channels): the gates scale the weights when the output
# channels are fewer than the plane's pixels, else the input
CASES = [
    ((1, 8, 6, 5), 2, 4),  # weights scaled
    ((1, 8, 3, 3), 2, 12),  # input scaled
    ((3, 6, 5, 4), 3, 5),  # a batch, weights scaled per image
    ((2, 6, 2, 3), 3, 7),  # a batch, input scaled
    ((2, 5, 9), 2, 3),  # 1-D
    ((1, 4, 3, 4, 2), 2, 3),  # 3-D
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("shape, r, m", CASES)
def test_squeeze_excite_conv_matches_the_chain(shape, r, m, channels_last, bias, dtype) -> None:
    rng = np.random.default_rng(len(shape) * 10 + m)
    x = rng.standard_normal(shape).astype(dtype)
    if channels_last:
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    weights = _weights(shape[1], r, m, len(shape), channels_last, dtype, bias, rng)
    attrs = {**ACTS, "activation": "Relu", "activation_params": []}
    got = run("SqueezeExciteConv", x, *weights, domain=DOMAIN, channels_last=int(channels_last), **attrs)
    want = _unfused(x, weights, attrs, channels_last)
    assert got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels_last", [False, True])
def test_no_activations_and_an_empty_batch(channels_last) -> None:
    rng = np.random.default_rng(1)
    weights = _weights(6, 2, 3, 4, channels_last, np.float32, True, rng)
    x = rng.standard_normal((2, 5, 5, 6) if channels_last else (2, 6, 5, 5)).astype(np.float32)
    got = run("SqueezeExciteConv", x, *weights, domain=DOMAIN, channels_last=int(channels_last))
    np.testing.assert_allclose(got, _unfused(x, weights, {k: "" if isinstance(v, str) else [] for k, v in ACTS.items()},
                                             channels_last), rtol=1e-5, atol=1e-5)
    empty = run("SqueezeExciteConv", x[:0], *weights, domain=DOMAIN, channels_last=int(channels_last))
    assert empty.shape == ((0, 5, 5, 3) if channels_last else (0, 3, 5, 5))


def _infer(x_shape, shapes, channels_last=0, **attrs):
    schema = get_schema("SqueezeExciteConv", DOMAIN)
    f32 = np.dtype(np.float32)
    types = [TensorType(f32, x_shape)] + [TensorType(f32, s) for s in shapes]
    return infer_types(schema, types, schema.resolve_attrs({"channels_last": channels_last, **attrs}))


def test_shape_rule() -> None:
    planar = [(2, 8, 1, 1), (2,), (8, 2, 1, 1), (8,), (5, 8, 1, 1), (5,)]
    assert _infer((None, 8, 7, 7), planar)[0].shape == (None, 5, 7, 7)
    last = [(2, 1, 1, 8), (2,), (8, 1, 1, 2), (8,), (8, 5), (5,)]
    assert _infer((1, 7, 7, 8), last, channels_last=1)[0].shape == (1, 7, 7, 5)
    with pytest.raises(ShapeError, match="W_expand makes 6 channels where X has 8"):
        _infer((1, 8, 7, 7), [(2, 8, 1, 1), (2,), (6, 2, 1, 1), (6,), (5, 8, 1, 1)])
    with pytest.raises(ShapeError, match="W_reduce reads 4 channels where there are 8"):
        _infer((1, 8, 7, 7), [(2, 4, 1, 1), (2,), (8, 2, 1, 1), (8,), (5, 8, 1, 1)])
    with pytest.raises(ShapeError, match=r"W must be a 1x1 convolution's weights \(M, C, 1...\)"):
        _infer((1, 8, 7, 7), [(2, 8, 1, 1), (2,), (8, 2, 1, 1), (8,), (5, 8, 3, 3)])
    with pytest.raises(ShapeError, match=r"W must be the projection's \(C, M\) matrix"):
        _infer((1, 7, 7, 8), last[:4] + [(5, 1, 1, 8)], channels_last=1)
    with pytest.raises(ShapeError, match="W reads 6 channels where there are 8"):
        _infer((1, 7, 7, 8), last[:4] + [(6, 5)], channels_last=1)
    with pytest.raises(ShapeError, match="gate_activation 'Gelu' is not one of"):
        _infer((1, 8, 7, 7), planar, gate_activation="Gelu")
