"""Stride-1 convolutions as one matmul per kernel tap (``tap_products``): planar and channels-last,
against a direct sum over the taps, and the rule that sends a convolution there."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from edge_runtime.kernels import tap_products
from tests.edge_runtime.kernel_calls import run_kernel as run

RNG = np.random.default_rng(7)
CASES = [
    # (x shape, w shape, pads, dilations)
    ((2, 3, 7, 9), (4, 3, 3, 3), [1, 1, 1, 1], [1, 1]),
    ((1, 5, 9, 8), (6, 5, 3, 2), [0, 1, 2, 0], [2, 1]),  # asymmetric pads, a dilated axis
    ((2, 4, 12), (3, 4, 5), [2, 2], [1]),  # 1-D
    ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), [1, 0, 1, 0, 1, 1], [1, 1, 2]),  # 3-D
    ((1, 1, 6, 6), (2, 1, 3, 3), [0, 0, 0, 0], [1, 1]),  # one channel, no padding
]


def direct(x, w, b, pads, dilations):
    """sum over taps of the tap's window times its weights, in float64."""
    n_sp = x.ndim - 2
    xpad = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + tuple(zip(pads[:n_sp], pads[n_sp:])))
    out = [p - (k - 1) * d for p, k, d in zip(xpad.shape[2:], w.shape[2:], dilations)]
    y = b.reshape((1, -1) + (1,) * n_sp).astype(np.float64)
    for tap in itertools.product(*(range(k) for k in w.shape[2:])):
        window = tuple(slice(i * d, i * d + o) for i, d, o in zip(tap, dilations, out))
        y = y + np.einsum("nc...,mc->nm...", xpad[(slice(None), slice(None)) + window],
                          w[(slice(None), slice(None)) + tap].astype(np.float64))
    return y


@pytest.fixture
def every_convolution(monkeypatch):
    monkeypatch.setattr(tap_products, "MIN_COLUMN_BYTES", 1)


@pytest.mark.parametrize("x_shape, w_shape, pads, dilations", CASES)
def test_planar_and_channels_last_match_the_direct_sum(every_convolution, x_shape, w_shape, pads, dilations) -> None:
    x, w = RNG.standard_normal(x_shape).astype(np.float32), RNG.standard_normal(w_shape).astype(np.float32)
    b = RNG.standard_normal(w_shape[0]).astype(np.float32)
    want = direct(x, w, b, pads, dilations)
    attrs = {"pads": pads, "dilations": dilations, "kernel_shape": list(w_shape[2:])}
    np.testing.assert_allclose(run("Conv", x, w, b, **attrs), want, rtol=1e-4, atol=1e-4)
    last = lambda a: np.ascontiguousarray(np.moveaxis(a, 1, -1))  # noqa: E731
    y = run("ChannelsLastConv", last(x), last(w), b, domain="flowstack", activation="Relu", activation_params=[],
            group=1, **attrs)
    np.testing.assert_allclose(np.moveaxis(y, -1, 1), np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_a_large_plane_takes_tap_products(monkeypatch) -> None:
    """A U-Net decoder's 3x3 convolution at 128x128 (19 MiB of im2col columns) runs by taps; a
    ResNet-18 layer-1 convolution (7 MiB) keeps its im2col."""
    calls = []
    real = tap_products.planar
    monkeypatch.setattr(tap_products, "planar", lambda *a: calls.append(a) or real(*a))
    x = RNG.standard_normal((1, 32, 128, 128)).astype(np.float32)
    w = RNG.standard_normal((16, 32, 3, 3)).astype(np.float32)
    y = run("Conv", x, w, None, pads=[1, 1, 1, 1])
    assert len(calls) == 1
    np.testing.assert_allclose(y[0, :, 60:64, 60:64], direct(x[:, :, 59:65, 59:65], w, np.zeros(16), [0] * 4, [1, 1])[0],
                               rtol=1e-4, atol=1e-3)
    run("Conv", RNG.standard_normal((1, 64, 56, 56)).astype(np.float32), w.repeat(2, 1).repeat(4, 0), None,
        pads=[1, 1, 1, 1])
    assert len(calls) == 1


@pytest.mark.parametrize(
    "channels, group, strides, taps, length, verdict",
    [
        (32, 1, (1, 1), 9, 128 * 130, True),
        (64, 1, (1, 1), 9, 56 * 58, False),  # 7 MiB of columns: im2col
        (32, 2, (1, 1), 9, 128 * 130, False),  # grouped
        (32, 1, (2, 2), 9, 128 * 130, False),  # strided
        (288, 1, (1, 1), 1, 128 * 128, False),  # 1x1: no taps to shift
    ],
)
def test_rule(channels, group, strides, taps, length, verdict) -> None:
    assert tap_products.fits(channels, group, strides, taps, length, 4) is verdict
