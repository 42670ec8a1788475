"""ONNX models that protobuf reads but that are malformed as graphs: each conversion stops with a
``ModelFormatError`` or ``UnsupportedOpError`` naming the node, value or initializer, never a raw
KeyError, TypeError or MemoryError."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_runtime import ModelFormatError, UnsupportedOpError, load
from exporter.onnx_import import convert_onnx, import_onnx, onnx_to_flow_bytes
from flowstack_cli.main import main


def make_model(nodes, inputs, outputs, initializers=(), opsets=(("", 17),), functions=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], functions=list(functions))
    model.ir_version = 8
    return model


def tensor(name: str, shape, dtype=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, dtype, shape)


ONES = numpy_helper.from_array(np.ones(2, np.float32), "w")


@pytest.mark.parametrize(("nodes", "initializers", "message"), [
    ([helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")], [],
     r"node 'b' writes 'y', which is already written by node 'a'"),
    ([helper.make_node("Relu", ["x"], ["x"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")], [],
     r"node 'a' writes 'x', which is already a graph input"),
    ([helper.make_node("Relu", ["x"], ["w"], name="a"), helper.make_node("Add", ["x", "w"], ["y"], name="b")], [ONES],
     r"node 'a' writes 'w', which is already an initializer"),
], ids=["two-writers", "writes-input", "writes-initializer"])
def test_a_value_has_one_writer(nodes, initializers, message) -> None:
    with pytest.raises(ModelFormatError, match=r"graph 'g': " + message):
        import_onnx(make_model(nodes, [tensor("x", [2])], [tensor("y", [2])], initializers))


def test_recursive_local_function() -> None:
    calls_itself = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain="local")],
                                        [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
    model = make_model([helper.make_node("F", ["x"], ["y"], domain="local", name="call")], [tensor("x", [2])],
                       [tensor("y", [2])], opsets=(("", 17), ("local", 1)), functions=[calls_itself])
    with pytest.raises(ModelFormatError, match=r"cannot inline the model's local functions \['local::F'\]: .*recursive"):
        import_onnx(model)


def test_negative_initializer_dims() -> None:
    # numpy would read dims [-1, 2] as "whatever fits": a (1, 2) weight the file never declared.
    bad = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-1, 2], raw_data=np.zeros(2, np.float32).tobytes())
    model = make_model([helper.make_node("Add", ["x", "w"], ["y"])], [tensor("x", [2])], [tensor("y", [2])], [bad])
    with pytest.raises(ModelFormatError, match=r"initializer 'w' has negative dims \[-1, 2\]"):
        import_onnx(model)


@pytest.mark.parametrize(("opsets", "message"), [
    ((), r"imports no version of the default ONNX domain"),
    ((("", 0),), r"opset import ai.onnx version 0 is out of range \(1\.\.\d+"),
    ((("", 2**40),), r"opset import ai.onnx version 1099511627776 is out of range \(1\.\.\d+"),
    ((("", 17), ("com.example", 2**40)), r"opset import com.example version 1099511627776 is out of range \(1\.\.2147483647\)"),
], ids=["missing", "zero", "absurd", "absurd-custom-domain"])
def test_opset_imports_out_of_range(opsets, message) -> None:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [2])], [tensor("y", [2])], opsets=opsets)
    with pytest.raises(ModelFormatError, match=message):
        onnx_to_flow_bytes(model)


def test_required_input_left_empty() -> None:
    model = make_model([helper.make_node("Add", ["x", ""], ["y"], name="sum")], [tensor("x", [2])], [tensor("y", [2])])
    with pytest.raises(UnsupportedOpError, match=r"node 'sum' \(op Add\): Add: input 1 \('B'\) is required but omitted"):
        import_onnx(model)


@pytest.mark.parametrize(("value", "got"), [
    ("last", r"str 'last'"),
    ([1, 2], r"a list \(\[1, 2\]\)"),
    (helper.make_graph([], "empty", [], []), r"a graph"),
], ids=["string", "ints", "graph"])
def test_attribute_of_the_wrong_type(value, got) -> None:
    model = make_model([helper.make_node("Softmax", ["x"], ["y"], name="probs", axis=value)], [tensor("x", [2])], [tensor("y", [2])])
    with pytest.raises(UnsupportedOpError, match=r"node 'probs' \(op Softmax\): Softmax: attribute 'axis' must be int, got " + got):
        import_onnx(model)


def test_huge_declared_input_is_not_sampled(tmp_path) -> None:
    """The parity check generates a sample from the declared shape: 40 GB must not be attempted."""
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor("x", [100_000, 100_000])], [tensor("y", None)])
    with pytest.raises(ValueError, match=r"input 'x' is declared with shape \[100000, 100000\]: a generated sample "
                                         r"would take 40,000,000,000 bytes"):
        convert_onnx(model, tmp_path / "m.flow")
    # Converting without the check, or with a sample, still works: the model itself is fine.
    convert_onnx(model, tmp_path / "m.flow", verify=False)
    assert load(tmp_path / "m.flow").inputs[0].shape == (100_000, 100_000)


def test_cli_convert_reports_malformed_graph_in_one_line(tmp_path, capsys) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="a"), helper.make_node("Neg", ["x"], ["y"], name="b")]
    path = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, [tensor("x", [2])], [tensor("y", [2])]), path)
    assert main(["convert", str(path), "-o", str(tmp_path / "m.flow")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "node 'b' writes 'y', which is already written by node 'a'" in err


def test_local_function_is_inlined() -> None:
    double = helper.make_function("local", "Double", ["a"], ["b"], [helper.make_node("Add", ["a", "a"], ["b"])],
                                  [helper.make_opsetid("", 17)])
    model = make_model([helper.make_node("Double", ["x"], ["y"], domain="local", name="call")], [tensor("x", [2])],
                       [tensor("y", [2])], opsets=(("", 17), ("local", 1)), functions=[double])
    out = load(onnx_to_flow_bytes(model)).run({"x": np.array([1.0, -2.0], np.float32)})["y"]
    assert out.tolist() == [2.0, -4.0]


def test_split_into_more_pieces_than_outputs() -> None:
    # The kernel would cut a billion pieces (and hang) to fill a node with one output.
    model = make_model([helper.make_node("Split", ["x"], ["y"], name="cut", axis=0, num_outputs=10**9)],
                       [tensor("x", [2])], [tensor("y", None)], opsets=(("", 18),))
    with pytest.raises(ModelFormatError, match=r"node 'cut' \(op Split\): num_outputs is 1000000000 but the node has 1 outputs"):
        import_onnx(model)
