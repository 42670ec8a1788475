""".flow files that are valid FlatBuffers but say something impossible: each is refused at load with
a ``ModelFormatError`` naming the part that is wrong, and the CLI reports it in one line.

The files are written by the real writer and then edited where a hand (or a bug) would: in the
writer's flattened tables before they are serialized, or in a scalar field of the finished buffer.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest

from edge_runtime import ModelFormatError, load
from edge_runtime.format import parse
from exporter import flow_writer, ir
from flowstack_cli.main import main
from schemas import dtypes
from schemas.fb.AttrType import AttrType
from schemas.fb.Model import Model as FbModel
from tests.edge_runtime.flow_models import mlp

X = np.ones((2, 4), np.float32)


def edited(model: ir.Model, edit: Callable[[flow_writer._Layout], None]) -> bytes:
    """``model`` written with ``edit`` applied to the writer's tables (subgraphs, op codes) first."""

    class Edited(flow_writer._Layout):
        def __init__(self, m: ir.Model):
            super().__init__(m)
            edit(self)

    original = flow_writer._Layout
    flow_writer._Layout = Edited
    try:
        return flow_writer.to_bytes(model)
    finally:
        flow_writer._Layout = original


def patched(data: bytes, table, slot: int, fmt: str, value: int) -> bytes:
    """``data`` with the scalar field at vtable ``slot`` of ``table`` (read from ``data``) set to ``value``."""
    field = table._tab.Offset(slot)
    assert field, "the writer forces defaults, so every scalar field is present"
    out = bytearray(data)
    struct.pack_into(fmt, out, table._tab.Pos + field, value)
    return bytes(out)


def main_graph(layout) -> dict:
    return layout.subgraphs[0]


def slot(layout, name: str) -> int:
    return main_graph(layout)["slots"][name]


def if_model() -> ir.Model:
    """y = relu(x) if c else -x: subgraph 1 is the then branch, subgraph 2 the else branch."""

    def branch(name: str, op: str) -> ir.Graph:
        g = ir.Graph(name=name)
        g.nodes = [ir.Node(op, ["x"], [f"{name}_y"], name=f"{name}_node")]
        g.outputs = [f"{name}_y"]
        return g

    g = ir.Graph(name="main")
    g.values["c"] = ir.Value("c", dtypes.BOOL, ())
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (2, 4))
    g.inputs, g.outputs = ["c", "x"], ["y"]
    g.nodes = [ir.Node("If", ["c"], ["y"], {"then_branch": branch("then", "Relu"), "else_branch": branch("else", "Neg")},
                       name="choose")]
    return ir.Model(g)


def branch_calls(*targets: int) -> Callable:
    """An edit making subgraph k (k = 1, 2, ...) hold an If whose branches both run ``targets[k - 1]``."""

    def edit(layout) -> None:
        code = layout.opcodes.setdefault(("", "If", 1), len(layout.opcodes))
        for sub, target in enumerate(targets, start=1):
            graph = layout.subgraphs[sub]
            out = graph["ops"][0]["outputs"]
            graph["ops"] = [{"code": code, "inputs": [0], "outputs": out, "name": f"recurse{sub}", "implicit": [0],
                             "attrs": [("then_branch", AttrType.GRAPH, target), ("else_branch", AttrType.GRAPH, target)]}]

    return edit


# -- the files that load: the checks below must not refuse these ----------------------------------

def test_branches_may_share_a_subgraph() -> None:
    def both_relu(layout) -> None:
        attrs = main_graph(layout)["ops"][0]["attrs"]
        main_graph(layout)["ops"][0]["attrs"] = [(k, kind, 1) for k, kind, _ in attrs]

    model = load(edited(if_model(), both_relu))
    assert model.run({"c": np.array(False), "x": -X})["y"].tolist() == np.zeros_like(X).tolist()


def test_omitted_optional_outputs_may_share_the_empty_tensor() -> None:
    g = ir.Graph()
    g.values["x"] = ir.Value("x", dtypes.FLOAT, (2, 4))
    g.inputs, g.outputs = ["x"], ["z"]
    g.nodes = [ir.Node("Dropout", ["x"], ["y", ""], name="d1"), ir.Node("Dropout", ["y"], ["z", ""], name="d2")]
    assert load(flow_writer.to_bytes(ir.Model(g))).run({"x": X})["z"].tolist() == X.tolist()


# -- tensors and buffers --------------------------------------------------------------------------

