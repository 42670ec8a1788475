"""hand_attention_grouped_kv: Attention reads the key/value heads that Llama's repeat_kv
(Unsqueeze/Expand/Reshape) would copy per query head; near misses stay as they are."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime import load
from exporter import flow_writer, ir
from exporter.passes import hand_attention_grouped_kv, optimize
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn

B, HQ, HKV, S, D = 2, 6, 2, 5, 4
REPEAT = HQ // HKV


def _dim(nodes: list[ir.Node], source: str, index: int, tag: str) -> str:
    """Unsqueeze(Gather(Shape(source), index)), as the exporter reads a dim; returns its name."""
    shape, dim, piece = f"{tag}_shape", f"{tag}_d{index}", f"{tag}_p{index}"
    if not any(n.outputs == [shape] for n in nodes):
        nodes.append(ir.Node("Shape", [source], [shape], name=shape))
    nodes += [ir.Node("Gather", [shape, f"i{index}"], [dim], {"axis": 0}, name=dim),
              ir.Node("Unsqueeze", [dim, "zero"], [piece], name=piece)]
    return piece


def repeat_kv(source: str, out: str, nodes: list[ir.Node], where: bool = True, axis: int = 2,
              expand_dims_of: str | None = None, reshape_dims=(0, 2, 3), extra_reader: bool = False) -> None:
    """Reshape(Expand(Unsqueeze(source, axis), [B, H, n, S, D]), [B, H * n, S, D]) as TorchScript exports it."""
    dims_of = expand_dims_of or source
    pieces = [_dim(nodes, dims_of, i, f"{out}_e") for i in range(4)]
    nodes.append(ir.Node("Concat", pieces[:2] + ["n_rep"] + pieces[2:], [f"{out}_target"], {"axis": 0},
                         name=f"{out}_target"))
    target = f"{out}_target"
    if where:
        nodes += [ir.Node("Equal", [target, "minus_ones"], [f"{out}_eq"], name=f"{out}_eq"),
                  ir.Node("Where", [f"{out}_eq", "ones5", target], [f"{out}_shape"], name=f"{out}_where")]
        target = f"{out}_shape"
    nodes += [ir.Node("Unsqueeze", [source, "axis"], [f"{out}_u"], name=f"{out}_u"),
              ir.Node("Expand", [f"{out}_u", target], [f"{out}_x"], name=f"{out}_x")]
    merged = [_dim(nodes, source, i, f"{out}_r") for i in (0, 1, 2, 3)]
    nodes += [ir.Node("Mul", [merged[1], "n_rep"], [f"{out}_heads"], name=f"{out}_heads")]
    order = {0: merged[0], 2: merged[2], 3: merged[3]}
    pieces4 = [order[reshape_dims[0]], f"{out}_heads", order[reshape_dims[1]], order[reshape_dims[2]]]
    nodes += [ir.Node("Concat", pieces4, [f"{out}_t4"], {"axis": 0}, name=f"{out}_t4"),
              ir.Node("Reshape", [f"{out}_x", f"{out}_t4"], [out], name=f"{out}_reshape")]
    if extra_reader:
        nodes.append(ir.Node("Identity", [out], [f"{out}_seen"], name=f"{out}_seen"))


def gqa(**knobs) -> ir.Model:
    """Attention(q, repeat_kv(k), repeat_kv(v), mask), with ``knobs`` for the near misses (on K)."""
    nodes: list[ir.Node] = []
    extra_reader = knobs.pop("extra_reader", False)
    repeat_kv("k", "k_rep", nodes, extra_reader=extra_reader, **knobs)
    repeat_kv("v", "v_rep", nodes)
    nodes.append(ir.Node("Attention", ["q", "k_rep", "v_rep", "mask"], ["y"], {"scale": 0.5}, name="attention"))
    constants = {f"i{i}": np.int64(i) for i in range(4)}
    constants.update(zero=np.array([0], np.int64), n_rep=np.array([REPEAT], np.int64),
                     axis=np.array([knobs.get("axis", 2)], np.int64), minus_ones=-np.ones(5, np.int64),
                     ones5=np.ones(5, np.int64))
    shapes = {"q": (B, HQ, S, D), "k": (B, HKV, S, D), "v": (B, HKV, S, D), "mask": (B, 1, S, S)}
    outputs = ["y", "k_rep_seen"] if extra_reader else ["y"]
    return model(graph(nodes, ["q", "k", "v", "mask"], outputs, constants, shapes))


def feeds() -> dict[str, np.ndarray]:
    causal = np.triu(np.full((S, S), np.finfo(np.float32).min, np.float32), 1)
    return {"q": randn(B, HQ, S, D), "k": randn(B, HKV, S, D), "v": randn(B, HKV, S, D),
            "mask": np.broadcast_to(causal, (B, 1, S, S)).copy()}


@pytest.mark.parametrize("where", [True, False])
def test_repeated_keys_and_values_go_and_attention_reads_the_groups(where: bool) -> None:
    before = gqa(where=where)
    after, count = hand_attention_grouped_kv(before)
    assert count == 2
    attention = next(n for n in after.graph.nodes if n.op_type == "Attention")
    assert attention.inputs == ["q", "k", "v", "mask"]
    assert "Expand" not in ops(after) and "Reshape" not in ops(after)
    assert_same_outputs(before, after, **feeds())


def test_optimize_leaves_no_shape_arithmetic_behind() -> None:
    before = gqa()
    after, report = optimize(before)
    assert report.changes["hand_attention_grouped_kv"] == 2 and ops(after) == ["Attention"]
    assert_same_outputs(before, after, **feeds())


@pytest.mark.parametrize(
    "near_miss",
    [
        pytest.param(lambda: gqa(expand_dims_of="v"), id="expanded to another tensor's dims"),
        pytest.param(lambda: gqa(reshape_dims=(0, 3, 2)), id="reshaped with the last two dims swapped"),
    ],
)
def test_near_misses_keep_both_repeats(near_miss) -> None:
    """K's chain is no repeat_kv, so V's stays too: Attention takes as many key heads as value heads
    (V alone rewired gave the runtime 2 value heads against 6 key heads, and a crash)."""
    before = near_miss()
    after, count = hand_attention_grouped_kv(before)
    assert count == 0
    attention = next(n for n in after.graph.nodes if n.op_type == "Attention")
    assert attention.inputs == ["q", "k_rep", "v_rep", "mask"]
    assert ops(after).count("Expand") == 2


def test_attention_with_its_own_cache_keeps_its_repeats() -> None:
    """past_key/past_value have as many heads as K and V: unrepeated K would not line up with them."""
    before = gqa()
    attention = next(n for n in before.graph.nodes if n.op_type == "Attention")
    attention.inputs += ["", "past_key", "past_value"]
    for name in ("past_key", "past_value"):
        before.graph.inputs.append(name)
        before.graph.values[name] = ir.Value(name, before.graph.values["q"].dtype, (B, HQ, 2, D))
    after, count = hand_attention_grouped_kv(before)
    assert count == 0 and ops(after).count("Expand") == 2


def test_repeated_keys_read_by_another_node_stay_for_it() -> None:
    """A Llama export with a cache reads the repeated values' Shape too: Attention reads the groups,
    and the chain stays for that reader alone."""
    before = gqa(extra_reader=True)
    after, count = hand_attention_grouped_kv(before)
    assert count == 2
    attention = next(n for n in after.graph.nodes if n.op_type == "Attention")
    assert attention.inputs == ["q", "k", "v", "mask"]
    assert ops(after).count("Expand") == 1
    assert_same_outputs(before, after, **feeds())


def test_rewired_attention_runs_on_the_edge_runtime() -> None:
    """The model after the pass converts and matches the model before it on the edge runtime."""
    before = gqa(extra_reader=True)
    after, _ = optimize(before)
    inputs = feeds()
    want = load(flow_writer.to_bytes(before)).run(inputs)
    got = load(flow_writer.to_bytes(after)).run(inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def fixed_shape_gqa(expand_target=(B, HKV, REPEAT, S, D), reshape_target=(B, HQ, S, D)) -> ir.Model:
    """repeat_kv as a fixed-shape export (or the folded shape arithmetic of known dims) leaves it:
    Expand and Reshape to constant shapes."""
    nodes: list[ir.Node] = []
    for source, out in (("k", "k_rep"), ("v", "v_rep")):
        nodes += [ir.Node("Unsqueeze", [source, "axis"], [f"{out}_u"], name=f"{out}_u"),
                  ir.Node("Expand", [f"{out}_u", "expand_to"], [f"{out}_x"], name=f"{out}_x"),
                  ir.Node("Reshape", [f"{out}_x", "reshape_to"], [out], name=f"{out}_reshape")]
    nodes.append(ir.Node("Attention", ["q", "k_rep", "v_rep", "mask"], ["y"], {"scale": 0.5}, name="attention"))
    constants = {"axis": np.array([2], np.int64), "expand_to": np.array(expand_target, np.int64),
                 "reshape_to": np.array(reshape_target, np.int64)}
    shapes = {"q": (B, HQ, S, D), "k": (B, HKV, S, D), "v": (B, HKV, S, D), "mask": (B, 1, S, S)}
    return model(graph(nodes, ["q", "k", "v", "mask"], ["y"], constants, shapes))


def test_constant_shapes_of_a_fixed_shape_export_match_too() -> None:
    before = fixed_shape_gqa()
    after, count = hand_attention_grouped_kv(before)
    assert count == 2 and ops(after) == ["Attention"]
    assert_same_outputs(before, after, **feeds())


def test_constant_shapes_that_are_not_kvs_own_dims_stay() -> None:
    """An Expand to [B, H, n, D, S] of a (B, H, S, D) value (S != D) is no repeat_kv: it stays."""
    before = fixed_shape_gqa(expand_target=(B, HKV, REPEAT, D, S), reshape_target=(B, HQ, D, S))
    after, count = hand_attention_grouped_kv(before)
    assert count == 0 and ops(after).count("Expand") == 2
