"""recognize_swish: x * Sigmoid(x) becomes Swish (then folds into its Conv), x * HardSigmoid(x) with
HardSwish's constants becomes HardSwish (then folds into its Conv); near misses stay."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from exporter import ir
from exporter.onnx_export import to_onnx
from exporter.passes import optimize, recognize_swish
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn, run


def gated(gate: str = "Sigmoid", gate_of: str = "x", mul_other: str = "x", gate_is_output: bool = False,
          conv: bool = False, **gate_attrs) -> ir.Model:
    """x * gate(x), optionally after a 3x3 convolution; knobs to build the near misses."""
    nodes, constants, shapes = [], {}, {"x": (2, 3, 6, 6), "z": (2, 3, 6, 6)}
    if conv:
        constants.update(w=randn(4, 3, 3, 3), b=randn(4))
        nodes.append(ir.Node("Conv", ["x", "w", "b"], ["h"], {"pads": [1, 1, 1, 1]}, name="conv"))
        gate_of = mul_other = "h"
    nodes += [ir.Node(gate, [gate_of], ["g"], gate_attrs, name="gate"),
              ir.Node("Mul", [mul_other, "g"], ["y"], name="mul")]
    outputs = ["y", "g"] if gate_is_output else ["y"]
    return model(graph(nodes, ["x", "z"], outputs, constants, shapes))


def test_silu_becomes_swish() -> None:
    before = gated()
    after, count = recognize_swish(before)
    assert count == 1 and ops(after) == ["Swish"] and after.graph.nodes[0].attrs == {"alpha": 1.0}
    assert_same_outputs(before, after, x=randn(2, 3, 6, 6) * 4, z=randn(2, 3, 6, 6))


def test_hard_sigmoid_gate_with_hard_swish_constants_becomes_hard_swish() -> None:
    before = gated("HardSigmoid", alpha=1 / 6, beta=0.5)
    after, count = recognize_swish(before)
    assert count == 1 and ops(after) == ["HardSwish"]
    assert_same_outputs(before, after, x=randn(2, 3, 6, 6) * 4, z=randn(2, 3, 6, 6))


@pytest.mark.parametrize(
    "near_miss",
    [
        pytest.param(lambda: gated(gate_of="z"), id="gate of another tensor"),
        pytest.param(lambda: gated(mul_other="z"), id="gate times another tensor"),
        pytest.param(lambda: gated(gate_is_output=True), id="gate also a graph output"),
        pytest.param(lambda: gated("HardSigmoid"), id="HardSigmoid at its default alpha 0.2"),
        pytest.param(lambda: gated("Tanh"), id="a tanh gate"),
    ],
)
def test_near_misses_are_left_alone(near_miss) -> None:
    before = near_miss()
    after, count = recognize_swish(before)
    assert count == 0 and ops(after) == ops(before)


def test_optimize_folds_silu_into_the_convolution() -> None:
    before = gated(conv=True)
    after, report = optimize(before)
    assert report.changes["recognize_swish"] == 1
    assert [(n.op_type, n.attrs.get("activation")) for n in after.graph.nodes] == [("FusedConv", "Swish")]
    x = randn(2, 3, 6, 6) * 3
    conv_only = before.graph.nodes[0]
    h = run(model(graph([conv_only], ["x"], ["h"], {k: before.graph.values[k].data for k in ("w", "b")})), x=x)["h"]
    silu = h * (1 / (1 + np.exp(-h.astype(np.float64))))
    np.testing.assert_allclose(run(after, x=x, z=x)["y"], silu, rtol=1e-5, atol=1e-5)


def test_fused_swish_is_written_back_as_conv_and_swish_that_onnxruntime_runs() -> None:
    before = gated(conv=True)
    after, _ = optimize(before)
    proto = to_onnx(after)
    assert [n.op_type for n in proto.graph.node] == ["Conv", "Swish"]
    x = randn(2, 3, 6, 6)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(["y"], {"x": x, "z": x})[0]
    np.testing.assert_allclose(got, run(before, x=x, z=x)["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("gate, gate_attrs", [("Sigmoid", {}), ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5})])
def test_optimize_folds_the_recognised_gate_into_the_convolution_as_onnxruntime_computes_it(gate, gate_attrs) -> None:
    """MobileNetV3's x * HardSigmoid(x) (1/6, 1/2) and EfficientNet's x * Sigmoid(x) after a
    convolution end as one FusedConv, matching onnxruntime on the original graph across the
    HardSwish's kinks at -3 and 3."""
    before = gated(gate, conv=True, **gate_attrs)
    after, _ = optimize(before)
    activation = {"Sigmoid": "Swish", "HardSigmoid": "HardSwish"}[gate]
    assert [(n.op_type, n.attrs.get("activation")) for n in after.graph.nodes] == [("FusedConv", activation)]
    x = randn(2, 3, 6, 6) * 3
    session = onnxruntime.InferenceSession(to_onnx(before).SerializeToString(), providers=["CPUExecutionProvider"])
    want = session.run(["y"], {"x": x, "z": x})[0]
    np.testing.assert_allclose(run(after, x=x, z=x)["y"], want, rtol=1e-5, atol=1e-5)


def test_fused_hard_swish_is_written_back_as_conv_and_hard_swish() -> None:
    before = gated("HardSigmoid", conv=True, alpha=1 / 6, beta=0.5)
    after, _ = optimize(before)
    proto = to_onnx(after)
    assert [n.op_type for n in proto.graph.node] == ["Conv", "HardSwish"]
    x = randn(2, 3, 6, 6) * 3
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(["y"], {"x": x, "z": x})[0], run(before, x=x, z=x)["y"], rtol=1e-5,
                               atol=1e-5)
