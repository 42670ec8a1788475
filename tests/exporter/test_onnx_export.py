"""ONNX out: ONNX -> IR -> passes -> to_onnx is valid ONNX that onnxruntime runs like the original."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import edge_runtime.kernels.fused  # noqa: F401  (registers the fused kernels until the families list them)
import schemas.ops.fused  # noqa: F401
from edge_runtime import load
from exporter import flow_writer, ir
from exporter.onnx_export import to_onnx
from exporter.onnx_import import import_onnx
from exporter.passes import optimize
from schemas import UnsupportedOpError

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(1)


def f32(*shape, scale=1.0, low=None) -> np.ndarray:
    if low is not None:
        return RNG.uniform(low, low + 1.0, shape).astype(np.float32)
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def onnx_model(nodes, inputs, outputs, initializers, opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def conv_net() -> onnx.ModelProto:
    """Conv -> BatchNorm -> Relu -> MaxPool, twice, then Flatten -> Gemm -> Clip(0, 6) -> Gemm."""
    init, nodes, x = {}, [], "x"
    for i, (cin, cout) in enumerate([(1, 4), (4, 8)]):
        init.update({f"w{i}": f32(cout, cin, 3, 3, scale=0.3), f"b{i}": f32(cout, scale=0.1), f"s{i}": f32(cout, low=0.5),
                     f"bb{i}": f32(cout, scale=0.1), f"m{i}": f32(cout, scale=0.1), f"v{i}": f32(cout, low=0.5)})
        nodes += [
            helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], name=f"conv{i}"),
            helper.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"bb{i}", f"m{i}", f"v{i}"], [f"n{i}"], name=f"bn{i}"),
            helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}"),
            helper.make_node("MaxPool", [f"r{i}"], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2], name=f"pool{i}"),
        ]
        x = f"p{i}"
    init.update(fw=f32(32, 8 * 2 * 2, scale=0.2), fb=f32(32), lo=np.float32(0), hi=np.float32(6),
                ow=f32(32, 10, scale=0.2), ob=f32(10))
    nodes += [
        helper.make_node("Flatten", [x], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fw", "fb"], ["h"], transB=1, name="fc"),
        helper.make_node("Clip", ["h", "lo", "hi"], ["a"], name="relu6"),
        helper.make_node("Gemm", ["a", "ow", "ob"], ["y"], name="out"),
    ]
    return onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], init)


def mlp() -> onnx.ModelProto:
    init = {"w1": f32(6, 16), "b1": f32(16), "w2": f32(16, 3), "b2": f32(3), "shape": np.array([-1, 6], np.int64)}
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["x2"], name="flat"),
        helper.make_node("MatMul", ["x2", "w1"], ["h"], name="mm1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="add1"),
        helper.make_node("Tanh", ["hb"], ["a"], name="tanh"),
        helper.make_node("Dropout", ["a"], ["d"], name="drop"),
        helper.make_node("MatMul", ["d", "w2"], ["o"], name="mm2"),
        helper.make_node("Add", ["o", "b2"], ["logits"], name="add2"),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax"),
    ]
    return onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], init)


def with_if() -> onnx.ModelProto:
    """y = If(sum(x) > 0, then: Relu(x * w) (x and w from the outer graph), else: Identity(x) - 1)."""
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t0"], name="then_mul"), helper.make_node("Relu", ["t0"], ["t"], name="then_relu")],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [4])])
    else_g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["x_copy"], name="else_copy"),
         helper.make_node("Sub", ["x_copy", "one"], ["e"], name="else_sub")], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])], [numpy_helper.from_array(np.float32(1), "one")])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0, name="sum"),
        helper.make_node("Greater", ["s", "zero"], ["c"], name="positive"),
        helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="branch"),
    ]
    return onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                      {"w": f32(4), "zero": np.float32(0)})


def with_loop() -> onnx.ModelProto:
    """Three iterations of acc = acc * w + x (w and x captured)."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["acc_in", "w"], ["m"], name="body_mul"),
         helper.make_node("Add", ["m", "x"], ["acc_out"], name="body_add"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")]
    return onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
                      {"n": np.array(3, np.int64), "w": f32(3, scale=0.5)})


