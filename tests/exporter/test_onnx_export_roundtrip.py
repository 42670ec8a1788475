"""Differential round trips: ONNX -> IR -> (passes) -> to_onnx must be valid ONNX that onnxruntime
(or, where onnxruntime cannot run the op, our runtime) runs like the original.

The parametrized test takes one ONNX backend node case per op type (the first by name our runtime
passes, see tests/conformance), so it stays fast; the named tests below are regressions for bugs
those round trips found.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.loader import load_model_tests

import edge_runtime.kernels.fused  # noqa: F401  (registers the fused kernels until the families list them)
import schemas.ops.fused  # noqa: F401
from edge_runtime import load
from exporter import flow_writer, ir
from exporter.onnx_export import MAX_OPSET, to_onnx
from exporter.onnx_import import import_onnx
from exporter.passes import optimize
from schemas import UnsupportedOpError
from tests.conformance.test_onnx_backend import RANDOM_CASES, expected_failures

ort = pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(3)
MAX_IR_VERSION = 13  # the newest IR version onnxruntime 1.31 reads
STANDARD_DOMAINS = ("", "ai.onnx.ml", "ai.onnx.preview", "ai.onnx.preview.training")

# Cases whose export is right but which a round trip cannot check, with the reason.
UNCHECKABLE = {
    "test_mvn": "onnx 1.23's own MeanVarianceNormalization function body fails onnx.checker's full check",
}


def _node_cases() -> dict[str, object]:
    """One node case per op type (of its first node): the first by name our runtime passes."""
    skip = {name for name, _ in expected_failures() + expected_failures(RANDOM_CASES)} | set(UNCHECKABLE)
    picked: dict[str, object] = {}
    for case in sorted(load_model_tests(kind="node"), key=lambda c: c.name):
        if case.name in skip:
            continue
        picked.setdefault(case.model.graph.node[0].op_type, case)
    return {case.name: case for case in picked.values()}


CASES = _node_cases()


def _array(value):
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value) if isinstance(value, (np.ndarray, np.generic, int, float, bool)) else value


def _session(proto: onnx.ModelProto):
    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _original_session(model: onnx.ModelProto):
    """onnxruntime on the case as written (its IR version lowered to one onnxruntime reads), or None."""
    model = copy.deepcopy(model)
    model.ir_version = min(model.ir_version, MAX_IR_VERSION)
    try:
        return _session(model)
    except Exception:  # noqa: BLE001 (onnxruntime raises its own classes; any refusal means the same)
        return None


def _feeds(proto: onnx.ModelProto, inputs) -> dict:
    return dict(zip([v.name for v in proto.graph.input], [_array(x) for x in inputs]))


def _assert_close(got, want, rtol: float, atol: float) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            _assert_close(g, w, rtol, atol)
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype == object:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def check_valid(exported: onnx.ModelProto) -> None:
    """What every exported model must be: checked, strictly inferable, readable by onnxruntime 1.31
    (unless an op is only defined in a newer opset), with unique initializers and standard ops only
    (the default domain's, ai.onnx.ml's for scikit-learn's models, and ONNX's preview domains')."""
    onnx.checker.check_model(exported, full_check=True)
    onnx.shape_inference.infer_shapes(exported, check_type=True, strict_mode=True)
    version = exported.opset_import[0].version
    assert exported.opset_import[0].domain == ""
    assert {o.domain for o in exported.opset_import} <= set(STANDARD_DOMAINS)
    if version > MAX_OPSET:
        assert any(onnx.defs.get_schema(n.op_type, version).since_version > MAX_OPSET for n in exported.graph.node)
    else:
        assert exported.ir_version <= MAX_IR_VERSION

    def walk(graph: onnx.GraphProto) -> None:
        names = [t.name for t in graph.initializer]
        assert len(names) == len(set(names)), names
        for node in graph.node:
            assert node.domain in STANDARD_DOMAINS, f"{node.domain}::{node.op_type} leaked"
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)

    walk(exported.graph)


def check_runs_like(exported: onnx.ModelProto, case) -> None:
    """onnxruntime runs ``exported`` to the case's expected outputs (or to what it computes for the
    original, where its own kernel differs from the reference); where onnxruntime cannot run the
    original at all, our runtime runs the re-imported export instead."""
    original = _original_session(case.model)
    exported_session = _session(exported) if original is not None else None
    runtime = None
    rtol, atol = case.rtol * 10, max(case.atol * 10, 1e-5)
    for inputs, outputs in case.data_sets:
        want = [_array(o) for o in outputs]
        theirs = None
        if original is not None:
            try:
                theirs = original.run(None, _feeds(case.model, inputs))
            except Exception:  # noqa: BLE001 (onnxruntime has the op but cannot take these inputs: bfloat16, ...)
                original = None
        if original is None:
            runtime = runtime or load(flow_writer.to_bytes(import_onnx(exported)))
            got = runtime.run(_feeds(case.model, inputs))
            _assert_close([got[v.name] for v in exported.graph.output], want, rtol, atol)
            continue
        got = exported_session.run(None, _feeds(exported, inputs))
        try:
            _assert_close(got, want, rtol, atol)
        except AssertionError:
            _assert_close(got, theirs, rtol, atol)


