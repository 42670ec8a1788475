"""ONNX import: supported graphs convert and match onnxruntime; bad ones are refused by name."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_runtime import ModelFormatError, UnsupportedOpError, load
from exporter.onnx_import import convert_onnx, import_onnx, onnx_to_flow_bytes


def make_model(nodes, inputs, outputs, initializers=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # what onnxruntime reads
    return model


def tensor(name: str, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


def test_matches_onnxruntime_with_dynamic_batch(tmp_path) -> None:
    import onnxruntime as ort

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((6, 3)).astype(np.float32), "w")
    model = make_model(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="act")],
        [tensor("x", ["batch", 6])], [tensor("y", ["batch", 3])], [w],
    )
    path = tmp_path / "m.flow"
    convert_onnx(model, path)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    flow = load(path)
    for batch in (1, 7):
        x = rng.standard_normal((batch, 6)).astype(np.float32)
        np.testing.assert_allclose(flow.run({"x": x})["y"], session.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_unsupported_op_names_node_and_op() -> None:
    model = make_model([helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")], [tensor("x", [2])], [tensor("y", [2])])
    with pytest.raises(UnsupportedOpError, match=r"node 'mystery' \(op NoSuchOp\).*not supported"):
        import_onnx(model)


def test_unknown_domain_is_unsupported() -> None:
    node = helper.make_node("Relu", ["x"], ["y"], name="custom", domain="com.example")
    graph = helper.make_graph([node], "g", [tensor("x", [2])], [tensor("y", [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(UnsupportedOpError, match="domain com.example"):
        import_onnx(model)


def test_initializer_with_wrong_size_is_a_format_error() -> None:
    bad = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, 4], raw_data=np.zeros(3, np.float32).tobytes())
    model = make_model([helper.make_node("MatMul", ["x", "w"], ["y"])], [tensor("x", [1, 4])], [tensor("y", [1, 4])], [bad])
    with pytest.raises(ModelFormatError, match=r"initializer 'w' \(dims \[4, 4\]\)"):
        import_onnx(model)


def test_cycle_is_a_format_error() -> None:
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2")]
    model = make_model(nodes, [tensor("x", [2])], [tensor("b", [2])])
    with pytest.raises(ModelFormatError, match=r"cycle among nodes \['n1', 'n2'\]"):
        import_onnx(model)


def test_undefined_input_is_a_format_error() -> None:
    model = make_model([helper.make_node("Relu", ["ghost"], ["y"], name="n")], [tensor("x", [2])], [tensor("y", [2])])
    with pytest.raises(ModelFormatError, match=r"undefined value\(s\) \['ghost'\]"):
        import_onnx(model)


def test_garbage_bytes_are_a_format_error() -> None:
    with pytest.raises(ModelFormatError, match="not a readable ONNX model"):
        import_onnx(b"\x08\xff\xff\xff garbage")


def test_unsorted_nodes_are_ordered() -> None:
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="second"), helper.make_node("Add", ["x", "x"], ["a"], name="first")]
    model = make_model(nodes, [tensor("x", [2])], [tensor("y", [2])])
    out = load(onnx_to_flow_bytes(model)).run({"x": np.array([-1.0, 2.0], np.float32)})["y"]
    assert out.tolist() == [0.0, 4.0]


def test_constant_nodes_become_weights() -> None:
    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([1.0, -5.0], np.float32))),
        helper.make_node("Add", ["x", "c"], ["y"]),
    ]
    ir_model = import_onnx(make_model(nodes, [tensor("x", [2])], [tensor("y", [2])]))
    assert [n.op_type for n in ir_model.graph.nodes] == ["Add"]
    assert ir_model.graph.values["c"].data.tolist() == [1.0, -5.0]


def test_grid_sample_opset16_mode_names_are_upgraded() -> None:
    """PyTorch exports GridSample at opset 16 with mode="bilinear"; it must sample linearly, not cubically."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1, 1, (1, 4, 3, 2)).astype(np.float32)
    results = {}
    for opset, mode in ((16, "bilinear"), (20, "linear"), (16, "bicubic"), (20, "cubic")):
        node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode)
        graph = helper.make_graph(
            [node], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
             helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        results[mode] = load(onnx_to_flow_bytes(model)).run({"x": x, "grid": grid})["y"]
    np.testing.assert_array_equal(results["bilinear"], results["linear"])
    np.testing.assert_array_equal(results["bicubic"], results["cubic"])
    assert not np.allclose(results["linear"], results["cubic"])
