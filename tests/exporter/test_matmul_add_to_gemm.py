"""matmul_add_to_gemm: a rank-2 MatMul by a constant plus a constant bias becomes Gemm (then FusedGemm)."""

from __future__ import annotations

import pytest

from exporter import ir
from exporter.passes import matmul_add_to_gemm, optimize
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn


def dense(x_shape=(3, 6), bias_shape=(4,), bias_first=False, activation: str | None = None,
          product_is_output=False, sibling=False) -> ir.Model:
    """x @ W + b as tf2onnx writes a Dense layer, with knobs for the near misses."""
    add_inputs = ["b", "mm"] if bias_first else ["mm", "b"]
    nodes = [ir.Node("MatMul", ["x", "w"], ["mm"], name="mm"), ir.Node("Add", add_inputs, ["h"], name="bias")]
    outputs = ["h"]
    if activation:
        nodes.append(ir.Node(activation, ["h"], ["y"], name="act"))
        outputs = ["y"]
    if sibling:
        nodes.append(ir.Node("MatMul", ["x", "w2"], ["other"], name="sibling"))
        outputs.append("other")
    if product_is_output:
        outputs.append("mm")
    constants = {"w": randn(6, 4), "w2": randn(6, 4), "b": randn(*bias_shape)}
    return model(graph(nodes, ["x"], outputs, constants, shapes={"x": x_shape}))


@pytest.mark.parametrize("bias_shape, bias_first", [((4,), False), ((1, 4), True)])
def test_dense_becomes_gemm(bias_shape, bias_first) -> None:
    before = dense(bias_shape=bias_shape, bias_first=bias_first)
    after, count = matmul_add_to_gemm(before)
    assert count == 1 and ops(after) == ["Gemm"]
    assert_same_outputs(before, after, x=randn(3, 6))


def test_optimize_fuses_the_activation_after_it() -> None:
    before = dense(activation="Relu")
    after, _ = optimize(before)
    assert [(n.op_type, n.attrs.get("activation"), n.attrs.get("transB")) for n in after.graph.nodes] == [
        ("FusedGemm", "Relu", 1)]
    assert_same_outputs(before, after, x=randn(3, 6))


@pytest.mark.parametrize(
    "near_miss",
    [
        pytest.param(lambda: dense(x_shape=(2, 3, 6)), id="rank-3 input"),
        pytest.param(lambda: dense(x_shape=None), id="input of unknown rank"),
        pytest.param(lambda: dense(bias_shape=(3, 4)), id="a bias per row"),
        pytest.param(lambda: dense(product_is_output=True), id="product also a graph output"),
        pytest.param(lambda: dense(sibling=True), id="a sibling MatMul to merge with"),
    ],
)
def test_near_misses_are_left_alone(near_miss) -> None:
    before = near_miss()
    after, count = matmul_add_to_gemm(before)
    assert count == 0 and ops(after) == ops(before)
