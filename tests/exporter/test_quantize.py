"""Post-training quantization (exporter.quantize): the three schemes, calibration, and bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import edge_runtime
from exporter import flow_writer
from exporter.accuracy import measure_accuracy
from exporter.calibration import CalibrationError, calibration_batches
from exporter.onnx_import import import_onnx
from exporter.passes import optimize
from exporter.quantize import (
    METADATA_KEY,
    QuantizationError,
    activation_params,
    quantize,
    quantize_per_channel,
)
from flowstack_cli.main import main
from tests.exporter.quantized_models import images, small_cnn


@pytest.fixture(scope="module")
def float_model():
    return optimize(import_onnx(small_cnn()))[0]


@pytest.fixture(scope="module")
def calibration(float_model):
    return calibration_batches(float_model, {"x": images(64, seed=5)})


def _weight_bytes(model) -> int:
    return sum(d.nbytes for d in model.graph.constants().values())


# scheme -> (weight bytes: smallest and largest ratio float/quantized, largest relative RMS error of the logits)
EXPECTED = {"float16": (1.9, 2.0, 1e-3), "dynamic-int8": (3.5, 4.0, 0.03), "int8": (3.5, 4.0, 0.05)}


@pytest.mark.parametrize("scheme", sorted(EXPECTED))
def test_scheme_shrinks_weights_and_keeps_top1(float_model, calibration, scheme) -> None:
    quantized, summary = quantize(float_model, scheme, calibration)
    low, high, rms = EXPECTED[scheme]
    assert low <= _weight_bytes(float_model) / _weight_bytes(quantized) <= high
    assert summary.bytes_before == _weight_bytes(float_model) and summary.weights
    assert quantized.metadata[METADATA_KEY] == scheme
    report = measure_accuracy(float_model, quantized, [{"x": images(300)}], scheme)
    logits = report.outputs["logits"]
    assert logits.ranked == 300 and logits.top1_agreement >= 0.97
    assert 0 < logits.relative_rms <= rms
    assert scheme in str(report) and "top-1 agreement" in str(report)


def test_float16_stores_half_weights_read_through_cast(float_model) -> None:
    quantized, _ = quantize(float_model, "float16")
    halves = [d for d in quantized.graph.constants().values() if d.dtype == np.float16]
    casts = [n for n in quantized.graph.nodes if n.op_type == "Cast"]
    assert halves and len(casts) == len(halves)


def test_full_int8_rounds_activations_to_calibrated_grids(float_model, calibration) -> None:
    quantized, summary = quantize(float_model, "int8", calibration)
    ops = [n.op_type for n in quantized.graph.nodes]
    assert ops.count("QuantizeLinear") == len(summary.activations) == 4  # the input of each conv and gemm
    dynamic, _ = quantize(float_model, "dynamic-int8")
    assert "QuantizeLinear" not in [n.op_type for n in dynamic.graph.nodes]


def test_per_channel_scales_keep_small_channels() -> None:
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * np.array([1e-3, 1e-1, 1, 10], np.float32).reshape(4, 1, 1, 1)
    q, scale = quantize_per_channel(weight, 0)
    assert q.dtype == np.int8 and scale.shape == (4,)
    restored = q * scale.reshape(4, 1, 1, 1)
    for channel in range(4):
        peak = np.abs(weight[channel]).max()
        assert np.abs(restored[channel] - weight[channel]).max() <= peak / 254 * 1.01
    _, scale = quantize_per_channel(np.zeros((2, 5), np.float32), 1)
    assert np.all(scale == 1)  # an all-zero channel must not get a zero scale


def test_activation_params_keep_zero_exact() -> None:
    scale, zero_point = activation_params(0.5, 6.0)  # range widened to [0, 6]
    assert np.isclose(scale, 6 / 255) and zero_point == -128
    scale, zero_point = activation_params(-1.0, 3.0)
    assert np.isclose(scale, 4 / 255) and zero_point == -64
    for value in (-1.0, 0.0, 3.0):  # the ends within half a step; zero exactly
        q = np.clip(np.rint(value / scale) + zero_point, -128, 127)
        assert abs((q - zero_point) * scale - value) <= (scale / 2 if value else 0)
    with pytest.raises(QuantizationError, match="not finite"):
        activation_params(-np.inf, 1.0)


def test_both_dequantize_modes_compute_the_same(float_model, calibration) -> None:
    quantized, _ = quantize(float_model, "int8", calibration)
    data = flow_writer.to_bytes(quantized)
    x = {"x": images(8)}
    at_load = edge_runtime.load(data).run(x)["logits"]
    per_call = edge_runtime.load(data, dequantize="per_call").run(x)["logits"]
    np.testing.assert_array_equal(at_load, per_call)


# -- bad input ---------------------------------------------------------------------------------------
def test_model_without_float_weights_is_refused(float_model) -> None:
    quantized, _ = quantize(float_model, "float16")
    # a float16 model's weights are float16; make its few small float32 constants float64 too
    small = [n for n, d in quantized.graph.constants().items() if d.dtype == np.float32]
    for name in small:
        quantized.graph.values[name].data = quantized.graph.values[name].data.astype(np.float64)
    with pytest.raises(QuantizationError, match="no float32 weights.*float16"):
        quantize(quantized, "dynamic-int8")


def test_unknown_scheme_and_missing_calibration_are_refused(float_model) -> None:
    with pytest.raises(QuantizationError, match="unknown quantization scheme 'int4'"):
        quantize(float_model, "int4")
    with pytest.raises(QuantizationError, match="int8 needs calibration samples"):
        quantize(float_model, "int8")


@pytest.mark.parametrize("arrays, message", [
    ({"image": images(4)}, r"input 'image' \(cal.npy\): the model has no input named so; its inputs are \['x'\]"),
    ({"x": images(4).astype(np.float64)}, r"input 'x' \(cal.npy\): dtype float64, but the input takes float32"),
    ({"x": images(4)[:, 0]}, r"input 'x' \(cal.npy\): shape \[4, 12, 12\], but the input is \[\?, 1, 12, 12\]"),
    ({"x": np.zeros((4, 1, 10, 12), np.float32)}, r"input 'x' \(cal.npy\): shape \[4, 1, 10, 12\] differs .* dimension 2"),
    ({"x": images(0)}, r"zero sample counts"),
])
def test_bad_calibration_is_refused_naming_input_and_file(float_model, arrays, message) -> None:
    with pytest.raises(CalibrationError, match=message):
        calibration_batches(float_model, arrays, {name: "cal.npy" for name in arrays})


# -- the command line ------------------------------------------------------------------------------
@pytest.fixture()
def onnx_file(tmp_path):
    path = tmp_path / "cnn.onnx"
    onnx.save(small_cnn(), path)
    return path


def test_convert_quantize_int8_reports_accuracy_and_inspect_shows_scheme(onnx_file, tmp_path, capsys) -> None:
    calibration = tmp_path / "cal.npy"
    np.save(calibration, images(40, seed=7))
    out = tmp_path / "cnn-int8.flow"
    assert main(["convert", str(onnx_file), "-o", str(out), "--quantize", "int8",
                 "--calibration", f"x={calibration}"]) == 0
    text = capsys.readouterr().out
    assert "quantized int8: 4 weights" in text and "int8 against the float model" in text
    assert "top-1 agreement" in text
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "quantization: int8; 8 tensors with scale/zero point (INT8): 4 weights, 4 activations; 4 per channel" in text


def test_convert_refuses_bad_calibration_file(onnx_file, tmp_path, capsys) -> None:
    calibration = tmp_path / "wrong.npy"
    np.save(calibration, images(4).astype(np.float64))
    out = tmp_path / "never.flow"
    assert main(["convert", str(onnx_file), "-o", str(out), "--quantize", "int8",
                 "--calibration", f"x={calibration}"]) == 2
    err = capsys.readouterr().err
    assert f"calibration samples for input 'x' ({calibration}): dtype float64" in err and not out.exists()
    assert main(["convert", str(onnx_file), "-o", str(out), "--calibration", f"x={calibration}"]) == 2
    assert "--calibration is only used with --quantize int8" in capsys.readouterr().err
