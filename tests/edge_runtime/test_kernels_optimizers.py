"""Adagrad, Momentum and Adam (ai.onnx.preview.training) beyond their ONNX node cases: several tensors
in one node with every attribute set, against ONNX's reference evaluator in float64; Adam over
several updates against the textbook algorithm; malformed nodes named in the error."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import edge_runtime
from edge_runtime.plan import ExecutionError
from exporter.onnx_import import onnx_to_flow_bytes
from schemas import ShapeError, TensorType, get_schema, infer_types

TRAINING = "ai.onnx.preview.training"
RNG = np.random.default_rng(5)
GROUPS = {"Adagrad": "XGH", "Momentum": "XGV", "Adam": "XGVH"}
ATTRS = {
    "Adagrad": {"decay_factor": 0.1, "epsilon": 1e-5, "norm_coefficient": 0.01},
    "Momentum": {"alpha": 0.9, "beta": 0.5, "mode": "nesterov", "norm_coefficient": 0.02},
    "Adam": {"alpha": 0.8, "beta": 0.95, "epsilon": 1e-4, "norm_coefficient": 0.01, "norm_coefficient_post": 0.1},
}


def _model(op: str, feeds: dict[str, np.ndarray], n: int, **attrs):
    names = [f"{g}{j}" for g in GROUPS[op] for j in range(1, n + 1)]
    outputs = [f"{g}{j}_new" for g in GROUPS[op] if g != "G" for j in range(1, n + 1)]
    node = helper.make_node(op, ["R", "T", *names], outputs, name="update", domain=TRAINING, **attrs)
    types = {np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.float32): TensorProto.FLOAT,
             np.dtype(np.int64): TensorProto.INT64}
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(k, types[v.dtype], v.shape) for k, v in feeds.items()],
                              [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TRAINING, 1)])


def _run(model, feeds):
    out = edge_runtime.load(onnx_to_flow_bytes(model)).run(feeds)
    return [out[o.name] for o in model.graph.output]


def _feeds(op, shapes, step, dtype=np.float64):
    feeds = {"R": np.array(0.1, dtype), "T": np.array(step, np.int64)}
    for g in GROUPS[op]:
        for j, shape in enumerate(shapes, 1):
            feeds[f"{g}{j}"] = (np.abs if g == "H" else np.asarray)(RNG.standard_normal(shape)).astype(dtype)
    return feeds


@pytest.mark.parametrize("op", GROUPS)
@pytest.mark.parametrize("step", [0, 3])
def test_several_tensors_match_the_reference(op, step) -> None:
    feeds = _feeds(op, [(3,), (2, 4), ()], step)
    model = _model(op, feeds, 3, **ATTRS[op])
    want = ReferenceEvaluator(model).run(None, feeds)
    got = _run(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == np.float64 and g.shape == w.shape
        # ONNX's reference hands several Adam tensors back as float32: compare those at its precision.
        np.testing.assert_allclose(g, w, rtol=1e-6 if w.dtype == np.float32 else 1e-12, atol=1e-14)


def test_momentum_standard_mode_in_float32() -> None:
    feeds = _feeds("Momentum", [(5,)], 2, dtype=np.float32)
    model = _model("Momentum", feeds, 1, **{**ATTRS["Momentum"], "mode": "standard"})
    x, v = _run(model, feeds)
    g = feeds["G1"] + 0.02 * feeds["X1"]
    want_v = 0.9 * feeds["V1"] + 0.5 * g
    assert x.dtype == v.dtype == np.float32
    np.testing.assert_allclose(v, want_v, rtol=1e-6)
    np.testing.assert_allclose(x, feeds["X1"] - 0.1 * want_v, rtol=1e-6)


def test_adam_over_several_updates_is_the_textbook_algorithm() -> None:
    x = RNG.standard_normal(6)
    feeds = {"R": np.array(0.01), "X1": x, "V1": np.zeros(6), "H1": np.zeros(6)}
    model = _model("Adam", {**feeds, "T": np.array(0), "G1": x}, 1, alpha=0.9, beta=0.999, epsilon=1e-12)
    want, mean, square = x.copy(), np.zeros(6), np.zeros(6)
    for t in range(1, 5):
        feeds["X1"], feeds["V1"], feeds["H1"] = _run(model, {**feeds, "T": np.array(t), "G1": np.sin(feeds["X1"] * t)})
        grad = np.sin(want * t)
        mean, square = 0.9 * mean + 0.1 * grad, 0.999 * square + 0.001 * grad ** 2
        want = want - 0.01 * (mean / (1 - 0.9 ** t)) / np.sqrt(square / (1 - 0.999 ** t))
    # epsilon (1e-12) sits on sqrt(H) here and on sqrt(H / (1 - beta^t)) in the textbook: 1e-9 apart
    np.testing.assert_allclose(feeds["X1"], want, rtol=1e-7)


@pytest.mark.parametrize("op, change, attrs, message", [
    ("Adam", {"G1": np.zeros((4,))}, {}, r"Adam: G1 has shape \(4,\) but X1 has \(3,\)"),
    ("Momentum", {}, {**ATTRS["Momentum"], "mode": "heavy_ball"}, r"Momentum: mode must be one of \('standard', 'nesterov'\)"),
    ("Adagrad", {"R": np.array([0.1, 0.2])}, {}, r"Adagrad: R and T must be scalars, got shapes \(2,\) and \(\)"),
])
def test_a_malformed_node_is_named(op, change, attrs, message) -> None:
    feeds = {**_feeds(op, [(3,)], 1), **change}
    with pytest.raises(ExecutionError, match=rf"'update' \({op}\): ValueError: {message}"):
        _run(_model(op, feeds, 1, **(attrs or ATTRS[op])), feeds)


def test_inputs_that_do_not_split_into_groups_are_named() -> None:
    feeds = _feeds("Adagrad", [(3,)], 1)
    model = _model("Adagrad", feeds, 1, **ATTRS["Adagrad"])
    model.graph.node[0].input.append("X1")  # X1, G1, H1, X1: four operands for groups of three
    with pytest.raises(ExecutionError, match=r"'update' \(Adagrad\): ValueError: Adagrad: 4 inputs after R and T "
                                             r"do not split into groups X1..n, G1..n, H1..n of equal size n"):
        _run(model, feeds)


def test_shape_rule_returns_each_updated_group() -> None:
    schema = get_schema("Adam", TRAINING)
    scalar, x1, x2 = TensorType(np.dtype(np.float32), ()), TensorType(np.dtype(np.float32), (3,)), \
        TensorType(np.dtype(np.float64), (2, 2))
    types = [scalar, TensorType(np.dtype(np.int64), ()), x1, x2, x1, x2, x1, x2, x1, x2]
    assert infer_types(schema, types, schema.resolve_attrs({}), num_outputs=6) == [x1, x2] * 3
    with pytest.raises(ShapeError, match=r"Adam: 3 inputs after R and T do not split into groups"):
        infer_types(schema, types[:5], schema.resolve_attrs({}), num_outputs=1)