def ort_run(proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


CASES = {
    "conv_net": (conv_net, lambda: [{"x": f32(n, 1, 8, 8)} for n in (1, 3)]),
    "mlp": (mlp, lambda: [{"x": f32(n, 2, 3)} for n in (1, 5)]),
    "if": (with_if, lambda: [{"x": np.abs(f32(4))}, {"x": -np.abs(f32(4))}]),
    "loop": (with_loop, lambda: [{"x": f32(3)}]),
}


@pytest.mark.parametrize("case", CASES)
def test_round_trip_through_passes_matches_onnxruntime(case) -> None:
    build, feeds = CASES[case]
    original = build()
    optimized, report = optimize(import_onnx(original))
    exported = to_onnx(optimized)
    onnx.checker.check_model(exported, full_check=True)
    assert report.nodes_after <= report.nodes_before
    runtime = load(flow_writer.to_bytes(optimized))
    for feed in feeds():
        want = ort_run(original, feed)[0]
        np.testing.assert_allclose(ort_run(exported, feed)[0], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(runtime.run(feed)["y"], want, rtol=1e-5, atol=1e-5)


def test_fused_ops_are_written_as_standard_onnx() -> None:
    optimized, _ = optimize(import_onnx(conv_net()))
    assert {"FusedConvMaxPool", "FusedGemm"} <= {n.op_type for n in optimized.graph.nodes}
    exported = to_onnx(optimized)
    ops = [n.op_type for n in exported.graph.node]
    assert ops.count("Conv") == 2 and ops.count("Relu") == 2 and ops.count("MaxPool") == 2 and "Clip" in ops
    assert "BatchNormalization" not in ops
    assert all(n.domain == "" for n in exported.graph.node)
    assert [o.domain for o in exported.opset_import] == [""]


def depthwise_project_net() -> onnx.ModelProto:
    """MobileNetV2's depthwise 3x3 + BatchNorm + Clip(0, 6) -> 1x1 project (+ Relu), at 16x16."""
    init = {"w": f32(8, 1, 3, 3), "s": f32(8, low=0.5), "bb": f32(8, scale=0.1), "m": f32(8, scale=0.1),
            "v": f32(8, low=0.5), "lo": np.float32(0), "hi": np.float32(6), "w2": f32(3, 8, 1, 1, scale=0.3),
            "b2": f32(3, scale=0.1)}
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["d"], group=8, pads=[1, 1, 1, 1], name="dw"),
        helper.make_node("BatchNormalization", ["d", "s", "bb", "m", "v"], ["n"], name="bn"),
        helper.make_node("Clip", ["n", "lo", "hi"], ["a"], name="relu6"),
        helper.make_node("Conv", ["a", "w2", "b2"], ["p"], name="project"),
        helper.make_node("Relu", ["p"], ["y"], name="relu"),
    ]
    return onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 16, 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 16, 16])], init)


def expand_depthwise_net() -> onnx.ModelProto:
    """MobileNetV2's 1x1 expand + BatchNorm + Clip(0, 6) -> stride-2 depthwise 3x3 + Clip, at 28x28."""
    init = {"w1": f32(12, 4, 1, 1, scale=0.5), "b1": f32(12, scale=0.1), "w": f32(12, 1, 3, 3), "s": f32(12, low=0.5),
            "bb": f32(12, scale=0.1), "m": f32(12, scale=0.1), "v": f32(12, low=0.5), "lo": np.float32(0),
            "hi": np.float32(6)}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["e"], name="expand"),
        helper.make_node("Clip", ["e", "lo", "hi"], ["a"], name="expand_relu6"),
        helper.make_node("Conv", ["a", "w"], ["d"], group=12, pads=[1, 1, 1, 1], strides=[2, 2], name="dw"),
        helper.make_node("BatchNormalization", ["d", "s", "bb", "m", "v"], ["n"], name="bn"),
        helper.make_node("Clip", ["n", "lo", "hi"], ["y"], name="dw_relu6"),
    ]
    return onnx_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 28, 28])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 12, 14, 14])], init)


@pytest.mark.parametrize("build, fused, written, x_shape", [
    (depthwise_project_net, "FusedConvPointwise", ["Conv", "Clip", "Conv", "Relu"], (2, 8, 16, 16)),
    (expand_depthwise_net, "FusedPointwiseConv", ["Conv", "Clip", "Conv", "Clip"], (2, 4, 28, 28)),
], ids=["conv-pointwise", "pointwise-conv"])
def test_fused_convolution_pair_is_written_as_two_convolutions(build, fused, written, x_shape) -> None:
    source = build()
    optimized, _ = optimize(import_onnx(source))
    assert [n.op_type for n in optimized.graph.nodes] == [fused]
    exported = to_onnx(optimized)
    assert [n.op_type for n in exported.graph.node] == written
    onnx.checker.check_model(exported, full_check=True)
    x = f32(*x_shape)
    want = ort_run(source, {"x": x})[0]
    np.testing.assert_allclose(ort_run(exported, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(load(flow_writer.to_bytes(optimized)).run({"x": x})["y"], want, rtol=1e-4, atol=1e-5)


def test_opset_comes_from_the_model() -> None:
    m = import_onnx(mlp())
    m.opset_imports[""] = 21
    assert to_onnx(m).opset_import[0].version == 21
    assert to_onnx(import_onnx(mlp())).opset_import[0].version == 18  # raised to the forms the IR holds


def test_outputs_of_unknown_type_are_inferred() -> None:
    g = ir.Graph(nodes=[ir.Node("Relu", ["x"], ["y"], name="r")], inputs=["x"], outputs=["y"])
    g.values["x"] = ir.Value("x", 1, (2, 3))
    exported = to_onnx(ir.Model(g))
    onnx.checker.check_model(exported, full_check=True)
    assert exported.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    x = f32(2, 3)
    np.testing.assert_allclose(ort_run(exported, {"x": x})[0], np.maximum(x, 0))


def test_training_ops_have_no_onnx_form() -> None:
    g = ir.Graph(nodes=[ir.Node("Variable", [], ["v"], name="weights", domain="flowstack")], outputs=["v"])
    with pytest.raises(UnsupportedOpError, match=r"node 'weights' \(op flowstack::Variable\)"):
        to_onnx(ir.Model(g))
