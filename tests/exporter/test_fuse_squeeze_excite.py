"""fuse_squeeze_excite: ReduceMean (or GlobalAveragePool), two 1x1 convolutions, Mul and the 1x1
projection become SqueezeExciteConv, planar and channels-last; near misses stay; the fused node is
written back as the chain onnxruntime runs."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from onnx import TensorProto, helper, numpy_helper

from exporter import ir
from exporter.onnx_export import to_onnx
from exporter.onnx_import import import_onnx
from exporter.passes import fuse_squeeze_excite, optimize
from tests.exporter.test_passes import assert_same_outputs, ops, randn, run


def se_block(c: int = 8, size: int = 6, *, pool: str = "ReduceMean", axes=(2, 3), mean_of: str = "x",
             gate_is_output: bool = False, gated_is_output: bool = False, project_kernel: int = 1,
             project_strides=(1, 1), expand_first: bool = False) -> ir.Model:
    """[1x1 Conv + Relu, 3x3 depthwise + Relu when ``expand_first``,] then squeeze-excite of x (SiLU,
    then a sigmoid gate, as PyTorch exports them) and the projection y = Conv(x * g), imported from
    ONNX (opset 18, axes as an input) so every value has its shape; knobs to build the near misses."""
    inits = {"w_r": randn(2, c, 1, 1), "b_r": randn(2), "w_e": randn(c, 2, 1, 1), "b_e": randn(c),
             "w_p": randn(4, c, project_kernel, project_kernel), "b_p": randn(4), "axes": np.array(axes, np.int64)}
    nodes = []
    x = "x"
    if expand_first:
        inits.update(w_x=randn(c, c, 1, 1) / 4, w_d=randn(c, 1, 3, 3) / 3)
        nodes += [helper.make_node("Conv", ["x", "w_x"], ["e"]), helper.make_node("Relu", ["e"], ["er"]),
                  helper.make_node("Conv", ["er", "w_d"], ["d"], group=c, pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["d"], ["dr"])]
        x = mean_of = "dr"
    squeeze = (helper.make_node("ReduceMean", [mean_of, "axes"], ["s"], keepdims=1) if pool == "ReduceMean"
               else helper.make_node(pool, [mean_of], ["s"]))
    nodes += [
        squeeze,
        helper.make_node("Conv", ["s", "w_r", "b_r"], ["r"]),
        helper.make_node("Sigmoid", ["r"], ["rs"]),
        helper.make_node("Mul", ["r", "rs"], ["h"]),
        helper.make_node("Conv", ["h", "w_e", "b_e"], ["ge"]),
        helper.make_node("Sigmoid", ["ge"], ["g"]),
        helper.make_node("Mul", [x, "g"], ["gated"]),
        helper.make_node("Conv", ["gated", "w_p", "b_p"], ["y"], pads=[project_kernel // 2] * 4,
                         strides=list(project_strides)),
    ]
    outputs = ["y"] + (["g"] if gate_is_output else []) + (["gated"] if gated_is_output else [])
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, c, size, size]) for n in ("x", "z")]
    proto = helper.make_graph(nodes, "se", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return import_onnx(helper.make_model(proto, opset_imports=[helper.make_opsetid("", 18)]))


def _feeds(before: ir.Model) -> dict[str, np.ndarray]:
    shape = before.graph.values["x"].shape
    return {"x": randn(*shape) * 2, "z": randn(*shape)}


@pytest.mark.parametrize("pool", ["ReduceMean", "GlobalAveragePool"])
def test_planar_squeeze_excite_and_projection_fuse(pool) -> None:
    before = se_block(pool=pool)
    after, report = optimize(before)
    assert report.changes["fuse_squeeze_excite"] == 1 and ops(after) == ["SqueezeExciteConv"]
    node = after.graph.nodes[0]
    assert node.attrs["channels_last"] == 0
    assert (node.attrs["reduce_activation"], node.attrs["gate_activation"], node.attrs["activation"]) == ("Swish", "Sigmoid", "")
    assert_same_outputs(before, after, rtol=1e-5, atol=1e-5, **_feeds(before))


def test_channels_last_squeeze_excite_fuses_inside_the_region() -> None:
    before = se_block(c=16, size=8, expand_first=True)
    after, report = optimize(before)
    assert report.changes["to_channels_last"] > 0 and report.changes["fuse_squeeze_excite"] == 1
    fused = [n for n in after.graph.nodes if n.op_type == "SqueezeExciteConv"]
    assert len(fused) == 1 and fused[0].attrs["channels_last"] == 1
    assert after.graph.values[fused[0].inputs[5]].data.shape == (16, 4)  # the projection's (C, M)
    assert_same_outputs(before, after, rtol=1e-5, atol=1e-5, **_feeds(before))


@pytest.mark.parametrize("near_miss", [
    pytest.param(lambda: se_block(axes=(3,)), id="mean over the columns only"),
    pytest.param(lambda: se_block(pool="GlobalMaxPool"), id="max pooled"),
    pytest.param(lambda: se_block(mean_of="z"), id="gate of another tensor"),
    pytest.param(lambda: se_block(gate_is_output=True), id="gate also a graph output"),
    pytest.param(lambda: se_block(gated_is_output=True), id="gated tensor also a graph output"),
    pytest.param(lambda: se_block(project_kernel=3), id="3x3 projection"),
    pytest.param(lambda: se_block(project_strides=(2, 2)), id="strided projection"),
])
def test_near_misses_are_left_alone(near_miss) -> None:
    before = near_miss()
    after, report = optimize(before)
    assert report.changes["fuse_squeeze_excite"] == 0 and "SqueezeExciteConv" not in ops(after)
    assert_same_outputs(before, after, rtol=1e-5, atol=1e-5, **_feeds(before))


def test_the_pass_alone_wants_fused_activations() -> None:
    """Before fuse_activations the gate's Sigmoid stands between its Conv and the Mul: no match."""
    assert fuse_squeeze_excite(se_block())[1] == 0


@pytest.mark.parametrize("expand_first", [False, True], ids=["planar", "channels-last"])
def test_fused_node_is_written_back_as_the_chain_that_onnxruntime_runs(expand_first) -> None:
    before = se_block(c=16, size=8, expand_first=expand_first)
    after, _ = optimize(before)
    assert "SqueezeExciteConv" in ops(after)
    proto = to_onnx(after)
    written = [n.op_type for n in proto.graph.node]
    assert "ReduceMean" in written and "Mul" in written and all(n.domain in ("", "ai.onnx") for n in proto.graph.node)
    feeds = _feeds(before)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(["y"], feeds)[0]
    np.testing.assert_allclose(got, run(before, **feeds)["y"], rtol=1e-4, atol=1e-5)
