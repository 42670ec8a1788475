"""recognize_gelu: the exact (Erf) and tanh GELU chains exporters write become one Gelu; near misses stay."""

from __future__ import annotations

import math

import numpy as np
import pytest

from exporter import ir
from exporter.passes import optimize, recognize_gelu
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn

SQRT_2 = np.float32(math.sqrt(2.0))


def n(op: str, inputs: list[str], out: str, **attrs) -> ir.Node:
    return ir.Node(op, inputs, [out], attrs, name=out)


def exact_gelu(sqrt2=SQRT_2, half=0.5, one=1.0, order="torch", extra_reader: bool = False,
               erf_of: str = "x") -> ir.Model:
    """x * 0.5 * (1 + erf(x / sqrt2)) in the orders PyTorch's nn.GELU and BERT's gelu write it."""
    nodes = [n("Div", [erf_of, "sqrt2"], "scaled"), n("Erf", ["scaled"], "erf"), n("Add", ["erf", "one"], "one_plus")]
    if order == "torch":  # (x * (1 + erf)) * 0.5
        nodes += [n("Mul", ["x", "one_plus"], "prod"), n("Mul", ["prod", "half"], "y")]
    elif order == "bert":  # (x * 0.5) * (1 + erf)
        nodes += [n("Mul", ["x", "half"], "half_x"), n("Mul", ["half_x", "one_plus"], "y")]
    else:  # 0.5 * ((1 + erf) * x), the reciprocal scale
        nodes[0] = n("Mul", [erf_of, "inv_sqrt2"], "scaled")
        nodes += [n("Mul", ["one_plus", "x"], "prod"), n("Mul", ["half", "prod"], "y")]
    outputs = ["y", "erf"] if extra_reader else ["y"]
    constants = {"sqrt2": sqrt2, "inv_sqrt2": np.float32(1 / sqrt2), "half": np.float32(half), "one": np.float32(one)}
    return model(graph(nodes, ["x", "z"], outputs, constants))


def tanh_gelu(cubic=0.044715, cube="mul") -> ir.Model:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + cubic * x^3))): nn.GELU("tanh") (x*(x*x)) or NewGELU (Pow)."""
    if cube == "mul":
        nodes = [n("Mul", ["x", "x"], "sq"), n("Mul", ["x", "sq"], "cube")]
    else:
        nodes = [n("Pow", ["x", "three"], "cube")]
    nodes += [
        n("Mul", ["c", "cube"], "term"), n("Add", ["x", "term"], "inner"), n("Mul", ["k", "inner"], "scaled"),
        n("Tanh", ["scaled"], "t"), n("Add", ["one", "t"], "one_plus"), n("Mul", ["x", "one_plus"], "prod"),
        n("Mul", ["half", "prod"], "y"),
    ]
    constants = {"three": np.float32(3), "c": np.float32(cubic), "k": np.float32(math.sqrt(2 / math.pi)),
                 "one": np.float32(1), "half": np.float32(0.5)}
    return model(graph(nodes, ["x", "z"], ["y"], constants))


@pytest.mark.parametrize("order", ["torch", "bert", "reciprocal"])
def test_exact_gelu_chain_becomes_one_gelu(order: str) -> None:
    before = exact_gelu(order=order)
    after, count = recognize_gelu(before)
    assert count == 1 and ops(after) == ["Gelu"] and after.graph.nodes[0].attrs["approximate"] == "none"
    assert_same_outputs(before, after, x=randn(4, 16) * 3, z=randn(4, 16))


@pytest.mark.parametrize("cube", ["mul", "pow"])
def test_tanh_gelu_chain_becomes_one_tanh_gelu(cube: str) -> None:
    before = tanh_gelu(cube=cube)
    after, count = recognize_gelu(before)
    assert count == 1 and ops(after) == ["Gelu"] and after.graph.nodes[0].attrs["approximate"] == "tanh"
    assert_same_outputs(before, after, x=randn(4, 16) * 3, z=randn(4, 16))


@pytest.mark.parametrize(
    "near_miss",
    [
        pytest.param(lambda: exact_gelu(sqrt2=np.float32(1.41)), id="wrong sqrt2"),
        pytest.param(lambda: exact_gelu(half=0.6), id="wrong half"),
        pytest.param(lambda: exact_gelu(one=2.0), id="one plus replaced by two plus"),
        pytest.param(lambda: exact_gelu(order="bert", half=0.49), id="wrong half, BERT order"),
        pytest.param(lambda: exact_gelu(erf_of="z"), id="erf of another tensor"),
        pytest.param(lambda: exact_gelu(extra_reader=True), id="erf output also a graph output"),
        pytest.param(lambda: tanh_gelu(cubic=0.05), id="wrong cubic constant"),
    ],
)
def test_near_misses_are_left_alone(near_miss) -> None:
    before = near_miss()
    after, count = recognize_gelu(before)
    assert count == 0 and ops(after) == ops(before)


def test_optimize_recognises_gelu_and_keeps_outputs() -> None:
    before = exact_gelu(order="bert")
    after, report = optimize(before)
    assert report.changes["recognize_gelu"] == 1 and ops(after) == ["Gelu"]
    assert_same_outputs(before, after, x=randn(2, 8), z=randn(2, 8))
