"""recognize_layer_norms: the ReduceMean/Sub/Pow/Sqrt/Div chain of pre-opset-17 exports becomes one
LayerNormalization; near misses stay."""

from __future__ import annotations

import numpy as np
import pytest

from exporter import ir
from exporter.passes import optimize, recognize_layer_norms
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn


def decomposed(axes=(-1,), var_axes=None, exponent=2.0, sub_of="x", beta=True, mean_is_output=False,
               gamma_shape=(8,)) -> ir.Model:
    """nn.LayerNorm as PyTorch exports it at opset 16, on x of shape (2, 5, 8), with knobs for near misses."""
    n = lambda op, inputs, out: ir.Node(op, inputs, [out], name=out)  # noqa: E731
    nodes = [
        n("ReduceMean", ["x", "axes"], "mean"), n("Sub", [sub_of, "mean"], "d"), n("Pow", ["d", "two"], "sq"),
        n("ReduceMean", ["sq", "var_axes"], "var"), n("Add", ["var", "eps"], "var_eps"), n("Sqrt", ["var_eps"], "std"),
        n("Div", ["d", "std"], "normed"), n("Mul", ["normed", "gamma"], "scaled" if beta else "y"),
    ]
    if beta:
        nodes.append(n("Add", ["scaled", "beta"], "y"))
    constants = {"axes": np.array(axes, np.int64), "var_axes": np.array(var_axes or axes, np.int64),
                 "two": np.float32(exponent), "eps": np.float32(1e-5),
                 "gamma": np.random.default_rng(1).uniform(0.5, 1.5, gamma_shape).astype(np.float32),
                 "beta": randn(*gamma_shape)}
    shapes = {"x": (2, 5, 8), "z": (2, 5, 8)}
    return model(graph(nodes, ["x", "z"], ["y", "mean"] if mean_is_output else ["y"], constants, shapes))


@pytest.mark.parametrize("beta", [True, False])
def test_decomposed_layer_norm_becomes_one_node(beta: bool) -> None:
    before = decomposed(beta=beta)
    after, count = recognize_layer_norms(before)
    assert count == 1 and ops(after) == ["LayerNormalization"]
    assert after.graph.nodes[0].attrs == {"axis": -1, "epsilon": pytest.approx(1e-5)}
    assert len(after.graph.nodes[0].inputs) == (3 if beta else 2)
    assert_same_outputs(before, after, x=randn(2, 5, 8) * 3 + 1, z=randn(2, 5, 8))


def test_two_trailing_axes_given_as_positive_axes() -> None:
    before = decomposed(axes=(1, 2), gamma_shape=(5, 8))
    after, count = recognize_layer_norms(before)
    assert count == 1 and after.graph.nodes[0].attrs["axis"] == -2
    assert_same_outputs(before, after, x=randn(2, 5, 8), z=randn(2, 5, 8))


@pytest.mark.parametrize(
    "near_miss",
    [
        pytest.param(lambda: decomposed(var_axes=(-2,)), id="variance over another axis"),
        pytest.param(lambda: decomposed(axes=(-2,), gamma_shape=(5, 1)), id="not the trailing axes"),
        pytest.param(lambda: decomposed(exponent=3.0), id="cubed, not squared"),
        pytest.param(lambda: decomposed(sub_of="z"), id="mean subtracted from another tensor"),
        pytest.param(lambda: decomposed(mean_is_output=True), id="mean also a graph output"),
        pytest.param(lambda: decomposed(gamma_shape=(5, 8)), id="gamma wider than the normalized axes"),
    ],
)
def test_near_misses_are_left_alone(near_miss) -> None:
    before = near_miss()
    after, count = recognize_layer_norms(before)
    assert count == 0 and ops(after) == ops(before)


def test_optimize_recognises_layer_norm() -> None:
    before = decomposed()
    after, report = optimize(before)
    assert report.changes["recognize_layer_norms"] == 1 and ops(after) == ["LayerNormalization"]
    assert_same_outputs(before, after, x=randn(2, 5, 8), z=randn(2, 5, 8))
