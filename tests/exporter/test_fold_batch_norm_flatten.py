"""fold_batch_norm through a Flatten at the last axis: Linear -> flatten(0, -2) -> BatchNorm1d, as
LeViT writes every projection, folds into the MatMul (and its bias Add); near misses stay."""

from __future__ import annotations

import numpy as np
import pytest

from exporter import ir
from exporter.passes import fold_batch_norm
from tests.exporter.test_passes import RNG, assert_same_outputs, graph, model, ops, randn


def linear_flatten_bn(axis: int = 2, bias: bool = False, shape_reader: bool = False,
                      other_reader: bool = False) -> ir.Model:
    c = 4
    constants = {"w": randn(6, c), "scale": RNG.uniform(0.5, 1.5, c).astype(np.float32), "shift": randn(c),
                 "mean": randn(c), "var": RNG.uniform(0.5, 1.5, c).astype(np.float32)}
    nodes = [ir.Node("MatMul", ["x", "w"], ["mm"], name="linear")]
    shapes = {"x": (-1, 5, 6), "mm": (-1, 5, c)}
    h = "mm"
    if bias:
        constants["b"] = randn(c)
        nodes.append(ir.Node("Add", ["mm", "b"], ["h"], name="bias"))
        shapes["h"] = (-1, 5, c)
        h = "h"
    nodes += [ir.Node("Flatten", [h], ["f"], {"axis": axis}, name="flatten"),
              ir.Node("BatchNormalization", ["f", "scale", "shift", "mean", "var"], ["n"], {"epsilon": 1e-3}, name="bn")]
    outputs = ["n"]
    if shape_reader:
        nodes.append(ir.Node("Shape", [h], ["s"], name="shape"))
        outputs.append("s")
    if other_reader:
        nodes.append(ir.Node("Relu", [h], ["r"], name="other"))
        outputs.append("r")
    return model(graph(nodes, ["x"], outputs, constants, shapes))


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape_reader", [False, True])
def test_batch_norm_after_a_last_axis_flatten_folds_into_the_linear(bias, shape_reader) -> None:
    before = linear_flatten_bn(bias=bias, shape_reader=shape_reader)
    after, folded = fold_batch_norm(before)
    assert folded == 1 and "BatchNormalization" not in ops(after)
    assert ops(after)[:3] == ["MatMul", "Add", "Flatten"]
    assert_same_outputs(before, after, x=randn(3, 5, 6))


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: linear_flatten_bn(axis=1), id="flatten keeps the tokens as channels"),
        pytest.param(lambda: linear_flatten_bn(other_reader=True), id="the linear's output read elsewhere"),
    ],
)
def test_near_misses_are_left_alone(build) -> None:
    before = build()
    after, folded = fold_batch_norm(before)
    assert folded == 0 and ops(after) == ops(before)