def test_input_listed_twice() -> None:
    data = edited(mlp(), lambda layout: main_graph(layout)["inputs"].append(slot(layout, "x")))
    with pytest.raises(ModelFormatError, match=r"subgraph 0: tensor\(s\) \[0\] \('x'\) listed more than once among the inputs"):
        load(data)


def test_overlapping_buffers() -> None:
    data = flow_writer.to_bytes(mlp())
    root = FbModel.GetRootAs(data, 0)
    data = patched(data, root.Buffers(2), 4, "<Q", root.Buffers(1).Offset())  # buffer 2 starts where buffer 1 does
    with pytest.raises(ModelFormatError, match=r"buffers: buffer \d \(offset \d+\) overlaps buffer \d \(offset \d+, \d+ bytes\)"):
        parse(data)


def test_empty_string_constant_is_still_a_constant() -> None:
    # Its string_data vector is present but empty; it used to read back as "no data", so the graph
    # that reads it failed to load ("reads tensor 0 ('s') before any node writes it").
    g = ir.Graph()
    g.values["s"] = ir.Value("s", data=np.zeros((0, 3), dtype=object))
    g.outputs = ["y"]
    g.nodes = [ir.Node("Identity", ["s"], ["y"], name="same")]
    out = load(flow_writer.to_bytes(ir.Model(g))).run({})["y"]
    assert out.dtype == object and out.shape == (0, 3)


def test_shape_whose_size_overflows_int64() -> None:
    # (2**62 + 1) * 8 elements wraps around int64 to exactly the 8 floats the buffer holds.
    def huge(layout) -> None:
        main_graph(layout)["tensors"][slot(layout, "b1")]["shape"] = (2**62 + 1, 8)

    with pytest.raises(ModelFormatError, match=r"tensor 3 \('b1'\): buffer 2 holds 32 bytes but shape "
                                               r"\[4611686018427387905, 8\] of float32 needs 147573952589676412960"):
        parse(edited(mlp(), huge))


# -- operators ------------------------------------------------------------------------------------

def test_required_input_omitted() -> None:
    def omit(layout) -> None:
        main_graph(layout)["ops"][0]["inputs"][0] = -1

    with pytest.raises(ModelFormatError, match=r"node 0 'dense1' \(MatMul\): MatMul: input 0 \('A'\) is required but omitted"):
        load(edited(mlp(), omit))


def _second_writer(layout) -> None:  # bias1 also writes dense1's h
    ops = main_graph(layout)["ops"]
    ops[1]["outputs"][0] = ops[0]["outputs"][0]


def _writes_input(layout) -> None:
    main_graph(layout)["ops"][2]["outputs"][0] = slot(layout, "x")


def _writes_constant(layout) -> None:
    main_graph(layout)["ops"][0]["outputs"][0] = slot(layout, "w2")


@pytest.mark.parametrize(("edit", "message"), [
    (_second_writer, r"node 1 'bias1' \(Add\) writes tensor 2 \('h'\), which subgraph 0, node 0 'dense1' \(MatMul\) already writes"),
    (_writes_input, r"node 2 'relu1' \(Relu\) writes tensor 0 \('x'\), which is an input of subgraph 0"),
    (_writes_constant, r"node 0 'dense1' \(MatMul\) writes tensor 6 \('w2'\), which is a constant"),
], ids=["two-writers", "writes-input", "writes-constant"])
def test_a_tensor_that_is_read_has_one_writer(edit, message) -> None:
    with pytest.raises(ModelFormatError, match=message):
        load(edited(mlp(), edit))


@pytest.mark.parametrize(("targets", "message"), [
    ((1, 2), r"subgraph 1, node 0 'recurse1' \(If\): attribute 'then_branch' refers to subgraph 1, which contains this node"),
    ((2, 1), r"subgraph 2, node 0 'recurse2' \(If\): attribute 'then_branch' refers to subgraph 1, which contains this node"),
], ids=["calls-itself", "mutual"])
def test_subgraph_recursion_is_refused_at_load(targets, message) -> None:
    with pytest.raises(ModelFormatError, match=message):
        load(edited(if_model(), branch_calls(*targets)))


