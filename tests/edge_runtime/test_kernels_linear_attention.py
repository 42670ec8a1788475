"""LinearAttention (opset 27) beyond its ONNX node cases: each update rule against a per-head loop
written from the spec's formulas, prefill equal to decoding token by token through the carried
state, the dtypes of the two outputs, and malformed nodes refused with an error naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import edge_runtime
from edge_runtime.plan import ExecutionError
from exporter.onnx_import import onnx_to_flow_bytes
from schemas import ShapeError, TensorType, get_schema, infer_types

RNG = np.random.default_rng(27)
INPUTS = ("query", "key", "value", "past_state", "decay", "beta")
ONNX_TYPES = {np.float32: TensorProto.FLOAT, np.float16: TensorProto.FLOAT16}


def _model(feeds: dict[str, np.ndarray], **attrs) -> bytes:
    """One LinearAttention node (named 'mixer') reading the given inputs, the others omitted."""
    node = helper.make_node("LinearAttention", [n if n in feeds else "" for n in INPUTS],
                            ["output", "present_state"], name="mixer", **attrs)
    while not node.input[-1]:
        node.input.pop()
    graph = helper.make_graph(
        [node], "linear_attention",
        [helper.make_tensor_value_info(n, ONNX_TYPES[feeds[n].dtype.type], feeds[n].shape) for n in feeds],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in ("output", "present_state")])
    return onnx_to_flow_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)]))


def _run(feeds: dict[str, np.ndarray], **attrs) -> tuple[np.ndarray, np.ndarray]:
    out = edge_runtime.load(_model(feeds, **attrs)).run(feeds)
    return out["output"], out["present_state"]


def _by_definition(feeds, *, q_num_heads, kv_num_heads, update_rule, scale=0.0):
    """The spec's recurrence, one head and one token at a time in float64."""
    q, k, v = (feeds[n].astype(np.float64) for n in ("query", "key", "value"))
    batch, steps = q.shape[:2]
    d_k, d_v = q.shape[2] // q_num_heads, v.shape[2] // kv_num_heads
    state = feeds.get("past_state", np.zeros((batch, kv_num_heads, d_k, d_v))).astype(np.float64).copy()
    out = np.zeros((batch, steps, q_num_heads, d_v))
    group = q_num_heads // kv_num_heads
    scale = scale or 1 / np.sqrt(d_k)
    for b in range(batch):
        for t in range(steps):
            for h in range(kv_num_heads):
                key, value = k[b, t, h * d_k:(h + 1) * d_k], v[b, t, h * d_v:(h + 1) * d_v]
                if "decay" in feeds:
                    g = feeds["decay"][b, t].astype(np.float64)
                    g = g[h] if g.size == kv_num_heads else g[h * d_k:(h + 1) * d_k, None]
                    state[b, h] *= np.exp(g)
                if "beta" in feeds:
                    beta = feeds["beta"][b, t, h if feeds["beta"].shape[2] > 1 else 0]
                    value = beta * (value - state[b, h].T @ key)
                state[b, h] += np.outer(key, value)
            for h in range(q_num_heads):
                out[b, t, h] = scale * q[b, t, h * d_k:(h + 1) * d_k] @ state[b, h // group]
    return out.reshape(batch, steps, -1), state


def _feeds(update_rule, *, batch=2, steps=5, hq=4, hkv=2, d_k=3, d_v=4, per_head_decay=False, past=True):
    feeds = {"query": RNG.standard_normal((batch, steps, hq * d_k)).astype(np.float32),
             "key": (RNG.standard_normal((batch, steps, hkv * d_k)) / np.sqrt(d_k)).astype(np.float32),
             "value": RNG.standard_normal((batch, steps, hkv * d_v)).astype(np.float32)}
    if past:
        feeds["past_state"] = 0.1 * RNG.standard_normal((batch, hkv, d_k, d_v)).astype(np.float32)
    if update_rule in ("gated", "gated_delta"):
        feeds["decay"] = -0.1 * np.abs(RNG.standard_normal((batch, steps, hkv if per_head_decay else hkv * d_k)))
        feeds["decay"] = feeds["decay"].astype(np.float32)
    if update_rule in ("delta", "gated_delta"):
        feeds["beta"] = RNG.uniform(0, 1, (batch, steps, hkv)).astype(np.float32)
    return feeds


@pytest.mark.parametrize("update_rule, per_head_decay, hq, hkv", [
    ("linear", False, 4, 2), ("gated", False, 2, 2), ("gated", True, 4, 1), ("delta", False, 4, 4),
    ("gated_delta", False, 6, 2), ("gated_delta", True, 4, 2),
])
def test_each_update_rule_matches_the_recurrence(update_rule, per_head_decay, hq, hkv) -> None:
    feeds = _feeds(update_rule, per_head_decay=per_head_decay, hq=hq, hkv=hkv)
    attrs = dict(q_num_heads=hq, kv_num_heads=hkv, update_rule=update_rule)
    got, state = _run(feeds, **attrs)
    want, want_state = _by_definition(feeds, **attrs)
    # float32 against float64: errors of 1e-6 measured over these 5 steps
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-4)


