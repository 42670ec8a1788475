"""ONNX's RandomUniformLike and Bernoulli in the edge runtime: a seeded node draws exactly what ONNX's
reference evaluator draws, on every run; an unseeded one draws afresh (and the exporter's passes
never fold it into a constant); the output type follows ``dtype``; bad nodes are named."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import edge_runtime
from edge_runtime.plan import ExecutionError
from exporter import flow_writer
from exporter.onnx_import import import_onnx, onnx_to_flow_bytes
from exporter.passes import optimize

P = np.random.default_rng(3).uniform(0, 1, (4, 250)).astype(np.float32)


def _model(op: str, constant_input: bool = False, **attrs):
    node = helper.make_node(op, ["x"], ["y"], name="draw", **attrs)
    inputs = [] if constant_input else [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)]
    initializers = [helper.make_tensor("x", TensorProto.FLOAT, list(P.shape), P.reshape(-1))] if constant_input else []
    graph = helper.make_graph([node], "draw", inputs, [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
                              initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])


def _run(model, feeds=None):
    return edge_runtime.load(onnx_to_flow_bytes(model)).run({"x": P} if feeds is None else feeds)["y"]


@pytest.mark.parametrize("op, attrs", [
    ("Bernoulli", {"seed": 7.0}),
    ("Bernoulli", {"seed": 7.0, "dtype": TensorProto.INT64}),
    ("RandomUniformLike", {"seed": 3.0, "low": -2.0, "high": 5.0}),
    ("RandomUniformLike", {"seed": 3.0, "dtype": TensorProto.DOUBLE}),
])
def test_a_seeded_node_draws_what_the_reference_draws(op, attrs) -> None:
    model = _model(op, **attrs)
    want = ReferenceEvaluator(model).run(None, {"x": P})[0]
    first, again = _run(model), _run(model)
    assert first.dtype == want.dtype and first.shape == P.shape
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(again, first)


def test_an_unseeded_node_draws_afresh_even_after_optimization() -> None:
    model = _model("RandomUniformLike", constant_input=True, low=1.0, high=2.0)
    flow = flow_writer.to_bytes(optimize(import_onnx(model))[0])
    runtime = edge_runtime.load(flow)
    first, second = runtime.run({})["y"], runtime.run({})["y"]
    assert 1.0 <= first.min() and first.max() < 2.0
    assert not np.array_equal(first, second)  # 1000 float32 draws: equal by chance with probability ~2^-23000


def test_bernoulli_draws_ones_at_the_input_probability() -> None:
    ones = _run(_model("Bernoulli", seed=11.0), {"x": np.full((200, 100), 0.3, np.float32)})
    assert set(np.unique(ones)) <= {0.0, 1.0}
    # 20000 seeded draws: the mean is 0.3 +- 0.0032 (one standard deviation); a bar of 0.02 is 6 of them
    assert abs(ones.mean() - 0.3) < 0.02
    edges = _run(_model("Bernoulli"), {"x": np.array([0.0, 1.0, 0.0, 1.0], np.float32)})
    np.testing.assert_array_equal(edges, [0, 1, 0, 1])


@pytest.mark.parametrize("op, attrs, feed, message", [
    ("Bernoulli", {}, np.array([0.5, 1.5], np.float32), r"probabilities must lie in \[0, 1\], got values from 0.5 to 1.5"),
    ("Bernoulli", {}, np.array([0.5, np.nan], np.float32), r"probabilities must lie in \[0, 1\]"),
    ("RandomUniformLike", {"dtype": TensorProto.INT32}, P, r"dtype must be one of \('float16', 'float32', 'float64', 'bfloat16'\), got int32"),
])
def test_a_bad_node_is_named(op, attrs, feed, message) -> None:
    with pytest.raises(ExecutionError, match=rf"'draw' \({op}\): ValueError: {op}: {message}"):
        _run(_model(op, **attrs), {"x": feed})
