"""Channels-last kernels against the planar ONNX kernels on the same data, transposed."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import sliding_windows
from schemas import ShapeError, TensorType, get_schema, infer_types
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run


def channels_last(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, 1, -1))


CONV_CASES = [
    # (x shape, w shape, attrs)
    ((2, 16, 8, 8), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 16, 8, 8), (32, 16, 3, 3), {"auto_pad": "SAME_UPPER"}),  # few rows: the transposed matmul
    ((40, 3, 9, 7), (4, 3, 3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}),
    ((3, 1, 8, 8), (5, 1, 3, 3), {}),  # one channel: the columns gathered taps first
    ((6, 1, 9, 7), (4, 1, 3, 2), {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [1, 2]}),
    ((1, 1, 4, 4), (3, 1, 3, 3), {"pads": [1, 1, 1, 1]}),  # one channel, few rows
    ((2, 4, 13), (6, 4, 3), {"strides": [2], "pads": [1, 2]}),
    ((2, 3, 5, 6, 4), (2, 3, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1], "dilations": [1, 1, 2]}),
    # 1x1 convolutions, stride 1 and no pads: one matmul over the channels
    ((3, 16, 5, 7), (24, 16, 1, 1), {}),  # 105 rows
    ((1, 24, 3, 5), (40, 24, 1, 1), {"auto_pad": "SAME_UPPER"}),  # few rows: the transposed matmul
    ((2, 12, 1, 1), (6, 12, 1, 1), {}),  # a squeeze-excite plane
    ((2, 4, 13), (6, 4, 1), {"dilations": [3]}),
    ((2, 3, 5, 6, 4), (5, 3, 1, 1, 1), {}),
    # 1x1 with a stride or pads: the windowed path
    ((2, 8, 7, 7), (5, 8, 1, 1), {"strides": [2, 2]}),
    ((2, 8, 5, 5), (5, 8, 1, 1), {"pads": [1, 0, 0, 1]}),
]


def check_against_planar_conv(x, w, b, attrs, activation, params) -> None:
    """ChannelsLastConv on channels-last x and w gives Conv's (or FusedConv's) answer, transposed."""
    if activation:
        want = run("FusedConv", x, w, b, domain=DOMAIN, activation=activation, activation_params=params, **attrs)
    else:
        want = run("Conv", x, w, b, **attrs)
    got = run("ChannelsLastConv", channels_last(x), channels_last(w), b, domain=DOMAIN, activation=activation,
              activation_params=params, **attrs)
    assert got.flags.c_contiguous and got.shape == channels_last(want).shape
    np.testing.assert_allclose(got, channels_last(want), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("chunk_bytes", [None, 1])  # whole batch, or one image a chunk (bias and activation per chunk)
@pytest.mark.parametrize("activation, params", [("", []), ("Relu", []), ("Clip", [-0.5, 0.5])])
@pytest.mark.parametrize("x_shape, w_shape, attrs", CONV_CASES)
def test_channels_last_conv_matches_conv(monkeypatch, x_shape, w_shape, attrs, activation, params, chunk_bytes) -> None:
    if chunk_bytes is not None:
        monkeypatch.setattr(sliding_windows, "COLUMN_CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(x_shape).astype(np.float32), rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    check_against_planar_conv(x, w, b, attrs, activation, params)


def test_channels_last_1x1_conv_reads_a_transposed_view() -> None:
    """A region's first 1x1 convolution reads a Transpose node's output, a view of a planar array."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 20, 9, 11)).astype(np.float32)
    w, b = rng.standard_normal((7, 20, 1, 1)).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    got = run("ChannelsLastConv", np.moveaxis(x, 1, -1), channels_last(w), b, domain=DOMAIN, activation="Relu")
    want = run("FusedConv", x, w, b, domain=DOMAIN, activation="Relu")
    assert got.flags.c_contiguous
    np.testing.assert_allclose(got, channels_last(want), rtol=1e-5, atol=1e-5)


def test_channels_last_conv_refuses_groups_other_than_depthwise() -> None:
    x = np.zeros((1, 4, 4, 4), np.float32)
    with pytest.raises(ValueError, match="group 1 and depthwise .* 4 channels and weights \\(4, 3, 3, 2\\)"):
        run("ChannelsLastConv", x, np.zeros((4, 3, 3, 2), np.float32), None, domain=DOMAIN, group=2)
    with pytest.raises(ValueError, match="group 1 and depthwise"):  # a channel multiplier: 8 filters on 4 channels
        run("ChannelsLastConv", x, np.zeros((8, 3, 3, 1), np.float32), None, domain=DOMAIN, group=4)