def nested_ifs(depth: int) -> bytes:
    """A main graph whose If runs subgraph 3, whose If runs subgraph 4, ... ``depth`` graphs deep."""

    def nest(layout) -> None:
        code = layout.opcodes.setdefault(("", "If", 1), len(layout.opcodes))
        relu = next(c for (_, name, _), c in layout.opcodes.items() if name == "Relu")
        for _ in range(depth):
            sub = len(layout.subgraphs)
            tensors = [{"name": "x", "dtype": dtypes.FLOAT, "shape": (2, 4), "buffer": 0, "strings": None},
                       {"name": "y", "dtype": dtypes.FLOAT, "shape": None, "buffer": 0, "strings": None}]
            call = [("then_branch", AttrType.GRAPH, sub + 1), ("else_branch", AttrType.GRAPH, sub + 1)]
            layout.subgraphs.append({"name": f"level{sub}", "tensors": tensors, "inputs": [0], "outputs": [1], "ops": [
                {"code": code, "inputs": [0], "outputs": [1], "attrs": call, "name": f"nest{sub}", "implicit": [0]}]})
        layout.subgraphs[-1]["ops"] = [{"code": relu, "inputs": [0], "outputs": [1], "attrs": [], "name": "leaf", "implicit": []}]
        for attr in ("then_branch", "else_branch"):
            _set_attr(1, 0, attr, AttrType.GRAPH, 3)(layout)
        layout.subgraphs[1]["ops"][0]["code"] = code
        layout.subgraphs[1]["ops"][0]["implicit"] = [0]

    return edited(if_model(), nest)


def test_nesting_is_bounded() -> None:
    # 40 deep plans and runs; 400 deep used to end in a raw RecursionError at load.
    feeds = {"c": np.array(True), "x": -X}
    assert load(nested_ifs(40)).run(feeds)["y"].tolist() == np.zeros_like(X).tolist()
    with pytest.raises(ModelFormatError, match=r"node 0 'nest\d+' \(If\): attribute 'then_branch' nests subgraph \d+ more than 64 graphs deep"):
        load(nested_ifs(400))


def _softmax_model() -> ir.Model:
    model = mlp()
    model.graph.nodes.append(ir.Node("Softmax", ["y"], ["p"], {"axis": 1}, name="probs"))
    model.graph.outputs = ["p"]
    return model


def _set_attr(sub: int, op: int, key: str, kind: int, value) -> Callable:
    def edit(layout) -> None:
        node = layout.subgraphs[sub]["ops"][op]
        node["attrs"] = [a for a in node["attrs"] if a[0] != key] + [(key, kind, value)]

    return edit


@pytest.mark.parametrize(("model", "edit", "message"), [
    (_softmax_model, _set_attr(0, 4, "axis", AttrType.STRING, "one"),
     r"node 4 'probs' \(Softmax\): Softmax: attribute 'axis' must be int, got str 'one'"),
    (_softmax_model, _set_attr(0, 4, "axis", AttrType.FLOATS, [1.0, 2.0]),
     r"node 4 'probs' \(Softmax\): Softmax: attribute 'axis' must be int, got a list \(\[1.0, 2.0\]\)"),
    (if_model, _set_attr(0, 0, "then_branch", AttrType.INT, 3),
     r"node 0 'choose' \(If\): If: attribute 'then_branch' must be graph, got int 3"),
], ids=["int-as-string", "int-as-floats", "graph-as-int"])
def test_attribute_of_the_wrong_type(model, edit, message) -> None:
    with pytest.raises(ModelFormatError, match=message):
        load(edited(model(), edit))


# -- the command line -----------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["inspect", "run"])
def test_cli_reports_a_structural_error_in_one_line(command, tmp_path, capsys) -> None:
    path = tmp_path / "bad.flow"
    path.write_bytes(edited(mlp(), lambda layout: main_graph(layout)["inputs"].append(slot(layout, "x"))))
    np.save(tmp_path / "x.npy", X)
    args = [command, str(path)] + (["--input", f"x={tmp_path / 'x.npy'}"] if command == "run" else [])
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"flowstack {command}: error: {path}: subgraph 0: tensor(s) [0] ('x') listed more than once")


@pytest.mark.parametrize(("metadata", "shown"), [
    ({"labels": ""}, "metadata:"),
    ({"frozen_ops": "many", "frozen_size": "1"}, "  frozen_ops: many"),
], ids=["empty-labels", "non-numeric-figures"])
def test_inspect_shows_odd_metadata_as_it_is(metadata, shown, tmp_path, capsys) -> None:
    model = mlp()
    model.metadata = metadata
    path = tmp_path / "m.flow"
    flow_writer.write(model, path)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert shown in out and "frozen graph:" not in out
