"""pointwise_to_matmul: channels-last 1x1 convolutions (stride 1, no pads) become FusedMatMul with
(C, M) weights; strided, padded and wider ones, and planar ones, stay; results never change, and
the node is written back as MatMul, Add and the activation, which onnxruntime runs."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from exporter.onnx_export import to_onnx
from exporter.onnx_import import import_onnx
from exporter.passes import optimize, pointwise_to_matmul
from tests.exporter.test_passes import assert_same_outputs, ops, randn, run


def chain(c: int = 16, size: int = 8, *, tail: dict | None = None, tail_kernel: int = 1, planar_tail: bool = False):
    """1x1 Conv + Relu, 3x3 depthwise + Clip(0, 6), then a ``tail_kernel`` convolution with ``tail``
    attributes: small planes, so the to_channels_last pass converts the chain."""
    inits = {"w1": randn(24, c, 1, 1) / 4, "b1": randn(24), "wd": randn(24, 1, 3, 3) / 3, "bd": randn(24),
             "w2": randn(8, 24, tail_kernel, tail_kernel) / 4, "b2": randn(8), "lo": np.float32(0), "hi": np.float32(6)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["e"]), helper.make_node("Relu", ["e"], ["er"]),
             helper.make_node("Conv", ["er", "wd", "bd"], ["d"], group=24, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["d", "lo", "hi"], ["dc"])]
    if planar_tail:  # read through a planar op: the tail stays planar
        nodes.append(helper.make_node("Sin", ["dc"], ["ds"]))
    nodes.append(helper.make_node("Conv", ["ds" if planar_tail else "dc", "w2", "b2"], ["y"], **(tail or {})))
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))


def test_channels_last_1x1_convolutions_become_matmuls() -> None:
    before = chain()
    after, report = optimize(before)
    assert report.changes["pointwise_to_matmul"] == 2
    assert ops(after).count("FusedMatMul") == 2 and "ChannelsLastConv" in ops(after)  # the depthwise stays
    first = next(n for n in after.graph.nodes if n.op_type == "FusedMatMul")
    assert first.attrs["activation"] == "Relu" and after.graph.values[first.inputs[1]].data.shape == (16, 24)
    x = randn(1, 16, 8, 8)
    assert_same_outputs(before, after, rtol=1e-5, atol=1e-5, x=x)


@pytest.mark.parametrize("tail, kernel, planar", [
    ({"strides": [2, 2]}, 1, False),
    ({"pads": [1, 1, 1, 1]}, 1, False),
    ({"pads": [1, 1, 1, 1]}, 3, False),
    ({}, 1, True),
], ids=["strided 1x1", "padded 1x1", "3x3", "planar 1x1"])
def test_near_misses_keep_their_convolution(tail, kernel, planar) -> None:
    before = chain(tail=tail, tail_kernel=kernel, planar_tail=planar)
    after, report = optimize(before)
    tail_node = next(n for n in after.graph.nodes if "y" in n.outputs or any(o.startswith("y/") for o in n.outputs))
    assert tail_node.op_type != "FusedMatMul"
    assert_same_outputs(before, after, rtol=1e-5, atol=1e-5, x=randn(1, 16, 8, 8))


def test_the_pass_alone_leaves_planar_convolutions() -> None:
    assert pointwise_to_matmul(chain())[1] == 0


def test_written_back_as_matmul_add_and_activation_that_onnxruntime_runs() -> None:
    before = chain()
    after, _ = optimize(before)
    proto = to_onnx(after)
    onnx.checker.check_model(proto, full_check=True)
    written = [n.op_type for n in proto.graph.node]
    assert "MatMul" in written and "Add" in written and all(n.domain in ("", "ai.onnx") for n in proto.graph.node)
    x = randn(1, 16, 8, 8)
    got = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], {"x": x})[0]
    np.testing.assert_allclose(got, run(before, x=x)["y"], rtol=1e-4, atol=1e-5)
