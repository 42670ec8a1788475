"""Quantized models through ONNX: ``to_onnx`` writes QDQ models onnxruntime runs, and models quantized
by onnxruntime's tool (quantize_dynamic, quantize_static QDQ and QOperator) convert, fold to float and run."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

import edge_runtime
from exporter import flow_writer, ir
from exporter.calibration import calibration_batches
from exporter.onnx_dequantize import bypass_round_trips, hoist_dequantization
from exporter.onnx_export import to_onnx
from exporter.onnx_import import convert_onnx, import_onnx
from exporter.passes import optimize
from exporter.quantize import quantize
from tests.exporter.quantized_models import images, small_cnn

# scheme -> largest difference between onnxruntime and the edge runtime, relative to the logits' RMS:
# full int8 differs where onnxruntime runs the convolutions on integers (its own rounding)
ONNXRUNTIME_TOLERANCE = {"float16": 1e-5, "dynamic-int8": 1e-5, "int8": 5e-2}


def _session(proto: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("scheme", sorted(ONNXRUNTIME_TOLERANCE))
def test_to_onnx_writes_qdq_models_onnxruntime_runs(scheme) -> None:
    float_model = optimize(import_onnx(small_cnn()))[0]
    batches = calibration_batches(float_model, {"x": images(32, seed=3)})
    quantized, _ = quantize(float_model, scheme, batches)
    proto = to_onnx(quantized)
    onnx.checker.check_model(proto, full_check=True)
    ops = {n.op_type for n in proto.graph.node}
    assert ("Cast" if scheme == "float16" else "DequantizeLinear") in ops
    x = images(16)
    theirs = _session(proto).run(None, {"x": x})[0]
    ours = edge_runtime.load(flow_writer.to_bytes(quantized)).run({"x": x})["logits"]
    rms = np.sqrt(np.mean(np.square(ours)))
    assert np.abs(theirs - ours).max() <= ONNXRUNTIME_TOLERANCE[scheme] * rms
    assert np.mean(theirs.argmax(1) == ours.argmax(1)) >= 15 / 16


class _Samples(CalibrationDataReader):
    def __init__(self) -> None:
        self.samples = iter({"x": images(1, seed=i)} for i in range(8))

    def get_next(self):
        return next(self.samples, None)


ONNXRUNTIME_QUANTIZERS = {
    "dynamic": lambda source, target: quantize_dynamic(source, target),
    "qdq": lambda source, target: quantize_static(source, target, _Samples(), quant_format=QuantFormat.QDQ),
    "qoperator": lambda source, target: quantize_static(source, target, _Samples(), quant_format=QuantFormat.QOperator),
}
QUANTIZATION_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
                    "QLinearConv", "QLinearMatMul"}


@pytest.fixture(scope="module")
def float_flow(tmp_path_factory):
    root = tmp_path_factory.mktemp("ort")
    onnx.save(small_cnn(), root / "cnn.onnx")
    convert_onnx(root / "cnn.onnx", root / "cnn.flow")
    return root, edge_runtime.load(root / "cnn.flow")


@pytest.mark.parametrize("kind", sorted(ONNXRUNTIME_QUANTIZERS))
def test_onnxruntime_quantized_models_convert_to_float_and_run(float_flow, kind, caplog) -> None:
    root, float_model = float_flow
    source, target = root / f"cnn-{kind}.onnx", root / f"cnn-{kind}.flow"
    ONNXRUNTIME_QUANTIZERS[kind](str(root / "cnn.onnx"), str(source))
    report = convert_onnx(source, target)
    assert report.folded_quantization is not None and "folded" in str(report.folded_quantization)
    model = edge_runtime.load(target)
    ops = [op.op_type for op in model.definition.subgraphs[0].operators]
    float_ops = [op.op_type for op in float_model.definition.subgraphs[0].operators]
    assert not QUANTIZATION_OPS & set(ops), ops
    assert len(ops) <= len(float_ops), (ops, float_ops)  # no more work than the float model
    x = images(16)
    theirs = _session(onnx.load(source)).run(None, {"x": x})[0]
    ours = model.run({"x": x})["logits"]
    rms = np.sqrt(np.mean(np.square(theirs)))
    assert np.sqrt(np.mean(np.square(theirs - ours))) <= 0.05 * rms
    assert np.mean(theirs.argmax(1) == ours.argmax(1)) >= 14 / 16


def _round_trip_graph(dequantize_scale: float, between: str | None = None, zero_point: int = 0) -> ir.Graph:
    """x -> Tanh -> [DequantizeLinear(QuantizeLinear(.)) -> between ->] QuantizeLinear -> DequantizeLinear(scale) -> Relu."""
    graph = ir.Graph(inputs=["x"], outputs=["y"])
    graph.values["x"] = ir.Value("x", 1, (2,))
    for name, value in (("s", 0.1), ("s2", dequantize_scale)):
        graph.values[name] = ir.Value(name, data=np.asarray(value, np.float32))
    graph.values["z"] = ir.Value("z", data=np.asarray(zero_point, np.uint8))
    graph.nodes = [ir.Node("Tanh", ["x"], ["t"])]
    source = "t"
    if between:
        graph.nodes += [ir.Node("QuantizeLinear", ["t", "s", "z"], ["q0"]), ir.Node("DequantizeLinear", ["q0", "s", "z"], ["d0"]),
                        ir.Node(between, ["d0"], ["m"])]
        source = "m"
    graph.nodes += [ir.Node("QuantizeLinear", [source, "s", "z"], ["q"]),
                    ir.Node("DequantizeLinear", ["q", "s2", "z"], ["d"]),
                    ir.Node("Relu", ["d"], ["y"])]
    return graph


def test_round_trip_becomes_a_clip_to_the_grid_range() -> None:
    graph = _round_trip_graph(0.1)
    assert bypass_round_trips(graph) == 1
    clip = graph.nodes[2]
    assert clip.op_type == "Clip" and clip.inputs[0] == "t" and clip.outputs == ["d"]
    low, high = (graph.values[n].data.item() for n in clip.inputs[1:])
    assert low == 0.0 and np.isclose(high, 25.5)  # uint8 from zero point 0: onnxruntime's folded Relu


def test_round_trip_across_zero_is_dropped() -> None:
    graph = _round_trip_graph(0.1, zero_point=128)
    assert bypass_round_trips(graph) == 1
    assert [n.op_type for n in graph.nodes] == ["Tanh", "QuantizeLinear", "Relu"] and graph.nodes[-1].inputs == ["t"]


def test_round_trip_after_a_range_preserving_op_is_bypassed() -> None:
    graph = _round_trip_graph(0.1, between="Flatten")
    assert bypass_round_trips(graph) == 2  # the first pair clipped, the second dropped
    assert [n.op_type for n in graph.nodes] == ["Tanh", "QuantizeLinear", "Clip", "Flatten", "QuantizeLinear", "Relu"]
    assert graph.nodes[-1].inputs == ["m"]


def test_rescale_is_not_a_round_trip() -> None:
    graph = _round_trip_graph(0.2)  # dequantized on another grid: a rescale, which must stay
    assert bypass_round_trips(graph) == 0
    assert [n.op_type for n in graph.nodes] == ["Tanh", "QuantizeLinear", "DequantizeLinear", "Relu"]


def test_dequantize_is_hoisted_over_reshape_then_transpose() -> None:
    """QOperator attention: QuantizeLinear -> Reshape -> Transpose -> DequantizeLinear, all one grid."""
    graph = ir.Graph(inputs=["x"], outputs=["y"])
    graph.values["x"] = ir.Value("x", 1, (2, 4))
    for name, value in (("s", np.float32(0.1)), ("z", np.uint8(128)), ("shape", np.array([4, 2], np.int64))):
        graph.values[name] = ir.Value(name, data=np.asarray(value))
    graph.nodes = [ir.Node("Tanh", ["x"], ["t"]), ir.Node("QuantizeLinear", ["t", "s", "z"], ["q"]),
                   ir.Node("Reshape", ["q", "shape"], ["r"]), ir.Node("Transpose", ["r"], ["p"], {"perm": [1, 0]}),
                   ir.Node("DequantizeLinear", ["p", "s", "z"], ["d"]), ir.Node("Relu", ["d"], ["y"])]
    assert hoist_dequantization(graph) == 2
    assert bypass_round_trips(graph) == 1  # the grid spans zero: dropped, not clipped
    graph.nodes = [n for n in graph.nodes if n.op_type != "QuantizeLinear"]
    assert [n.op_type for n in graph.nodes] == ["Tanh", "Reshape", "Transpose", "Relu"]
    assert graph.nodes[1].inputs[0] == "t" and graph.nodes[-1].inputs == ["p"]


def test_gelu_half_needs_no_clip() -> None:
    """1 + erf(x) lies in [0, 2]: its grid starting at 0 is no folded Relu, and no Clip is kept."""
    graph = ir.Graph(inputs=["x"], outputs=["y"])
    graph.values["x"] = ir.Value("x", 1, (3,))
    for name, value in (("one", np.float32(1)), ("s", np.float32(2 / 255)), ("z", np.uint8(0))):
        graph.values[name] = ir.Value(name, data=np.asarray(value))
    graph.nodes = [ir.Node("Erf", ["x"], ["e"]), ir.Node("Add", ["e", "one"], ["a"]),
                   ir.Node("QuantizeLinear", ["a", "s", "z"], ["q"]), ir.Node("DequantizeLinear", ["q", "s", "z"], ["d"]),
                   ir.Node("Mul", ["x", "d"], ["y"])]
    assert bypass_round_trips(graph) == 1
    assert "Clip" not in [n.op_type for n in graph.nodes] and graph.nodes[-1].inputs == ["x", "a"]
