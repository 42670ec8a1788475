"""Strided planar convolutions over stride phases (``phase_columns``) against a direct sum over the
taps, whole and a few output rows at a time, and the rule that sends a convolution there."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from edge_runtime.kernels import phase_columns, sliding_windows
from tests.edge_runtime.kernel_calls import run_kernel as run

RNG = np.random.default_rng(11)
CASES = [
    # (x shape, w shape, strides, pads)
    ((2, 3, 13, 12), (4, 3, 3, 3), [2, 2], [1, 1, 1, 1]),
    ((1, 2, 16, 17), (3, 2, 7, 7), [2, 2], [3, 3, 3, 3]),  # a ResNet-style stem
    ((1, 4, 12, 9), (5, 4, 3, 1), [2, 1], [0, 1, 2, 0]),  # one axis strided, asymmetric pads
    ((2, 3, 11, 11), (2, 3, 2, 2), [3, 3], [0, 0, 0, 0]),  # kernel under the stride: phases without taps
    ((1, 5, 10, 14), (3, 5, 5, 3), [3, 2], [2, 1, 2, 1]),
]


def direct(x, w, strides, pads):
    xpad = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    out = [(p - k) // s + 1 for p, k, s in zip(xpad.shape[2:], w.shape[2:], strides)]
    y = 0.0
    for dy, dx in itertools.product(range(w.shape[2]), range(w.shape[3])):
        window = xpad[:, :, dy:dy + (out[0] - 1) * strides[0] + 1:strides[0], dx:dx + (out[1] - 1) * strides[1] + 1:strides[1]]
        y = y + np.einsum("nchw,mc->nmhw", window, w[:, :, dy, dx].astype(np.float64))
    return y


@pytest.fixture
def every_strided_convolution(monkeypatch):
    monkeypatch.setattr(phase_columns, "MIN_CHANNELS", 1)
    monkeypatch.setattr(phase_columns, "MIN_OUTPUT_PIXELS", 1)


@pytest.mark.parametrize("chunk_bytes", [phase_columns.PHASE_COLUMN_CHUNK_BYTES, 1])  # whole, a row at a time
@pytest.mark.parametrize("x_shape, w_shape, strides, pads", CASES)
def test_matches_the_direct_sum(every_strided_convolution, monkeypatch, x_shape, w_shape, strides, pads,
                                chunk_bytes) -> None:
    monkeypatch.setattr(phase_columns, "PHASE_COLUMN_CHUNK_BYTES", chunk_bytes)
    x, w = RNG.standard_normal(x_shape).astype(np.float32), RNG.standard_normal(w_shape).astype(np.float32)
    win = sliding_windows.resolve_window(x_shape[2:], w_shape[2:], strides, None, pads, "NOTSET")
    assert phase_columns.fits(x_shape[1], 1, win)
    got = run("Conv", x, w, None, strides=strides, pads=pads, kernel_shape=list(w_shape[2:]))
    np.testing.assert_allclose(got, direct(x, w, strides, pads), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "channels, group, spatial, kernel, strides, dilations, verdict",
    [
        (16, 1, (160, 160), (3, 3), (2, 2), (1, 1), True),  # a YOLO-style backbone's second conv
        (3, 1, (224, 224), (3, 3), (2, 2), (1, 1), False),  # RGB: the gather stays
        (32, 1, (56, 56), (3, 3), (2, 2), (1, 1), False),  # 28x28 out: small planes
        (32, 2, (160, 160), (3, 3), (2, 2), (1, 1), False),  # grouped
        (32, 1, (160, 160), (3, 3), (1, 1), (1, 1), False),  # stride 1: the flat im2col
        (32, 1, (160, 160), (3, 3), (2, 2), (2, 2), False),  # dilated
        (32, 1, (160, 160), (1, 1), (2, 2), (1, 1), False),  # 1x1: the pointwise path
    ],
)
def test_rule(channels, group, spatial, kernel, strides, dilations, verdict) -> None:
    win = sliding_windows.resolve_window(spatial, kernel, strides, dilations, [k // 2 for k in kernel] * 2, "NOTSET")
    assert phase_columns.fits(channels, group, win) is verdict