def test_explicit_scale_replaces_one_over_root_d_k() -> None:
    feeds = _feeds("linear", past=False)
    got, _ = _run(feeds, q_num_heads=4, kv_num_heads=2, update_rule="linear", scale=0.25)
    want, _ = _by_definition(feeds, q_num_heads=4, kv_num_heads=2, update_rule="linear", scale=0.25)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_prefill_equals_decoding_token_by_token() -> None:
    feeds = _feeds("gated_delta", steps=6)
    attrs = dict(q_num_heads=4, kv_num_heads=2, update_rule="gated_delta")
    prefill, prefill_state = _run(feeds, **attrs)
    state = feeds["past_state"]
    for t in range(6):
        step = {n: a[:, t:t + 1] for n, a in feeds.items() if n != "past_state"}
        out, state = _run({**step, "past_state": state}, **attrs)
        np.testing.assert_allclose(out, prefill[:, t:t + 1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state, prefill_state, rtol=1e-5, atol=1e-6)


def test_float16_activations_with_a_float32_state() -> None:
    feeds = _feeds("gated", past=True)
    feeds = {n: a.astype(np.float32 if n == "past_state" else np.float16) for n, a in feeds.items()}
    got, state = _run(feeds, q_num_heads=4, kv_num_heads=2, update_rule="gated")
    assert got.dtype == np.float16 and state.dtype == np.float32
    want, want_state = _by_definition(feeds, q_num_heads=4, kv_num_heads=2, update_rule="gated")
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)  # float16 rounding of the output
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-4)
    _, state = _run({n: a for n, a in feeds.items() if n != "past_state"}, q_num_heads=4, kv_num_heads=2,
                    update_rule="gated")
    assert state.dtype == np.float16  # no past state: the state takes the query's type


@pytest.mark.parametrize("change, attrs, message", [
    ({"past_state": np.zeros((2, 2, 3, 5), np.float32)}, {},
     r"past_state must have shape \(2, 2, 3, 4\) \(B, kv_num_heads, d_k, d_v\), got \(2, 2, 3, 5\)"),
    ({"beta": None}, {}, "update_rule 'gated_delta' requires beta input"),
    ({}, {"update_rule": "linear"}, "update_rule 'linear' takes no decay input"),
    ({}, {"update_rule": "softmax"}, "update_rule must be one of"),
    ({}, {"q_num_heads": 3}, r"q_num_heads \(3\) must be a positive multiple of kv_num_heads \(2\)"),
    ({"decay": np.zeros((2, 5, 5), np.float32)}, {}, r"decay must be \(B, T, kv_num_heads\).*got shape \(2, 5, 5\)"),
    ({"key": np.zeros((2, 4, 6), np.float32)}, {}, r"key must be \(B, T, H \* D\) with query's \(B, T\)"),
])
def test_a_malformed_node_is_named(change, attrs, message) -> None:
    feeds = {**_feeds("gated_delta"), **change}
    feeds = {n: a for n, a in feeds.items() if a is not None}
    attrs = {"q_num_heads": 4, "kv_num_heads": 2, "update_rule": "gated_delta", **attrs}
    with pytest.raises(ExecutionError, match=rf"'mixer' \(LinearAttention\): ValueError: LinearAttention: {message}"):
        _run(feeds, **attrs)


def test_shape_rule_gives_both_outputs_and_names_a_missing_decay() -> None:
    schema = get_schema("LinearAttention")
    f32, f16 = np.dtype(np.float32), np.dtype(np.float16)
    types = [TensorType(f16, (2, 7, 12)), TensorType(f16, (2, 7, 6)), TensorType(f16, (2, 7, 8)),
             TensorType(f32, (2, 2, 3, 4)), TensorType(f16, (2, 7, 2)), TensorType(f16, (2, 7, 2))]
    attrs = schema.resolve_attrs({"q_num_heads": 4, "kv_num_heads": 2})
    output, state = infer_types(schema, types, attrs, num_outputs=2)
    assert output == TensorType(f16, (2, 7, 16)) and state == TensorType(f32, (2, 2, 3, 4))
    with pytest.raises(ShapeError, match=r"LinearAttention \(node 'mixer'\): update_rule 'gated_delta' requires decay"):
        infer_types(schema, types[:4] + [None, types[5]], attrs, num_outputs=2, name="mixer")
