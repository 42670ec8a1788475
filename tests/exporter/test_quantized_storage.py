"""An imported model's integer weights stay integers in the .flow file: convert folds them to float
to optimize, then stores back every weight still exactly on its grid, so the file is the size the
user brought and the model computes the same values."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import quantize_dynamic

import edge_runtime
from exporter.onnx_import import convert_onnx

K, N = 256, 192
QUANTIZED = {"int8": (np.int8, TensorProto.INT8, (-128, 127)), "uint8": (np.uint8, TensorProto.UINT8, (0, 255)),
             "int4": (ml_dtypes.int4, TensorProto.INT4, (-8, 7)), "uint4": (ml_dtypes.uint4, TensorProto.UINT4, (0, 15))}


def _integer_tensor(name: str, values: np.ndarray, kind: str) -> onnx.TensorProto:
    dtype, proto_type, _ = QUANTIZED[kind]
    if kind in ("int8", "uint8"):
        return numpy_helper.from_array(values.astype(dtype), name)
    return helper.make_tensor(name, proto_type, values.shape, values.astype(np.int64).reshape(-1).tolist())


def _quantized_weight(rng, kind: str, name: str, shape, per_channel: bool, scale_base: float = 0.01):
    """(initializers, DequantizeLinear node, float reference) of a weight stored as ``kind``."""
    _, _, (low, high) = QUANTIZED[kind]
    q = rng.integers(low, high + 1, shape)
    channels = shape[1] if per_channel else 1
    scale = (scale_base * (1 + rng.random(channels))).astype(np.float32)
    zero = rng.integers(low, high + 1, channels) if low == 0 else np.zeros(channels, np.int64)
    if not per_channel:
        scale, zero = scale.reshape(()), zero.reshape(())
    inits = [_integer_tensor(f"{name}_q", q, kind), numpy_helper.from_array(scale, f"{name}_scale"),
             _integer_tensor(f"{name}_zero", np.asarray(zero), kind)]
    node = helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale", f"{name}_zero"], [name],
                            **({"axis": 1} if per_channel else {}))
    reference = ((q - zero).astype(np.float32) * scale).astype(np.float32)
    return inits, node, reference


def _save(tmp_path, nodes, inits, outputs, name="model") -> str:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (None, K))],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return str(path)


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("kind", sorted(QUANTIZED))
def test_integer_weights_stay_integers_and_compute_the_same(tmp_path, kind, per_channel):
    rng = np.random.default_rng(0)
    inits, dequantize, w = _quantized_weight(rng, kind, "w", (K, N), per_channel)
    source = _save(tmp_path, [dequantize, helper.make_node("MatMul", ["x", "w"], ["y"])], inits, ["y"])
    report = convert_onnx(source, tmp_path / "model.flow")
    assert report.stored_quantized == 1 and "1 weights kept on their imported integer grids" in str(report)
    bits = 4 if "4" in kind else 8
    assert report.size < w.nbytes * bits / 32 + 16_000, report.size  # the integers, not float32
    x = rng.standard_normal((3, K)).astype(np.float32)
    at_load = edge_runtime.load(tmp_path / "model.flow").run({"x": x})["y"]
    per_call = edge_runtime.load(tmp_path / "model.flow", dequantize="per_call").run({"x": x})["y"]
    np.testing.assert_array_equal(at_load, per_call)
    assert edge_runtime.load(tmp_path / "model.flow").definition.metadata.get("quantization") == "imported"
    np.testing.assert_allclose(at_load, x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_a_weight_the_passes_change_stays_float(tmp_path):
    """Near miss: a batch norm folded into the convolution's weight moves it off the integer grid."""
    rng = np.random.default_rng(1)
    c_out, c_in = 64, 4
    q = rng.integers(-128, 128, (c_out, c_in, 3, 3))
    scale = (0.01 * (1 + rng.random(c_out))).astype(np.float32)
    norm = [rng.random(c_out).astype(np.float32) + 0.5, rng.standard_normal(c_out).astype(np.float32),
            rng.standard_normal(c_out).astype(np.float32), rng.random(c_out).astype(np.float32) + 0.5]
    inits = [numpy_helper.from_array(q.astype(np.int8), "w_q"), numpy_helper.from_array(scale, "w_scale"),
             numpy_helper.from_array(np.zeros(c_out, np.int8), "w_zero")]
    inits += [numpy_helper.from_array(v, n) for v, n in zip(norm, ("gamma", "beta", "mean", "var"))]
    nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"], axis=0),
             helper.make_node("Conv", ["x", "w"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["h", "gamma", "beta", "mean", "var"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, c_in, 8, 8))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "conv.onnx")
    report = convert_onnx(tmp_path / "conv.onnx", tmp_path / "conv.flow")
    flow = edge_runtime.load(tmp_path / "conv.flow", dequantize="per_call")
    ops = [op.op_type for op in flow.definition.subgraphs[0].operators]
    assert "BatchNormalization" not in ops and "DequantizeLinear" not in ops, ops  # folded, and off the grid
    assert report.stored_quantized == 0
    x = rng.standard_normal((1, c_in, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(str(tmp_path / "conv.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(flow.run({"x": x})["y"], want, rtol=1e-4, atol=1e-4)


def test_projections_merged_by_the_passes_are_stored_per_channel(tmp_path):
    """Three projections of one input, each int8 on its own per-tensor grid, become one product."""
    rng = np.random.default_rng(2)
    inits, nodes, refs = [], [], []
    for i, base in enumerate((0.01, 0.02, 0.005)):
        weight_inits, dequantize, w = _quantized_weight(rng, "int8", f"w{i}", (K, N), per_channel=False,
                                                        scale_base=base)
        inits += weight_inits
        nodes += [dequantize, helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"])]
        refs.append(w)
    source = _save(tmp_path, nodes, inits, ["y0", "y1", "y2"])
    report = convert_onnx(source, tmp_path / "model.flow")
    assert report.size < 3 * K * N + 20_000, report.size
    x = rng.standard_normal((2, K)).astype(np.float32)
    got = edge_runtime.load(tmp_path / "model.flow").run({"x": x})
    for i, w in enumerate(refs):
        np.testing.assert_allclose(got[f"y{i}"], x.astype(np.float64) @ w.astype(np.float64), rtol=1e-5, atol=1e-4)


def test_an_onnxruntime_dynamic_quantized_model_converts_to_an_int8_sized_file(tmp_path):
    rng = np.random.default_rng(3)
    layers = [(K, 512), (512, 512), (512, 10)]
    inits, nodes, last = [], [], "x"
    for i, (a, b) in enumerate(layers):
        inits += [numpy_helper.from_array((rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(np.zeros(b, np.float32), f"b{i}")]
        nodes += [helper.make_node("MatMul", [last, f"w{i}"], [f"m{i}"]), helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"])]
        last = f"a{i}"
        if i < len(layers) - 1:
            nodes.append(helper.make_node("Relu", [last], [f"r{i}"]))
            last = f"r{i}"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    float_source = _save(tmp_path, nodes, inits, ["y"], "float")
    quantized_source = str(tmp_path / "dynamic.onnx")
    quantize_dynamic(float_source, quantized_source)
    float_report = convert_onnx(float_source, tmp_path / "float.flow")
    report = convert_onnx(quantized_source, tmp_path / "dynamic.flow")
    assert report.stored_quantized >= 2  # the two large layers (the last is under the size worth storing)
    assert report.size < 0.4 * float_report.size, (report.size, float_report.size)
    x = rng.standard_normal((4, K)).astype(np.float32)
    float_out = edge_runtime.load(tmp_path / "float.flow").run({"x": x})["y"]
    got = edge_runtime.load(tmp_path / "dynamic.flow").run({"x": x})["y"]
    assert np.abs(got - float_out).max() < 0.05 * np.abs(float_out).max()  # int8 weights, float activations


def test_a_round_trip_scale_of_inf_converts_and_says_why_it_was_not_compared(tmp_path):
    """onnxruntime's quantize_static gives an attention mask's -inf fill a scale of inf; the fold
    drops that round trip, so the model converts, and the comparison with the model as imported
    (which the runtime refuses to load) is reported as not measured, naming the tensor."""
    rng = np.random.default_rng(4)
    inits, dequantize, w = _quantized_weight(rng, "int8", "w", (K, N), per_channel=True)
    inits += [numpy_helper.from_array(np.asarray(np.inf, np.float32), "inf_scale"),
              numpy_helper.from_array(np.asarray(0, np.int8), "zero")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "inf_scale", "zero"], ["xq"], name="mask_quantize"),
             helper.make_node("DequantizeLinear", ["xq", "inf_scale", "zero"], ["xd"]),
             helper.make_node("Relu", ["xd"], ["r"]), dequantize, helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "r2"], ["y"]), helper.make_node("Slice", ["r", "zero64", "n64", "one64"], ["r2"])]
    inits += [numpy_helper.from_array(np.array([0], np.int64), "zero64"), numpy_helper.from_array(np.array([N], np.int64), "n64"),
              numpy_helper.from_array(np.array([1], np.int64), "one64")]
    source = _save(tmp_path, nodes, inits, ["y"])
    report = convert_onnx(source, tmp_path / "model.flow")
    assert report.stored_quantized == 1
    assert "not measured (the model as imported does not load" in str(report.folded_quantization)
    assert "scale inf" in str(report.folded_quantization)
    x = rng.standard_normal((2, K)).astype(np.float32)
    assert edge_runtime.load(tmp_path / "model.flow").run({"x": x})["y"].shape == (2, N)
