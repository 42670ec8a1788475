"""fold_shape_arithmetic: the Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains PyTorch writes
become constants where the dims they read are known; the one unknown batch becomes -1 (or 0 where it
is the reshaped value's own dim); chains with two unknowns stay."""

from __future__ import annotations

import numpy as np
import pytest

from exporter import ir
from exporter.passes import eliminate_dead_code, fold_shape_arithmetic, optimize
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn


def reshape_by_shape_of(source: str = "x", keep=(0,), tail=(4, 36), source_shape=(-1, 4, 6, 6)) -> ir.Model:
    """y = Reshape(x, Concat(Unsqueeze(Gather(Shape(source), i)) for i in keep, tail)), with x (-1, 4, 6, 6)
    and z a second input of ``source_shape`` (batch shared with x)."""
    nodes = [ir.Node("Shape", [source], ["s"], name="shape")]
    constants = {"tail": np.array(tail, np.int64), "axes": np.array([0], np.int64)}
    parts = []
    for i in keep:
        constants[f"i{i}"] = np.array(i, np.int64)
        nodes += [ir.Node("Gather", ["s", f"i{i}"], [f"g{i}"], {"axis": 0}, name=f"gather{i}"),
                  ir.Node("Unsqueeze", [f"g{i}", "axes"], [f"u{i}"], name=f"unsqueeze{i}")]
        parts.append(f"u{i}")
    nodes += [ir.Node("Concat", [*parts, "tail"], ["target"], {"axis": 0}, name="concat"),
              ir.Node("Reshape", ["x", "target"], ["y"], name="reshape")]
    return model(graph(nodes, ["x", "z"], ["y"], constants, {"x": (-1, 4, 6, 6), "z": source_shape}))


def feeds(m: ir.Model, batch: int) -> dict[str, np.ndarray]:
    return {name: randn(batch, *(d if d > 0 else 2 for d in m.graph.values[name].shape[1:])) for name in ("x", "z")}


def target_of(m: ir.Model) -> list[int]:
    reshape = next(n for n in m.graph.nodes if n.op_type == "Reshape")
    return m.graph.values[reshape.inputs[1]].data.tolist()


def test_the_reshaped_values_own_batch_becomes_zero() -> None:
    before = reshape_by_shape_of()
    after, count = fold_shape_arithmetic(before)
    assert count == 1 and target_of(after) == [0, 4, 36]
    cleaned, _ = eliminate_dead_code(after)
    assert ops(cleaned) == ["Reshape"]
    assert_same_outputs(before, cleaned, **feeds(before, 3))


def test_another_values_batch_becomes_minus_one() -> None:
    before = reshape_by_shape_of(source="z", source_shape=(-1, 2))
    after, count = fold_shape_arithmetic(before)
    assert count == 1 and target_of(after) == [-1, 4, 36]
    assert_same_outputs(before, after, **feeds(before, 3))


def test_known_dims_fold_to_constants() -> None:
    before = reshape_by_shape_of(keep=(1, 2, 3), tail=(-1,))  # x.reshape(4, 6, 6, -1)
    after, count = fold_shape_arithmetic(before)
    assert target_of(after) == [4, 6, 6, -1] and count == 7  # 3 Gathers, 3 Unsqueezes, the Concat
    assert ops(eliminate_dead_code(after)[0]) == ["Reshape"], "the Shape is left unread"
    assert_same_outputs(before, after, **feeds(before, 2))


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: reshape_by_shape_of(source="z", tail=(4, -1), source_shape=(-1, 2)),
                     id="another value's batch and a -1"),
        pytest.param(lambda: reshape_by_shape_of(source="z", keep=(0, 1), tail=(36,), source_shape=(-1, -1)),
                     id="two unknown dims"),
    ],
)
def test_targets_with_two_unknowns_stay(build) -> None:
    before = build()
    after, count = fold_shape_arithmetic(before)
    assert count == 0 and ops(after) == ops(before)


def test_optimize_leaves_a_known_reshape_and_matches() -> None:
    before = reshape_by_shape_of()
    after, report = optimize(before)
    assert not report.ops_after["Shape"] and not report.ops_after["Concat"]
    assert_same_outputs(before, after, **feeds(before, 2))