@pytest.mark.parametrize("name", CASES)
def test_node_case_round_trips(name: str) -> None:
    case = CASES[name]
    model = import_onnx(case.model)
    for candidate in (model, optimize(model)[0]):
        exported = to_onnx(candidate)
        check_valid(exported)
        check_runs_like(exported, case)


# -- regressions -------------------------------------------------------------------------------


def _onnx(nodes, inputs, outputs, initializers=None, opset: int = 17, ir_version: int = 8) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def _round_trip(source: onnx.ModelProto, feeds: dict, optimized: bool = False, rtol: float = 1e-5,
                atol: float = 1e-6) -> onnx.ModelProto:
    model = import_onnx(source)
    if optimized:
        model = optimize(model)[0]
    exported = to_onnx(model)
    check_valid(exported)
    _assert_close(_session(exported).run(None, feeds), _session(source).run(None, feeds), rtol, atol)
    return exported


def test_constant_graph_output_is_declared_with_its_shape() -> None:
    # An output that is a constant (or becomes one by folding) was declared without a shape.
    value = RNG.standard_normal((2, 3)).astype(np.float32)
    source = _onnx([helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(value))], [],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    exported = _round_trip(source, {})
    assert [d.dim_value for d in exported.graph.output[0].type.tensor_type.shape.dim] == [2, 3]


def test_opset_newer_than_onnxruntime_reads_is_lowered_where_the_ops_allow() -> None:
    # onnx 1.23 writes opset 28 and IR 14; onnxruntime 1.31 reads opset 26 and IR 13 at most.
    relu = _onnx([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], opset=28, ir_version=14)
    model = import_onnx(relu)
    exported = to_onnx(model)
    assert (exported.opset_import[0].version, exported.ir_version) == (MAX_OPSET, 13)
    x = RNG.standard_normal(3).astype(np.float32)
    np.testing.assert_array_equal(_session(exported).run(None, {"x": x})[0], np.maximum(x, 0))
    mod = _onnx([helper.make_node("Mod", ["x", "x"], ["y"], fmod=1)],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], opset=28, ir_version=14)
    assert to_onnx(import_onnx(mod)).opset_import[0].version == 28  # Mod-28 has no older form


def test_upgraded_dft_raises_the_opset_to_its_form() -> None:
    # The importer lifts DFT-17 (axis attribute) to DFT-20 (axis input); opset 19 was written.
    source = _onnx([helper.make_node("DFT", ["x"], ["y"], axis=1)],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 1])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 2])], opset=19)
    exported = _round_trip(source, {"x": RNG.standard_normal((2, 4, 1)).astype(np.float32)}, rtol=1e-4, atol=1e-4)
    assert exported.opset_import[0].version >= 20


def test_deprecated_ops_are_written_as_their_replacements() -> None:
    scatter = _onnx([helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=1)],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                    {"i": np.array([[2], [0]], np.int64), "u": np.float32([[5], [7]])}, opset=10, ir_version=5)
    exported = _round_trip(scatter, {"x": RNG.standard_normal((2, 3)).astype(np.float32)})
    assert [n.op_type for n in exported.graph.node] == ["ScatterElements"]
    x = RNG.standard_normal((1, 1, 2, 2)).astype(np.float32)
    for mode in ("nearest", "linear"):
        upsample = _onnx([helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode)],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 6])],
                         {"s": np.float32([1, 1, 2, 3])}, opset=9, ir_version=4)
        exported = _round_trip(upsample, {"x": x})
        assert [n.op_type for n in exported.graph.node] == ["Resize"]


