"""``profile_ops``: per-node kernel times of a model run in place, on a copy of its plans."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from edge_runtime import load
from edge_runtime.profiler import profile_ops
from exporter import flow_writer
from exporter.onnx_import import onnx_to_flow_bytes
from tests.edge_runtime.flow_models import mlp, mlp_reference


def loop_model(trips: int = 3) -> bytes:
    """y = x * w^trips, the multiply inside a Loop body."""
    def value(name: str, elem: int, shape: list[int]):
        return helper.make_tensor_value_info(name, elem, shape)

    body = helper.make_graph(
        [helper.make_node("Mul", ["acc_in", "w"], ["acc_out"], name="body_mul"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body",
        [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, []), value("acc_in", TensorProto.FLOAT, [3])],
        [value("cond_out", TensorProto.BOOL, []), value("acc_out", TensorProto.FLOAT, [3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")], "g",
        [value("x", TensorProto.FLOAT, [3])], [value("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array(trips, np.int64), "n"), numpy_helper.from_array(np.full(3, 2.0, np.float32), "w")])
    return onnx_to_flow_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


def test_every_node_is_timed_once_a_run_and_the_model_is_untouched() -> None:
    definition = mlp()
    model = load(flow_writer.to_bytes(definition))
    kernels = [step.kernel for step in model.plan.steps]
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    profile = profile_ops(model, {"x": x}, runs=4, warmup=1)
    assert profile.runs == 4 and len(profile.nodes) == len(model.plan.steps)
    assert all(node.calls == 4 and node.seconds > 0 for node in profile.nodes)
    assert [n.seconds for n in profile.nodes] == sorted((n.seconds for n in profile.nodes), reverse=True)
    assert sum(n.seconds for n in profile.nodes) <= profile.run_seconds
    by_type = profile.by_op_type()
    assert sum(count for _, count, _ in by_type) == len(profile.nodes)
    assert {op for op, _, _ in by_type} == {step.op_type for step in model.plan.steps}
    assert [step.kernel for step in model.plan.steps] == kernels  # the profiled copy had its own plans
    np.testing.assert_allclose(model.run({"x": x})["y"], mlp_reference(definition, x), rtol=1e-5)


def test_nodes_in_loop_bodies_count_every_iteration() -> None:
    model = load(loop_model(trips=3))
    profile = profile_ops(model, {"x": np.ones(3, np.float32)}, runs=2, warmup=0)
    calls = {node.label.split("'")[1]: node.calls for node in profile.nodes}
    assert calls["loop"] == 2 and calls["body_mul"] == 6 and calls["body_cond"] == 6


def test_table_lists_op_types_and_slowest_nodes() -> None:
    model = load(flow_writer.to_bytes(mlp()))
    text = profile_ops(model, {"x": np.ones((2, 4), np.float32)}, runs=3).table(top=2)
    assert "3 runs:" in text and "ms of it in kernels" in text and "op type" in text
    assert "slowest 2 nodes:" in text and text.count("  subgraph 0, node ") == 2


@pytest.mark.parametrize("runs, warmup", [(0, 1), (3, -1)])
def test_bad_run_counts_are_refused(runs, warmup) -> None:
    model = load(flow_writer.to_bytes(mlp()))
    with pytest.raises(ValueError, match="runs must be >= 1 and warmup >= 0"):
        profile_ops(model, {"x": np.ones((1, 4), np.float32)}, runs=runs, warmup=warmup)
