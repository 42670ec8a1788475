"""Pool axes reduced as shifts of the flattened array (``window_shifts``) against onnxruntime:
"same" stride-1 pools (3x3 pad 1, YOLO's 5x5 pad 2), stride-2 pools split into even and odd rows
(ResNet's 3x3 stride 2 pad 1, 2x2), planar and channels-last, with NaN inputs, 8-bit inputs and
inputs the path must leave to the strided views (odd lengths, non-contiguous arrays)."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest
from onnx import helper

from edge_runtime.kernels import window_shifts
from edge_runtime.kernels.nn import max_windows, pool_window
from schemas.ops.fused import DOMAIN
from tests.edge_runtime.kernel_calls import run_kernel as run
from tests.edge_runtime.test_kernels_pool_windows import channels_last, padded_view_max, sample

CASES = [
    ((1, 64, 56, 56), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # ResNet's stem
    ((1, 32, 10, 10), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),  # YOLO's SPPF: a padded copy
    ((1, 8, 48, 48), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),
    ((1, 8, 44, 48), {"kernel_shape": [5, 3], "pads": [0, 2, 4, 0]}),  # pads on one side only
    ((2, 8, 16, 16), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ((1, 4, 9, 12), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # odd height: stride 1 needs none
    ((1, 4, 12, 12), {"kernel_shape": [2, 2], "strides": [2, 2]}),  # U-Net's, LeNet's
    ((1, 4, 12, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 4, 12, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 1, 1, 0]}),  # one side each
    ((1, 4, 12, 12), {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((1, 4, 11, 11), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),  # odd: strided views
    ((1, 4, 5, 5), {"kernel_shape": [5, 5], "pads": [2, 2, 2, 2]}),  # every row an edge row
    ((2, 3, 6, 1), {"kernel_shape": [3, 1], "strides": [2, 1], "pads": [1, 0, 1, 0]}),  # a 1-D pool unsqueezed
]


def onnxruntime_pool(op: str, x: np.ndarray, **attrs) -> np.ndarray:
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", dtype, x.shape)],
                              [helper.make_tensor_value_info("y", dtype, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.int8])
@pytest.mark.parametrize("x_shape, attrs", CASES)
def test_max_pool_matches_onnxruntime(x_shape, attrs, dtype) -> None:
    x = sample(x_shape, dtype)
    want = onnxruntime_pool("MaxPool", x, **attrs)
    np.testing.assert_array_equal(run("MaxPool", x, n_outputs=1, **attrs), want)
    np.testing.assert_array_equal(run("ChannelsLastMaxPool", channels_last(x), domain=DOMAIN, **attrs),
                                  channels_last(want))


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("x_shape, attrs", [c for c in CASES if "dilations" not in c[1]])
def test_average_pool_matches_onnxruntime(x_shape, attrs, include_pad) -> None:
    x = sample(x_shape, np.float32)
    want = onnxruntime_pool("AveragePool", x, count_include_pad=include_pad, **attrs)
    np.testing.assert_allclose(run("AveragePool", x, count_include_pad=include_pad, **attrs), want,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("x_shape, attrs", CASES)
def test_a_nan_reaches_every_window_that_holds_it(x_shape, attrs) -> None:
    """A NaN propagates as NumPy's maximum does, on every path (onnxruntime keeps a NaN only where
    it is the first value a window compares, so it is not the reference here)."""
    x = sample(x_shape, np.float32)
    flat = x.reshape(-1)
    flat[:: max(3, flat.size // 7)] = np.nan  # plane edges and interiors
    want = padded_view_max(x, attrs)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(run("MaxPool", x, n_outputs=1, **attrs), want)
    np.testing.assert_array_equal(run("ChannelsLastMaxPool", channels_last(x), domain=DOMAIN, **attrs),
                                  channels_last(want))


def test_non_contiguous_inputs_take_the_strided_views() -> None:
    x = sample((1, 12, 12, 4), np.float32).transpose(0, 3, 1, 2)  # planar view of channels-last data
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}
    np.testing.assert_array_equal(run("MaxPool", x, n_outputs=1, **attrs), padded_view_max(x, attrs))


@pytest.mark.parametrize("x_shape, attrs, lead, path", [
    (CASES[0][0], CASES[0][1], None, ["shifts", "shifts"]),  # split rows, then split values
    ((1, 56, 56, 64), CASES[0][1], 1, ["shifts"]),  # channels-last: rows of 56x64 values are not split
    (CASES[1][0], CASES[1][1], None, ["padded"]),
    (CASES[2][0], CASES[2][1], None, ["shifts", "shifts"]),
    (CASES[6][0], CASES[6][1], None, ["shifts"]),  # 2x2: only the values' split pays
    (CASES[10][0], CASES[10][1], None, []),  # odd lengths
])
def test_each_path_runs_where_it_applies(monkeypatch, x_shape, attrs, lead, path) -> None:
    taken = []
    flat_taps, reduce_padded = window_shifts._flat_taps, window_shifts.reduce_padded

    def padded(*args):
        result = reduce_padded(*args)
        taken.extend(["padded"] if result is not None else [])
        return result

    monkeypatch.setattr(window_shifts, "_flat_taps", lambda *args: taken.append("shifts") or flat_taps(*args))
    monkeypatch.setattr(window_shifts, "reduce_padded", padded)
    planar_shape = x_shape if lead is None else (x_shape[0], x_shape[-1]) + x_shape[1:-1]
    win = pool_window(np.empty(planar_shape), attrs["kernel_shape"], attrs.get("strides"), attrs.get("dilations"),
                      attrs.get("pads"), "NOTSET", attrs.get("ceil_mode", 0))
    max_windows(sample(x_shape, np.float32), np, win, lead)
    assert taken == path
