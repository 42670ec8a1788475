"""Sequence and optional types carried from ONNX import to export; If branch arity and Split's
num_outputs checked when a .flow file loads; the parity check's generated samples."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.loader import load_model_tests

from edge_runtime import load
from edge_runtime.format import ModelFormatError
from exporter import flow_writer, ir, verify
from exporter.onnx_export import to_onnx
from exporter.onnx_import import convert_onnx, import_onnx
from exporter.passes import optimize
from exporter.verify import ParityError, check_parity
from schemas import dtypes
from tests.edge_runtime.kernel_calls import run_kernel
from tests.exporter.test_onnx_export_roundtrip import check_runs_like, check_valid

RNG = np.random.default_rng(5)


def _onnx(nodes, inputs, outputs, initializers=None, opset: int = 18) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _tensor_type(elem: int, shape) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(elem, shape)


# -- 1. sequence and optional types ------------------------------------------------------------


def test_sequence_and_optional_values_keep_their_element_types() -> None:
    seq = helper.make_sequence_type_proto(_tensor_type(TensorProto.FLOAT, [2, None]))
    opt = helper.make_optional_type_proto(helper.make_sequence_type_proto(_tensor_type(TensorProto.INT64, None)))
    source = _onnx([helper.make_node("SequenceLength", ["s"], ["n"]), helper.make_node("OptionalHasElement", ["o"], ["h"])],
                   [helper.make_value_info("s", seq), helper.make_value_info("o", opt)],
                   [helper.make_tensor_value_info("n", TensorProto.INT64, []),
                    helper.make_tensor_value_info("h", TensorProto.BOOL, [])])
    values = import_onnx(source).graph.values
    assert values["s"].dtype == dtypes.SEQUENCE
    assert values["s"].element == ir.ElementType(dtypes.FLOAT, (2, -1))
    assert values["o"].dtype == dtypes.OPTIONAL
    assert values["o"].element == ir.ElementType(dtypes.SEQUENCE, element=ir.ElementType(dtypes.INT64))
    exported = to_onnx(optimize(import_onnx(source))[0])  # the passes keep them too
    assert {v.name: v.type for v in exported.graph.input} == {"s": seq, "o": opt}


@pytest.mark.parametrize("text", ["tensor(FP32)[2,-1]", "tensor(BYTES)[]", "tensor(INT64)", "seq(tensor(BOOL))",
                                  "optional(seq(tensor(FP16)[3]))", "seq(?)"])
def test_element_type_text_reads_back(text: str) -> None:
    assert str(ir.ElementType.parse(text)) == text


@pytest.mark.parametrize("text", ["FLOAT, 2x3", "tensor(NOPE)", "seq(tensor(FP32)", "Unknown type sequence_type"])
def test_element_type_text_that_is_no_type_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ir.ElementType.parse(text)


def test_empty_optional_of_a_sequence_is_written_with_its_type() -> None:
    # The importer kept Optional's `type` as onnx's printed text, "Unknown type sequence_type" here.
    elem = helper.make_sequence_type_proto(_tensor_type(TensorProto.FLOAT, None))
    source = _onnx([helper.make_node("Optional", [], ["o"], type=elem, name="empty"),
                    helper.make_node("OptionalHasElement", ["o"], ["y"])], [],
                   [helper.make_tensor_value_info("y", TensorProto.BOOL, [])])
    exported = to_onnx(import_onnx(source))
    check_valid(exported)
    assert exported.graph.node[0].attribute[0].tp == elem
    assert load(flow_writer.to_bytes(import_onnx(exported))).run({})["y"].item() is False


# A sample of the backend node cases whose graph inputs are sequences or optionals, which to_onnx
# refused before (tests/exporter/test_onnx_export_roundtrip.py covers one per op type).
TYPED_INPUT_CASES = ["test_sequence_insert_at_back", "test_identity_opt", "test_identity_sequence", "test_loop13_seq",
                     "test_optional_get_element_optional_sequence", "test_optional_has_element_empty_optional_input",
                     "test_sequence_map_add_2_sequences"]


@pytest.fixture(scope="module")
def node_cases() -> dict:
    return {case.name: case for case in load_model_tests(kind="node") if case.name in TYPED_INPUT_CASES}


@pytest.mark.parametrize("name", TYPED_INPUT_CASES)
def test_node_case_with_sequence_or_optional_inputs_round_trips(name: str, node_cases: dict) -> None:
    case = node_cases[name]
    exported = to_onnx(import_onnx(case.model))
    check_valid(exported)
    check_runs_like(exported, case)


# -- 2. If branch arity ------------------------------------------------------------------------


def _if_model(then_outputs: int) -> ir.Model:
    """``If`` with two outputs whose then branch returns ``then_outputs`` values (the else branch two)."""

    def branch(name: str, n: int) -> ir.Graph:
        g = ir.Graph(name=name)
        g.nodes = [ir.Node("Neg", ["x"], [f"{name}{i}"], name=f"{name}_neg{i}") for i in range(n)]
        g.outputs = [f"{name}{i}" for i in range(n)]
        return g

    g = ir.Graph(name="main")
    g.values["c"] = ir.Value("c", dtypes.BOOL, ())
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (2,))
    g.inputs, g.outputs = ["c", "x"], ["y0", "y1"]
    g.nodes = [ir.Node("If", ["c"], ["y0", "y1"], {"then_branch": branch("then", then_outputs),
                                                   "else_branch": branch("else", 2)}, name="choose")]
    return ir.Model(g)


@pytest.mark.parametrize("then_outputs", [1, 3])
def test_if_branch_returning_another_count_is_refused_at_load(then_outputs: int) -> None:
    with pytest.raises(ModelFormatError, match=rf"node 0 'choose' \(If\): attribute 'then_branch' \(subgraph \d+\) "
                                               rf"returns {then_outputs} values but the node has 2 outputs"):
        load(flow_writer.to_bytes(_if_model(then_outputs)))
    out = load(flow_writer.to_bytes(_if_model(2))).run({"c": np.array(True), "x": np.float32([1, 2])})
    assert out["y0"].tolist() == out["y1"].tolist() == [-1, -2]


def test_if_kernel_checks_what_a_callable_branch_returns() -> None:
    # The trainer hands the kernel callables, which no load-time check sees.
    one = lambda: [np.float32(1)]
    with pytest.raises(ValueError, match=r"If: else_branch returned 1 values but the node has 2 outputs"):
        run_kernel("If", np.array(False), then_branch=one, else_branch=one, n_outputs=2)


# -- 3. Split's num_outputs --------------------------------------------------------------------


def test_split_num_outputs_other_than_the_node_outputs_is_refused_at_load() -> None:
    # 10**9 made the kernel cut a billion pieces (a hang); 3 is enough to show the file is refused.
    g = ir.Graph(inputs=["x"], outputs=["y"])
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (6,))
    g.nodes = [ir.Node("Split", ["x"], ["y"], {"axis": 0, "num_outputs": 3}, name="cut")]
    with pytest.raises(ModelFormatError, match=r"node 0 'cut' \(Split\): Split: num_outputs is 3 but the node has 1 outputs"):
        load(flow_writer.to_bytes(ir.Model(g)))


# -- 4. the parity check's generated samples ---------------------------------------------------


def _conv_dynamic_hw() -> onnx.ModelProto:
    """Two unpadded 3x3 convolutions: a 1x1 plane is too small for them."""
    w = (RNG.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    v = (RNG.standard_normal((2, 4, 3, 3)) * 0.3).astype(np.float32)
    return _onnx([helper.make_node("Conv", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
                  helper.make_node("Conv", ["r", "v"], ["y"])],
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, "H2", "W2"])], {"w": w, "v": v})


def test_convert_checks_a_conv_net_with_dynamic_spatial_dims(tmp_path) -> None:
    report = convert_onnx(_conv_dynamic_hw(), tmp_path / "conv.flow")
    assert report.parity.ok


def test_generated_sample_stays_within_its_byte_limit(monkeypatch) -> None:
    model = import_onnx(_conv_dynamic_hw())
    monkeypatch.setattr(verify, "MAX_GENERATED_SAMPLE_BYTES", 3 * 32 * 32 * 4 - 1)
    with pytest.raises(ParityError, match=r"generated .*x: float32\[1, 3, 1, 1\].*--sample x=file\.npy"):
        check_parity(model, model)


def test_failing_generated_sample_is_named_with_a_way_out() -> None:
    # No fill of the dynamic dim suits a reshape to rows of 7: only a given sample can.
    g = ir.Graph(inputs=["x"], outputs=["y"])
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (2, -1))
    g.values["rows"] = ir.Value("rows", data=np.array([-1, 7], np.int64))
    g.nodes = [ir.Node("Reshape", ["x", "rows"], ["y"], name="rows")]
    model = ir.Model(g)
    with pytest.raises(ParityError) as caught:
        check_parity(model, model)
    message = str(caught.value)
    assert "reference model fails on the edge runtime" in message
    assert "the sample was generated from the model's signature (x: float32[2, 1])" in message
    assert "--sample x=file.npy" in message
    assert check_parity(model, model, {"x": RNG.standard_normal((2, 7)).astype(np.float32)}).ok