DEPTHWISE_CASES = [
    # (x shape, kernel, attrs)
    ((2, 5, 7, 7), (3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 6, 13, 30), (3, 3), {"pads": [1, 1, 1, 1]}),  # rows of 30 outputs: the tiled weights
    ((3, 4, 12, 31), (5, 3), {"strides": [2, 1], "pads": [2, 0, 1, 1], "dilations": [1, 2]}),  # tiled, dilated
    ((1, 6, 13, 11), (3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 3, 14, 15), (3, 3), {"strides": [2, 2], "pads": [0, 1, 1, 0]}),
    ((1, 4, 12, 10), (5, 3), {"strides": [3, 2], "pads": [2, 0, 1, 1], "dilations": [1, 2]}),
    ((1, 3, 9, 9), (3, 3), {"auto_pad": "SAME_UPPER", "dilations": [2, 2]}),
    ((1, 2, 5, 5), (5, 5), {}),  # one output pixel
    ((3, 4, 17), (3,), {"strides": [2], "pads": [1, 1]}),
    ((2, 3, 5, 6, 7), (3, 2, 3), {"strides": [1, 2, 1], "pads": [1, 0, 1, 1, 1, 0], "dilations": [1, 1, 2]}),
]


@pytest.mark.parametrize("chunk_bytes", [None, 1])  # whole images, or one output row a block
@pytest.mark.parametrize("with_bias, activation, params", [(False, "", []), (True, "Clip", [-0.5, 0.5]),
                                                            (True, "Swish", [1.0])])
@pytest.mark.parametrize("x_shape, kernel, attrs", DEPTHWISE_CASES)
def test_channels_last_depthwise_conv_matches_conv(monkeypatch, x_shape, kernel, attrs, with_bias, activation, params,
                                                   chunk_bytes) -> None:
    if chunk_bytes is not None:
        monkeypatch.setattr(sliding_windows, "DEPTHWISE_CHUNK_BYTES", chunk_bytes)
    rng = np.random.default_rng(2)
    c = x_shape[1]
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((c, 1) + kernel).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if with_bias else None
    attrs = {**attrs, "group": c}
    check_against_planar_conv(x, w, b, attrs, activation, params)


@pytest.mark.parametrize("min_width", [1, 10 ** 6])  # every stride-1 row tiled, or none
def test_channels_last_depthwise_either_way_matches_conv(monkeypatch, min_width) -> None:
    monkeypatch.setattr(sliding_windows, "DEPTHWISE_TILED_MIN_WIDTH", min_width)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 7, 9, 8)).astype(np.float32)
    w = rng.standard_normal((7, 1, 3, 3)).astype(np.float32)
    want = run("Conv", x, w, None, group=7, pads=[1, 2, 0, 1])
    got = run("ChannelsLastConv", channels_last(x), channels_last(w), None, domain=DOMAIN, group=7, pads=[1, 2, 0, 1])
    np.testing.assert_allclose(got, channels_last(want), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("x_shape, attrs", [
    ((2, 5, 8, 8), {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ((1, 3, 9, 7), {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1}),
    ((2, 4, 10, 10), {"kernel_shape": [3, 3], "dilations": [2, 1], "auto_pad": "SAME_UPPER"}),
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2]}),
])
def test_channels_last_max_pool_matches_max_pool(x_shape, attrs) -> None:
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = run("MaxPool", x, **attrs)[0]
    got = run("ChannelsLastMaxPool", channels_last(x), domain=DOMAIN, **attrs)
    np.testing.assert_array_equal(got, channels_last(want))


def test_shape_rules_are_the_planar_rules_channels_last() -> None:
    f32 = np.dtype(np.float32)
    conv = get_schema("ChannelsLastConv", DOMAIN)
    [y] = infer_types(conv, [TensorType(f32, (None, 8, 8, 16)), TensorType(f32, (32, 3, 3, 16))],
                      conv.resolve_attrs({"strides": [2, 2], "pads": [1, 1, 1, 1]}))
    assert y == TensorType(f32, (None, 4, 4, 32))
    with pytest.raises(ShapeError, match="channels"):
        infer_types(conv, [TensorType(f32, (1, 8, 8, 16)), TensorType(f32, (32, 3, 3, 8))], conv.resolve_attrs({}))
    with pytest.raises(ShapeError, match="activation 'Mish'"):
        infer_types(conv, [TensorType(f32, (1, 8, 8, 16)), TensorType(f32, (32, 3, 3, 16))],
                    conv.resolve_attrs({"activation": "Mish"}))
    pool = get_schema("ChannelsLastMaxPool", DOMAIN)
    [p] = infer_types(pool, [TensorType(f32, (2, 7, 7, 5))],
                      pool.resolve_attrs({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}))
    assert p == TensorType(f32, (2, 4, 4, 5))
