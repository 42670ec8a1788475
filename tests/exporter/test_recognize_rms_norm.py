"""recognize_rms_norms: the Pow/ReduceMean/Add/Sqrt/Div/Mul/Mul chain Llama's and T5's RMSNorm export
as becomes one RMSNormalization; near misses stay."""

from __future__ import annotations

import numpy as np
import pytest

from exporter import ir
from exporter.passes import optimize, recognize_rms_norms
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn


def decomposed(inverse="rsqrt", square="pow", exponent=2.0, axes=(-1,), keepdims=1, eps_after_sqrt=False,
               numerator=1.0, normalized="x", gamma_shape=(8,), mean_of_mean=False, ms_is_output=False) -> ir.Model:
    """An RMSNorm on x of shape (2, 5, 8) as PyTorch exports it, with knobs for the variants and near misses.

    ``inverse``: "rsqrt" (x * (1 / Sqrt)), "reciprocal" (x * Reciprocal(Sqrt)) or "div" (x / Sqrt)."""
    n = lambda op, inputs, out, **attrs: ir.Node(op, inputs, [out], attrs, name=out)  # noqa: E731
    sq = n("Pow", ["x", "two"], "sq") if square == "pow" else n("Mul", ["x", "x"], "sq")
    nodes = [sq, n("ReduceMean", ["sq", "axes"], "ms", keepdims=keepdims)]
    if mean_of_mean:  # the mean subtracted first: a layer norm's variance, not a mean square
        nodes = [n("ReduceMean", ["x", "axes"], "mu", keepdims=1), n("Sub", ["x", "mu"], "d"),
                 n("Pow", ["d", "two"], "sq"), nodes[1]]
    if eps_after_sqrt:
        nodes += [n("Sqrt", ["ms"], "root0"), n("Add", ["root0", "eps"], "root")]
    else:
        nodes += [n("Add", ["ms", "eps"], "ms_eps"), n("Sqrt", ["ms_eps"], "root")]
    if inverse == "div":
        nodes.append(n("Div", [normalized, "root"], "normed"))
    else:
        inv = n("Div", ["one", "root"], "inv") if inverse == "rsqrt" else n("Reciprocal", ["root"], "inv")
        nodes += [inv, n("Mul", [normalized, "inv"], "normed")]
    nodes.append(n("Mul", ["gamma", "normed"], "y"))
    constants = {"two": np.float32(exponent), "axes": np.array(axes, np.int64), "eps": np.float32(1e-6),
                 "one": np.float32(numerator),
                 "gamma": np.random.default_rng(1).uniform(0.5, 1.5, gamma_shape).astype(np.float32)}
    outputs = ["y", "ms"] if ms_is_output else ["y"]
    return model(graph(nodes, ["x", "z"], outputs, constants, {"x": (2, 5, 8), "z": (2, 5, 8)}))


@pytest.mark.parametrize("inverse", ["rsqrt", "reciprocal", "div"])
@pytest.mark.parametrize("square", ["pow", "mul"])
def test_decomposed_rms_norm_becomes_one_node(inverse: str, square: str) -> None:
    before = decomposed(inverse=inverse, square=square)
    after, count = recognize_rms_norms(before)
    assert count == 1 and ops(after) == ["RMSNormalization"]
    node = after.graph.nodes[0]
    assert node.inputs == ["x", "gamma"] and node.attrs == {"axis": -1, "epsilon": pytest.approx(1e-6)}
    assert_same_outputs(before, after, x=randn(2, 5, 8) * 3 + 1, z=randn(2, 5, 8))


def test_two_trailing_axes_given_as_positive_axes() -> None:
    before = decomposed(axes=(1, 2), gamma_shape=(5, 8))
    after, count = recognize_rms_norms(before)
    assert count == 1 and after.graph.nodes[0].attrs["axis"] == -2
    assert_same_outputs(before, after, x=randn(2, 5, 8), z=randn(2, 5, 8))


@pytest.mark.parametrize(
    "near_miss",
    [
        pytest.param(lambda: decomposed(eps_after_sqrt=True), id="epsilon added after the square root"),
        pytest.param(lambda: decomposed(exponent=3.0), id="cubed, not squared"),
        pytest.param(lambda: decomposed(normalized="z"), id="another tensor divided by the root"),
        pytest.param(lambda: decomposed(inverse="div", normalized="z"), id="another tensor over the root"),
        pytest.param(lambda: decomposed(numerator=2.0), id="2 / root, not 1 / root"),
        pytest.param(lambda: decomposed(axes=(-2,), gamma_shape=(5, 1)), id="not the trailing axes"),
        pytest.param(lambda: decomposed(keepdims=0), id="mean without keepdims"),
        pytest.param(lambda: decomposed(gamma_shape=(5, 8)), id="gamma wider than the normalized axes"),
        pytest.param(lambda: decomposed(ms_is_output=True), id="mean square also a graph output"),
    ],
)
def test_near_misses_are_left_alone(near_miss) -> None:
    before = near_miss()
    after, count = recognize_rms_norms(before)
    assert count == 0 and ops(after) == ops(before)


def test_a_layer_norm_without_shift_stays_a_layer_norm() -> None:
    # The mean subtracted first: recognize_layer_norms runs before and takes the chain.
    before = decomposed(inverse="div", normalized="d", mean_of_mean=True)
    after, report = optimize(before)
    assert report.changes["recognize_rms_norms"] == 0 and ops(after) == ["LayerNormalization"]
    assert_same_outputs(before, after, x=randn(2, 5, 8) + 2, z=randn(2, 5, 8))


def test_optimize_recognises_rms_norm() -> None:
    before = decomposed()
    after, report = optimize(before)
    assert report.changes["recognize_rms_norms"] == 1 and ops(after) == ["RMSNormalization"]
    assert_same_outputs(before, after, x=randn(2, 5, 8), z=randn(2, 5, 8))
