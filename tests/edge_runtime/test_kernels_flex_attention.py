"""FlexAttention (ai.onnx.preview) beyond its ONNX node cases: score_mod and prob_mod subgraphs that
read values of the outer graph (the runtime binds them as it does for Loop bodies), grouped-query
heads against repeated ones, and malformed nodes or subgraphs refused with an error naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import edge_runtime
from edge_runtime.plan import ExecutionError
from exporter.onnx_import import onnx_to_flow_bytes

PREVIEW = "ai.onnx.preview"
RNG = np.random.default_rng(26)
F32 = TensorProto.FLOAT


def _mod_graph(name: str, nodes: list, output: str = "out") -> object:
    """A one-input, one-output modifier subgraph over (B, H, L, S) values named 'x'."""
    return helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", F32, None)],
                             [helper.make_tensor_value_info(output, F32, None)])


def _run(feeds: dict[str, np.ndarray], *, outer: tuple[str, ...] = (), **attrs) -> np.ndarray:
    """One FlexAttention node named 'flex' on Q, K, V; ``outer`` are more graph inputs its subgraphs read."""
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], name="flex", domain=PREVIEW, **attrs)
    graph = helper.make_graph(
        [node], "flex", [helper.make_tensor_value_info(n, F32, feeds[n].shape) for n in ("Q", "K", "V", *outer)],
        [helper.make_tensor_value_info("Y", F32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid(PREVIEW, 1)])
    return edge_runtime.load(onnx_to_flow_bytes(model)).run(feeds)["Y"]


def _by_definition(q, k, v, *, scale=None, score_mod=lambda s: s, prob_mod=lambda p: p):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scores = score_mod(q @ k.transpose(0, 1, 3, 2) * (1 / np.sqrt(q.shape[3]) if scale is None else scale))
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return prob_mod(e / e.sum(axis=-1, keepdims=True)) @ v


def _qkv(batch=2, q_heads=4, kv_heads=2, length=5, kv_length=7, head=8, v_head=6):
    return {"Q": RNG.standard_normal((batch, q_heads, length, head)).astype(np.float32),
            "K": RNG.standard_normal((batch, kv_heads, kv_length, head)).astype(np.float32),
            "V": RNG.standard_normal((batch, kv_heads, kv_length, v_head)).astype(np.float32)}


@pytest.mark.parametrize("q_heads, kv_heads", [(4, 4), (4, 2), (6, 1)])
def test_grouped_heads_match_repeated_heads(q_heads, kv_heads) -> None:
    feeds = _qkv(q_heads=q_heads, kv_heads=kv_heads)
    got = _run(feeds, scale=0.3)
    np.testing.assert_allclose(got, _by_definition(feeds["Q"], feeds["K"], feeds["V"], scale=0.3), rtol=1e-5, atol=1e-5)


def test_modifiers_read_values_of_the_outer_graph() -> None:
    feeds = {**_qkv(), "bias": RNG.standard_normal((5, 7)).astype(np.float32),
             "keep": RNG.uniform(0.5, 1.0, (7,)).astype(np.float32)}
    score_mod = _mod_graph("add_bias", [helper.make_node("Add", ["x", "bias"], ["out"])])
    prob_mod = _mod_graph("reweight", [helper.make_node("Mul", ["x", "keep"], ["out"])])
    got = _run(feeds, outer=("bias", "keep"), score_mod=score_mod, prob_mod=prob_mod)
    want = _by_definition(feeds["Q"], feeds["K"], feeds["V"], score_mod=lambda s: s + feeds["bias"],
                          prob_mod=lambda p: p * feeds["keep"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_row_masked_out_entirely_gives_zeros() -> None:
    feeds = {**_qkv(length=3, kv_length=3), "mask": np.array([[0, 0, 0], [0, -np.inf, 0], [-np.inf] * 3], np.float32)}
    got = _run(feeds, outer=("mask",), score_mod=_mod_graph("mask", [helper.make_node("Add", ["x", "mask"], ["out"])]))
    np.testing.assert_array_equal(got[:, :, 2], 0)
    assert np.isfinite(got).all()


@pytest.mark.parametrize("shapes, attrs, message", [
    ({"Q": (2, 4, 5)}, {}, r"Q must be rank 4 \(batch, heads, sequence, head size\), got shape \(2, 4, 5\)"),
    ({"K": (2, 3, 7, 8), "V": (2, 3, 7, 6)}, {}, r"Q's 4 heads are not a multiple of K and V's 3"),
    ({"V": (2, 2, 6, 6)}, {}, r"K must be \(batch, kv_heads, kv_length, 8\) and V"),
    ({}, {"score_mod": _mod_graph("shrink", [helper.make_node("ReduceSum", ["x"], ["out"], keepdims=0)])},
     r"score_mod returned shape \(\) for input shape \(2, 4, 5, 7\); it must keep the shape"),
    ({}, {"softmax_precision": 7}, r"softmax_precision must be one of \[1, 10, 11, 16\]"),
])
def test_a_malformed_node_is_named(shapes, attrs, message) -> None:
    feeds = {**_qkv(), **{n: np.zeros(s, np.float32) for n, s in shapes.items()}}
    with pytest.raises(ExecutionError, match=rf"'flex' \(FlexAttention\): ValueError: FlexAttention: {message}"):
        _run(feeds, **attrs)
