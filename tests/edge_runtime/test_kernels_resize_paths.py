"""Resize's three ways through an axis (a repeat, gathered filter taps, the dense weight matrix)
against onnxruntime on feature-map shapes users resize (FPN and U-Net upsampling, segmentation
logits, antialiased shrinking)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import helper

from edge_runtime.kernels import resampling
from tests.edge_runtime.kernel_calls import run_kernel as run

RNG = np.random.default_rng(5)


def onnxruntime_resize(x: np.ndarray, sizes: np.ndarray, **attrs) -> np.ndarray:
    node = helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], **attrs)
    dtype = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph([node], "resize", [helper.make_tensor_value_info("x", dtype, x.shape)],
                              [helper.make_tensor_value_info("y", dtype, None)],
                              [onnx.numpy_helper.from_array(sizes, "sizes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


def ours(x, sizes, **attrs):
    attrs = {"coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_floor", **attrs}
    return run("Resize", x, None, None, sizes, **attrs)


CASES = [
    # (shape, output spatial size, attrs)
    ((1, 128, 20, 20), (40, 40), {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                                  "nearest_mode": "floor"}),  # YOLO / FPN x2: repeats
    ((2, 8, 7, 5), (21, 15), {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                              "nearest_mode": "floor"}),  # x3: repeats
    ((1, 4, 7, 9), (10, 13), {"mode": "nearest"}),  # fractional: a gather
    ((1, 21, 16, 16), (128, 128), {"mode": "linear"}),  # segmentation logits x8
    ((1, 16, 20, 30), (40, 60), {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    ((1, 16, 20, 30), (40, 60), {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"}),
    ((1, 8, 16, 16), (32, 24), {"mode": "cubic", "cubic_coeff_a": -0.75}),
    ((1, 8, 16, 16), (32, 24), {"mode": "cubic", "cubic_coeff_a": -0.5, "exclude_outside": 1}),
    ((1, 3, 64, 48), (20, 48), {"mode": "linear", "antialias": 1}),  # 3.2x shrink: 7 taps, gathered
    ((1, 3, 64, 48), (8, 6), {"mode": "linear", "antialias": 1}),  # 8x shrink: 17 taps, the dense matrix
    ((1, 3, 64, 48), (10, 8), {"mode": "cubic", "antialias": 1}),
]


@pytest.mark.parametrize("shape, out, attrs", CASES)
def test_matches_onnxruntime(shape, out, attrs) -> None:
    x = RNG.standard_normal(shape).astype(np.float32)
    sizes = np.array(shape[:2] + out, dtype=np.int64)
    full = {"coordinate_transformation_mode": "half_pixel", "nearest_mode": "round_prefer_floor", **attrs}
    got = ours(x, sizes, **attrs)
    assert got.dtype == np.float32 and got.shape == tuple(sizes)
    np.testing.assert_allclose(got, onnxruntime_resize(x, sizes, **full), rtol=1e-5, atol=2e-5)


def test_integer_and_double_inputs_keep_their_type() -> None:
    """Integers are filtered in float64 and rounded back to the nearest; float64 stays float64."""
    x = RNG.integers(0, 255, (1, 3, 6, 6)).astype(np.uint8)
    sizes = np.array([1, 3, 12, 9], dtype=np.int64)
    got = ours(x, sizes, mode="linear")
    assert got.dtype == np.uint8
    want = onnxruntime_resize(x, sizes, mode="linear", coordinate_transformation_mode="half_pixel")
    # rounded to nearest here; onnxruntime rounds some halves the other way
    assert np.abs(got.astype(np.int16) - want).max() <= 1
    x64 = RNG.standard_normal((1, 2, 5, 5))
    assert ours(x64, np.array([1, 2, 10, 10]), mode="cubic").dtype == np.float64


def test_filter_widths_choose_the_path() -> None:
    """Linear and cubic upsampling gather 2 and 4 taps; shrinking 8x with antialiasing has more than
    MAX_GATHER_TAPS, so it goes through the dense matrix."""
    src, _ = resampling.source_coords(np, "half_pixel", 16, 8, 2.0, (0.0, 1.0))
    for mode, want in (("linear", 2), ("cubic", 4)):
        indices, weights = resampling.filter_taps(np, src, 8, 2.0, mode=mode, antialias=0, cubic_coeff_a=-0.75,
                                                  exclude_outside=0)
        assert indices.shape == weights.shape == (want, 16)
        np.testing.assert_allclose(weights.sum(axis=0), 1.0)
    src, _ = resampling.source_coords(np, "half_pixel", 8, 64, 0.125, (0.0, 1.0))
    indices, _ = resampling.filter_taps(np, src, 64, 0.125, mode="linear", antialias=1, cubic_coeff_a=-0.75,
                                        exclude_outside=0)
    assert indices.shape[0] > resampling.MAX_GATHER_TAPS


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("shape, factors", [((1, 16, 10, 12), (1, 1, 2, 2)), ((2, 3, 5, 7), (1, 1, 3, 2)),
                                            ((2, 3, 5, 7), (1, 1, 2, 3)), ((1, 2, 3, 4, 5), (1, 1, 2, 2, 2)),
                                            ((1, 6, 4, 4), (1, 2, 1, 1))])
def test_whole_factor_nearest_upsampling_repeats_every_element(shape, factors, dtype) -> None:
    """Integer upscales are written in one pass (a last axis doubled by an integer multiply of the
    element's bits): every dtype and factor gives the repeated input, bit for bit."""
    x = (RNG.standard_normal(shape) * 50).astype(dtype)
    got = run("Resize", x, None, np.array(factors, np.float32), mode="nearest")
    want = x
    for axis, k in enumerate(factors):
        want = np.repeat(want, k, axis=axis)
    assert got.dtype == x.dtype and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def test_doubling_keeps_nan_payloads_signed_zeros_and_infinities() -> None:
    x = np.array([np.nan, -0.0, np.inf, -np.inf], np.float32).reshape(1, 1, 2, 2)
    x.view(np.uint32)[0, 0, 0, 0] |= 0x1234  # a NaN with a payload
    got = run("Resize", x[:, :, ::-1], None, np.array([1, 1, 2, 2], np.float32), mode="nearest")
    want = np.repeat(np.repeat(x[:, :, ::-1], 2, axis=2), 2, axis=3)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
