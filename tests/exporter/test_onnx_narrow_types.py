"""ONNX models with element types NumPy lacks (through ml_dtypes): a bfloat16 model and int4
weight-quantized models from onnxruntime's tools (quantize_static, MatMulNBitsQuantizer) convert,
run and match onnxruntime."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from edge_runtime import load
from exporter.onnx_export import to_onnx
from exporter.onnx_import import convert_onnx, import_onnx, onnx_to_flow_bytes

F32 = np.float32
RNG = np.random.default_rng(0)


def _model(nodes, inputs, outputs, initializers) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _session(proto: onnx.ModelProto, fuse: bool = True) -> ort.InferenceSession:
    options = ort.SessionOptions()
    if not fuse:  # its DQ + MatMul -> MatMulNBits fusion computes in lower precision than the graph says
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _bfloat16_mlp(weights: dict[str, np.ndarray], dtype: int) -> onnx.ModelProto:
    """x (float32) -> Cast(dtype) -> MatMul W -> Add B -> Relu -> Cast(float32)."""
    nodes = [helper.make_node("Cast", ["x"], ["xc"], to=dtype), helper.make_node("MatMul", ["xc", "W"], ["m"]),
             helper.make_node("Add", ["m", "B"], ["a"]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], weights)


def test_a_bfloat16_model_converts_round_trips_and_matches_onnxruntime(tmp_path) -> None:
    weights = {"W": RNG.standard_normal((16, 8)).astype(ml_dtypes.bfloat16),
               "B": RNG.standard_normal(8).astype(ml_dtypes.bfloat16)}
    model = _bfloat16_mlp(weights, TensorProto.BFLOAT16)
    convert_onnx(model, tmp_path / "bf16.flow")
    flow = load(tmp_path / "bf16.flow")
    stored = {t.name: t.data for t in flow.definition.subgraphs[0].tensors if t.data is not None}
    assert any(v.dtype == ml_dtypes.bfloat16 for v in stored.values())
    # onnxruntime's CPU provider has no bfloat16 MatMul/Add/Relu: it runs the float32 twin, same weights.
    twin = _bfloat16_mlp({k: v.astype(F32) for k, v in weights.items()}, TensorProto.FLOAT)
    x = RNG.standard_normal((2, 16)).astype(F32)
    expected = _session(twin).run(None, {"x": x.astype(ml_dtypes.bfloat16).astype(F32)})[0]
    np.testing.assert_allclose(flow.run({"x": x})["y"], expected, rtol=3e-2, atol=3e-2)
    # to_onnx writes the bfloat16 weights back.
    back = to_onnx(import_onnx(model))
    types = {i.name: i.data_type for i in back.graph.initializer}
    assert types["W"] == TensorProto.BFLOAT16


class _Samples(CalibrationDataReader):
    def __init__(self, batches: list[dict[str, np.ndarray]]):
        self.batches = iter(batches)

    def get_next(self):
        return next(self.batches, None)


def test_an_int4_qdq_model_from_quantize_static_folds_and_matches_onnxruntime(tmp_path) -> None:
    weights = {"W": RNG.standard_normal((64, 32)).astype(F32), "B": RNG.standard_normal(32).astype(F32)}
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 32])], weights)
    onnx.save(model, tmp_path / "float.onnx")
    samples = [{"x": RNG.standard_normal((4, 64)).astype(F32)} for _ in range(4)]
    quantize_static(str(tmp_path / "float.onnx"), str(tmp_path / "int4.onnx"), _Samples(samples),
                    quant_format=QuantFormat.QDQ, weight_type=QuantType.QInt4, activation_type=QuantType.QUInt16,
                    per_channel=True)
    quantized = onnx.load(tmp_path / "int4.onnx")
    assert any(i.data_type == TensorProto.INT4 for i in quantized.graph.initializer)
    x = samples[0]["x"]  # within the calibrated ranges: onnxruntime saturates nothing
    expected = _session(quantized).run(None, {"x": x})[0]
    # As imported (int4 weights kept, packed in the file): onnxruntime's own arithmetic.
    as_is = load(onnx_to_flow_bytes(quantized)).run({"x": x})["y"]
    step = float(numpy_helper.to_array(next(i for i in quantized.graph.initializer if i.name == "y_scale")))
    np.testing.assert_allclose(as_is, expected, rtol=0, atol=1.01 * step)  # a rounding tie may go one grid step apart
    # Converted: the int4 weights fold to float, the float model's ops run.
    report = convert_onnx(quantized, tmp_path / "int4.flow")
    assert report.folded_quantization
    flow = load(tmp_path / "int4.flow")
    assert not {op.op_type for op in flow.definition.subgraphs[0].operators} & {"DequantizeLinear", "QuantizeLinear"}
    y = flow.run({"x": x})["y"]
    scale = np.abs(expected).max()
    np.testing.assert_allclose(y, expected, atol=0.02 * scale)  # activations lose only their uint16 rounding


def test_a_blocked_int4_weight_model_runs_as_onnxruntime_does_and_writes_back() -> None:
    q = RNG.integers(-8, 8, (64, 16)).astype(ml_dtypes.int4)
    scale = RNG.uniform(0.01, 0.1, (4, 16)).astype(F32)  # one scale per 16 rows of K: block_size 16 on axis 0
    nodes = [helper.make_node("DequantizeLinear", ["Wq", "Ws"], ["W"], axis=0, block_size=16),
             helper.make_node("MatMul", ["x", "W"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 64])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 16])], {"Wq": q, "Ws": scale})
    x = RNG.standard_normal((3, 64)).astype(F32)
    expected = _session(model, fuse=False).run(None, {"x": x})[0]
    np.testing.assert_allclose(load(onnx_to_flow_bytes(model)).run({"x": x})["y"], expected, rtol=1e-5, atol=1e-5)
    back = to_onnx(import_onnx(model))
    assert {i.name: i.data_type for i in back.graph.initializer}["Wq"] == TensorProto.INT4
    np.testing.assert_allclose(_session(back, fuse=False).run(None, {"x": x})[0], expected, rtol=1e-6)


def test_a_blocked_uint4_model_from_matmul_nbits_quantizer_converts_and_matches_onnxruntime(tmp_path) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    weight = RNG.standard_normal((128, 64)).astype(F32)
    model = _model([helper.make_node("MatMul", ["x", "W"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 128])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])], {"W": weight})
    quantizer = MatMulNBitsQuantizer(model, block_size=32, is_symmetric=False, quant_format=QuantFormat.QDQ)
    quantizer.process()
    quantized = quantizer.model.model
    blocked = [n for n in quantized.graph.node if n.op_type == "DequantizeLinear"]
    assert blocked and helper.get_attribute_value(next(a for a in blocked[0].attribute if a.name == "block_size")) == 32
    assert {i.data_type for i in quantized.graph.initializer} >= {TensorProto.UINT4}
    x = RNG.standard_normal((4, 128)).astype(F32)
    expected = _session(quantized, fuse=False).run(None, {"x": x})[0]
    convert_onnx(quantized, tmp_path / "uint4.flow")
    np.testing.assert_allclose(load(tmp_path / "uint4.flow").run({"x": x})["y"], expected, rtol=1e-5, atol=1e-4)
