"""recognize_attention: MatMul(Q*s, Kᵀ*s) [+ mask] -> Softmax -> MatMul(·, V) over 4-D heads becomes
one Attention node with the same outputs; near misses (mask after the Softmax, scale on the wrong
operand, Softmax over another axis, an inner value read elsewhere) stay as they are."""

from __future__ import annotations

import numpy as np
import pytest

from exporter import ir
from exporter.passes import recognize_attention
from tests.exporter.test_passes import assert_same_outputs, graph, model, ops, randn

B, H, S, D = 2, 3, 5, 4
SHAPES = {"q": (B, H, S, D), "k": (B, S, H, D), "v": (B, H, S, D), "mask": (B, 1, 1, S)}


def attention(scale_on: tuple[str, ...] = ("q", "kt"), scale: float = D ** -0.25, mask: str | None = "before",
              axis: int = -1, k_perm: tuple[int, ...] = (0, 2, 3, 1), scores_output: bool = False,
              post_div: float | None = None) -> ir.Model:
    """PyTorch's export of scaled dot-product attention, with knobs to build the near misses."""
    constants = {"s": np.float32(scale)}
    nodes = [ir.Node("Transpose", ["k"], ["kt"], {"perm": list(k_perm)}, name="k_t")]
    operand = {"q": "q", "kt": "kt", "v": "v"}
    for name in scale_on:
        if name in operand:
            nodes.append(ir.Node("Mul", [operand[name], "s"], [f"{name}_s"], name=f"scale_{name}"))
            operand[name] = f"{name}_s"
    nodes.append(ir.Node("MatMul", [operand["q"], operand["kt"]], ["scores"], name="qk"))
    logits = "scores"
    if post_div is not None:
        constants["c"] = np.float32(post_div)
        nodes.append(ir.Node("Div", ["scores", "c"], ["scaled"], name="post"))
        logits = "scaled"
    if mask == "before":
        nodes.append(ir.Node("Add", [logits, "mask"], ["masked"], name="mask_add"))
        logits = "masked"
    nodes.append(ir.Node("Softmax", [logits], ["p"], {"axis": axis}, name="softmax"))
    probs = "p"
    if mask == "after":
        nodes.append(ir.Node("Add", ["p", "mask"], ["p_masked"], name="mask_add"))
        probs = "p_masked"
    if "p" in scale_on:
        nodes.append(ir.Node("Mul", [probs, "s"], ["p_s"], name="scale_p"))
        probs = "p_s"
    nodes.append(ir.Node("MatMul", [probs, operand["v"]], ["y"], name="pv"))
    outputs = ["y", "scores"] if scores_output else ["y"]
    return model(graph(nodes, ["q", "k", "v", "mask"], outputs, constants, SHAPES))


def feeds() -> dict[str, np.ndarray]:
    mask = np.where(np.arange(S) < np.array([[S], [2]]), 0.0, -10000.0).astype(np.float32).reshape(B, 1, 1, S)
    return {"q": randn(*SHAPES["q"]), "k": randn(*SHAPES["k"]), "v": randn(*SHAPES["v"]), "mask": mask}


@pytest.mark.parametrize("mask", ["before", None])
def test_scaled_masked_attention_becomes_one_node(mask) -> None:
    before = attention(mask=mask)
    after, count = recognize_attention(before)
    assert count == 1 and ops(after) == ["Transpose", "Attention"]
    node = after.graph.nodes[-1]
    assert node.attrs["scale"] == pytest.approx(D ** -0.5) and len(node.inputs) == (4 if mask else 3)
    assert after.graph.nodes[0].attrs["perm"] == [0, 2, 1, 3]  # K back in (B, H, S, D)
    assert_same_outputs(before, after, **feeds())


def test_scale_after_the_product_and_k_transposed_in_place() -> None:
    before = attention(scale_on=(), post_div=D ** 0.5, k_perm=(0, 1, 3, 2))
    before.graph.values["k"].shape = SHAPES["q"]
    after, count = recognize_attention(before)
    assert count == 1 and ops(after) == ["Attention"]
    f = feeds()
    f["k"] = randn(*SHAPES["q"])
    assert_same_outputs(before, after, **f)