def _conv_chain(dtype, activation: str = "Clip") -> onnx.ModelProto:
    """Three 3x3 convolutions on 8x8 planes, each + activation, then a max pool: a channels-last region."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    init, nodes, x = {}, [], "x"
    for i, (cin, cout) in enumerate([(1, 16), (16, 16), (16, 16)]):
        init.update({f"w{i}": (RNG.standard_normal((cout, cin, 3, 3)) * 0.3).astype(dtype),
                     f"b{i}": (RNG.standard_normal(cout) * 0.1).astype(dtype), f"hi{i}": np.asarray(6, dtype)})
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        if activation == "Clip":
            nodes.append(helper.make_node("Clip", [f"c{i}", "", f"hi{i}"], [f"a{i}"]))
        else:
            nodes.append(helper.make_node(activation, [f"c{i}"], [f"a{i}"]))
        x = f"a{i}"
    nodes.append(helper.make_node("MaxPool", [x], ["y"], kernel_shape=[2, 2], strides=[2, 2]))
    return _onnx(nodes, [helper.make_tensor_value_info("x", elem, ["N", 1, 8, 8])],
                 [helper.make_tensor_value_info("y", elem, ["N", 16, 4, 4])], init)


def _weight_bytes(model: onnx.ModelProto) -> int:
    return sum(numpy_helper.to_array(t).nbytes for t in model.graph.initializer)


def test_channels_last_weights_are_written_once() -> None:
    # The channels-last (O, kH, kW, I) weight was written next to the planar one built from it.
    source = _conv_chain(np.float32, "Relu")
    optimized, _ = optimize(import_onnx(source))
    assert "ChannelsLastConv" in {n.op_type for n in optimized.graph.nodes}
    exported = _round_trip(source, {"x": RNG.standard_normal((2, 1, 8, 8)).astype(np.float32)}, optimized=True,
                           rtol=1e-4, atol=1e-5)
    read = {name for node in exported.graph.node for name in node.input}
    assert all(t.name in read for t in exported.graph.initializer)
    assert _weight_bytes(exported) <= _weight_bytes(source)


def test_fused_clip_bounds_have_the_model_float_type() -> None:
    # Clip's bounds were float32 whenever the fused node's weight was not a constant of the graph:
    # the planar weight of a channels-last convolution, or a FusedGemm's dynamic B.
    x = RNG.standard_normal((2, 1, 8, 8)).astype(np.float16)
    optimized, _ = optimize(import_onnx(_conv_chain(np.float16)))
    assert {n.attrs.get("activation") for n in optimized.graph.nodes if n.op_type == "ChannelsLastConv"} == {"Clip"}
    _round_trip(_conv_chain(np.float16), {"x": x}, optimized=True, rtol=2e-2, atol=2e-2)
    gemm = _onnx([helper.make_node("Gemm", ["a", "b"], ["g"], transB=1), helper.make_node("Clip", ["g", "", "hi"], ["y"])],
                 [helper.make_tensor_value_info("a", TensorProto.FLOAT16, ["N", 6]),
                  helper.make_tensor_value_info("b", TensorProto.FLOAT16, [4, 6])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["N", 4])], {"hi": np.float16(0.5)})
    assert "FusedGemm" in {n.op_type for n in optimize(import_onnx(gemm))[0].graph.nodes}
    feeds = {"a": RNG.standard_normal((3, 6)).astype(np.float16), "b": RNG.standard_normal((4, 6)).astype(np.float16)}
    _round_trip(gemm, feeds, optimized=True, rtol=1e-2, atol=1e-2)


def test_empty_optional_keeps_its_type_attribute() -> None:
    # Optional's `type` (a TypeProto) was written as the string the importer keeps.
    source = _onnx([helper.make_node("Optional", [], ["o"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, [2])),
                    helper.make_node("OptionalHasElement", ["o"], ["y"])], [],
                   [helper.make_tensor_value_info("y", TensorProto.BOOL, [])], opset=18)
    exported = _round_trip(source, {})
    assert exported.graph.node[0].attribute[0].type == onnx.AttributeProto.TYPE_PROTO


def test_values_the_ir_cannot_type_are_refused_naming_them() -> None:
    untyped = onnx.TypeProto()
    untyped.sequence_type.SetInParent()  # a sequence declared without its element type
    seq = _onnx([helper.make_node("SequenceLength", ["s"], ["n"])], [helper.make_value_info("s", untyped)],
                [helper.make_tensor_value_info("n", TensorProto.INT64, [])], opset=18)
    with pytest.raises(UnsupportedOpError, match=r"graph input 's' has a type the IR does not fully record"):
        to_onnx(import_onnx(seq))
    g = ir.Graph(nodes=[ir.Node("Optional", [], ["o"], {"type": "Unknown type sequence_type"}, name="empty")],
                 outputs=["o"])
    with pytest.raises(UnsupportedOpError, match=r"node 'empty' \(op Optional\)"):
        to_onnx(ir.Model(g))


def test_list_attributes_are_written_with_their_onnx_type() -> None:
    # An ints attribute held as a NumPy array was written as a TENSOR attribute.
    g = ir.Graph(nodes=[ir.Node("Transpose", ["x"], ["t"], {"perm": np.array([1, 0])}, name="t"),
                        ir.Node("ReduceSum", ["t"], ["y"], {"keepdims": np.bool_(False)}, name="sum")],
                 inputs=["x"], outputs=["y"])
    g.values["x"] = ir.Value("x", TensorProto.FLOAT, (2, 3))
    exported = to_onnx(ir.Model(g))
    check_valid(exported)
    types = {a.name: a.type for node in exported.graph.node for a in node.attribute}
    assert types == {"perm": onnx.AttributeProto.INTS, "keepdims": onnx.AttributeProto.INT}
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(_session(exported).run(None, {"x": x})[0], x.sum(), rtol=1e-5)


def test_flowstack_op_without_standard_equivalent_is_refused_naming_it() -> None:
    g = ir.Graph(nodes=[ir.Node("MatrixInverse", ["x"], ["y"], name="inv", domain="flowstack")], inputs=["x"],
                 outputs=["y"])
    g.values["x"] = ir.Value("x", TensorProto.FLOAT, (2, 2))
    with pytest.raises(UnsupportedOpError, match=r"node 'inv' \(op flowstack::MatrixInverse\) has no ONNX form; no standard"):
        to_onnx(ir.Model(g))
