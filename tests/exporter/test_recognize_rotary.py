"""recognize_rotary_embeddings: transformers' x * cos + rotate_half(x) * sin (Llama-style RoPE, as
TorchScript exports it) becomes one RotaryEmbedding; near misses stay as they are."""

from __future__ import annotations

import numpy as np
import pytest

from exporter import ir
from exporter.passes import optimize, recognize_rotary_embeddings
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn

B, H, S, D = 2, 3, 5, 8


def rope(half_from_shape=True, split_at=D // 2, negate="second", cat_order=("neg", "first"), tables=("Cos", "Sin"),
         sin_source="f", swap_tables=False, product_is_output=False) -> ir.Model:
    """apply_rotary_pos_emb on x of shape (B, H, S, D) with knobs for the near misses."""
    n = lambda op, inputs, out, **attrs: ir.Node(op, inputs, [out], attrs, name=out)  # noqa: E731
    nodes = [n("Concat", ["f", "f"], "ff", axis=-1), n("Concat", [sin_source, sin_source], "gg", axis=-1),
             n(tables[0], ["ff"], "cos_raw"), n("Mul", ["cos_raw", "one"], "cos"),
             n(tables[1], ["gg"], "sin"),
             n("Unsqueeze", ["cos", "axis1"], "cos_u"), n("Unsqueeze", ["sin", "axis1"], "sin_u")]
    if half_from_shape:
        nodes += [n("Shape", ["x"], "x_shape"), n("Gather", ["x_shape", "three"], "x_d", axis=0),
                  n("Div", ["x_d", "two"], "x_half"), n("Unsqueeze", ["x_half", "zero"], "half")]
    nodes += [n("Slice", ["x", "start0", "half" if half_from_shape else "split", "axis3", "step1"], "x1"),
              n("Slice", ["x", "half" if half_from_shape else "split", "end", "axis3", "step1"], "x2")]
    negated, kept = ("x2", "x1") if negate == "second" else ("x1", "x2")
    nodes.append(n("Neg", [negated], "neg"))
    pieces = {"neg": "neg", "first": kept}
    nodes.append(n("Concat", [pieces[p] for p in cat_order], "rot", axis=-1))
    cos_u, sin_u = ("sin_u", "cos_u") if swap_tables else ("cos_u", "sin_u")
    nodes += [n("Mul", ["x", cos_u], "x_cos"), n("Mul", ["rot", sin_u], "rot_sin"), n("Add", ["x_cos", "rot_sin"], "y")]
    constants = {"one": np.float32(1.0), "axis1": np.array([1], np.int64), "three": np.int64(3), "two": np.int64(2),
                 "zero": np.array([0], np.int64), "start0": np.array([0], np.int64),
                 "split": np.array([split_at], np.int64), "end": np.array([2**63 - 1], np.int64),
                 "axis3": np.array([3], np.int64), "step1": np.array([1], np.int64)}
    shapes = {"x": (B, H, -1, -1), "f": (1, S, D // 2), "g": (1, S, D // 2), "cos": (1, -1, D), "sin": (1, -1, D)}
    outputs = ["y", "x_cos"] if product_is_output else ["y"]
    return model(graph(nodes, ["x", "f", "g"], outputs, constants, shapes))


def feeds() -> dict[str, np.ndarray]:
    return {"x": randn(B, H, S, D), "f": randn(1, S, D // 2) * 3, "g": randn(1, S, D // 2) * 3}


@pytest.mark.parametrize("half_from_shape", [True, False])
def test_rotate_half_chain_becomes_one_node(half_from_shape: bool) -> None:
    before = rope(half_from_shape=half_from_shape)
    after, count = recognize_rotary_embeddings(before)
    assert count == 1 and "RotaryEmbedding" in ops(after) and "Neg" not in ops(after)
    rotary = next(n for n in after.graph.nodes if n.op_type == "RotaryEmbedding")
    assert rotary.inputs[0] == "x" and rotary.outputs == ["y"]
    assert_same_outputs(before, after, **feeds())


def test_optimize_leaves_the_rotation_and_two_half_tables() -> None:
    before = rope()
    after, report = optimize(before)
    assert report.changes["recognize_rotary_embeddings"] == 1
    assert sorted(ops(after)) == ["Concat", "Cos", "Mul", "RotaryEmbedding", "Sin", "Slice", "Slice"]
    assert_same_outputs(before, after, **feeds())


@pytest.mark.parametrize(
    "near_miss",
    [
        pytest.param(lambda: rope(cat_order=("first", "neg")), id="halves concatenated the other way"),
        pytest.param(lambda: rope(negate="first"), id="first half negated"),
        pytest.param(lambda: rope(half_from_shape=False, split_at=3), id="split off the middle"),
        pytest.param(lambda: rope(swap_tables=True), id="x times sin, the rotation times cos"),
        pytest.param(lambda: rope(tables=("Sin", "Sin")), id="cos table made by Sin"),
        pytest.param(lambda: rope(sin_source="g"), id="sin of other frequencies"),
        pytest.param(lambda: rope(product_is_output=True), id="x * cos also a graph output"),
    ],
)
def test_near_misses_are_left_alone(near_miss) -> None:
    before = near_miss()
    after, count = recognize_rotary_embeddings(before)
    assert count == 0 and ops(after) == ops(before)