@pytest.mark.parametrize("near_miss", [
    {"mask": "after"},  # a mask added to the probabilities
    {"scale_on": ("v",)},  # the scale on V, none on the product
    {"scale_on": ("q", "p")},  # one scale on the probabilities
    {"axis": 2},  # Softmax over the queries
    {"scores_output": True},  # the scores are read outside the chain
])
def test_near_misses_stay(near_miss) -> None:
    before = attention(**near_miss)
    after, count = recognize_attention(before)
    assert count == 0 and "Attention" not in ops(after)


def test_attention_kernel_fast_path_matches_the_general_one_on_strided_heads_and_dead_rows() -> None:
    from edge_runtime.kernels.nn import attention

    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((B, S, H, D)).astype(np.float32).transpose(0, 2, 1, 3) for _ in range(3))
    mask = np.zeros((B, 1, S, S), np.float32)
    mask[0, 0, 1, :] = -np.inf  # a query that may see no key: zeros, not NaN
    mask[1, 0, :, 3:] = -np.inf
    attrs = dict(xp=np, is_causal=0, kv_num_heads=None, left_window_size=-1, q_num_heads=None,
                 qk_matmul_output_mode=0, right_window_size=-1, scale=0.3, softcap=0.0, softmax_precision=None)
    fast = attention(q, k, v, mask, None, None, None, n_outputs=1, **attrs)
    general = attention(q, k, v, mask, None, None, None, n_outputs=4, **attrs)[0]
    assert not np.isnan(fast).any() and not fast[0, :, 1].any()
    np.testing.assert_allclose(fast, general, rtol=1e-5, atol=1e-6)


def test_three_d_heads_stay() -> None:
    # Attention would read 3-D Q and V as (batch, sequence, heads * size): (B*H, S, D) heads stay
    before = attention()
    for name in ("q", "v"):
        before.graph.values[name].shape = (B * H, S, D)
    after, count = recognize_attention(before)
    assert count == 0 and ops(after) == ops(before)
    assert after.graph.nodes[0].attrs["perm"] == [0, 2, 3, 1]


def default_scale_attention(start: int = -1) -> ir.Model:
    """F.scaled_dot_product_attention's export: sqrt(1 / sqrt(head size)) from Shape(Q) on Q and Kᵀ."""
    constants = {"start": np.array([start], np.int64), "end": np.array([2**62], np.int64), "one": np.float32(1)}
    nodes = [ir.Node("Shape", ["q"], ["shape"]), ir.Node("Slice", ["shape", "start", "end"], ["last"]),
             ir.Node("Cast", ["last"], ["size"], {"to": 1}), ir.Node("Sqrt", ["size"], ["root"]),
             ir.Node("Div", ["one", "root"], ["inv"]), ir.Node("Sqrt", ["inv"], ["s"]),
             ir.Node("Transpose", ["k"], ["kt"], {"perm": [0, 1, 3, 2]}),
             ir.Node("Mul", ["q", "s"], ["q_s"]), ir.Node("Mul", ["kt", "s"], ["kt_s"]),
             ir.Node("MatMul", ["q_s", "kt_s"], ["scores"]), ir.Node("Softmax", ["scores"], ["p"], {"axis": -1}),
             ir.Node("MatMul", ["p", "v"], ["y"])]
    shapes = {"q": SHAPES["q"], "k": SHAPES["q"], "v": SHAPES["v"]}
    return model(graph(nodes, ["q", "k", "v"], ["y"], constants, shapes))


def test_default_scale_computed_from_the_head_size_becomes_the_default() -> None:
    before = default_scale_attention()
    after, count = recognize_attention(before)
    attention_node = next(n for n in after.graph.nodes if n.op_type == "Attention")
    assert count == 1 and "scale" not in attention_node.attrs and attention_node.inputs == ["q", "k", "v"]
    f = feeds()
    assert_same_outputs(before, after, q=f["q"], k=randn(*SHAPES["q"]), v=f["v"])


def test_a_scale_computed_from_another_dimension_stays() -> None:
    after, count = recognize_attention(default_scale_attention(start=-2))
    assert count == 0 and "Attention" not in ops(after)
