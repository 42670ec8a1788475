"""RNN, GRU and LSTM kernels against onnxruntime (and ONNX's reference evaluator where onnxruntime
does not implement an attribute), over directions, layouts, sequence lengths and options."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime.kernels import get_kernel
from schemas import get_schema
from schemas.registry import infer_types, TensorType

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
INPUTS = {
    "RNN": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
    "GRU": ["X", "W", "R", "B", "sequence_lens", "initial_h"],
    "LSTM": ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"],
}


def make_inputs(op, *, seq=5, batch=3, inp=4, hidden=6, direction="forward", layout=0, bias=True,
                lens=None, initial=True, peepholes=False, seed=0):
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32) * 0.5  # noqa: E731
    feeds = {
        "X": f32(seq, batch, inp) if layout == 0 else f32(batch, seq, inp),
        "W": f32(d, g * hidden, inp),
        "R": f32(d, g * hidden, hidden),
    }
    if bias:
        feeds["B"] = f32(d, 2 * g * hidden)
    if lens is not None:
        feeds["sequence_lens"] = np.asarray(lens, dtype=np.int32)
    state = (d, batch, hidden) if layout == 0 else (batch, d, hidden)
    if initial:
        feeds["initial_h"] = f32(*state)
        if op == "LSTM":
            feeds["initial_c"] = f32(*state)
    if peepholes:
        feeds["P"] = f32(d, 3 * hidden)
    return feeds


def run_kernel(op, feeds, **attrs):
    schema = get_schema(op)
    resolved = schema.resolve_attrs(attrs)
    args = [feeds.get(name) for name in INPUTS[op]]
    return get_kernel(op)(*args, xp=np, **resolved)


def run_reference(op, feeds, n_out, *, engine="ort", **attrs):
    names = [n if n in feeds else "" for n in INPUTS[op]]
    while names and names[-1] == "":
        names.pop()
    outs = ["Y", "Y_h", "Y_c"][:n_out]
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), feeds[n].shape)
         for n in names if n],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    inputs = {n: feeds[n] for n in names if n}
    if engine == "ort":
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, inputs)
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(None, inputs)


def check(op, feeds, engine="ort", rtol=1e-4, atol=1e-5, **attrs):
    n_out = 3 if op == "LSTM" else 2
    attrs.setdefault("hidden_size", feeds["R"].shape[-1])
    got = run_kernel(op, feeds, **attrs)
    want = run_reference(op, feeds, n_out, engine=engine, **attrs)
    assert len(got) == n_out
    for name, g, w in zip(["Y", "Y_h", "Y_c"], got, want):
        assert g.dtype == np.float32, name
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{op} {name}")
    # the shape rule agrees with what the kernel produced
    types = [TensorType(v.dtype, v.shape) if v is not None else None for v in (feeds.get(n) for n in INPUTS[op])]
    resolved = get_schema(op).resolve_attrs(attrs)
    inferred = infer_types(get_schema(op), types, resolved, num_outputs=n_out)
    for t, g in zip(inferred, got):
        assert t.shape == g.shape and t.dtype == g.dtype


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lens", [None, [5, 2, 4]])
def test_directions_and_sequence_lens(op, direction, lens):
    check(op, make_inputs(op, direction=direction, lens=lens, seed=1), direction=direction)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_batch_major_layout(op, direction):
    # onnxruntime's CPU kernels reject layout=1; ONNX's reference evaluator implements it
    feeds = make_inputs(op, layout=1, direction=direction, seed=2)
    check(op, feeds, engine="reference", layout=1, direction=direction)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_no_bias_no_initial_state(op):
    check(op, make_inputs(op, bias=False, initial=False, seed=3))


def test_gru_linear_before_reset():
    for direction in ("forward", "bidirectional"):
        feeds = make_inputs("GRU", direction=direction, lens=[3, 5, 1], seed=4)
        check("GRU", feeds, linear_before_reset=1, direction=direction)


def test_lstm_peepholes_input_forget_and_clip():
    feeds = make_inputs("LSTM", direction="bidirectional", peepholes=True, lens=[4, 5, 2], seed=5)
    check("LSTM", feeds, direction="bidirectional")
    check("LSTM", feeds, direction="bidirectional", input_forget=1)
    check("LSTM", feeds, direction="bidirectional", clip=0.3)


@pytest.mark.parametrize(
    "op, activations, alpha, beta",
    [
        ("RNN", ["Relu", "LeakyRelu"], [0.2], None),
        ("GRU", ["HardSigmoid", "Softsign", "Sigmoid", "Tanh"], [0.3], [0.4]),
        ("LSTM", ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "Tanh", "Tanh"], [0.25], [0.45]),
    ],
)
def test_activations_per_direction(op, activations, alpha, beta):
    attrs = {"activations": activations, "direction": "bidirectional", "activation_alpha": alpha}
    if beta:
        attrs["activation_beta"] = beta
    check(op, make_inputs(op, direction="bidirectional", seed=6), **attrs)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_zero_length_sequence(op):
    # Y rows are zero; final states are zero too, as onnxruntime has them
    for direction in ("forward", "bidirectional"):
        check(op, make_inputs(op, lens=[0, 5, 3], direction=direction, seed=7), direction=direction)


def test_schema_rejects_inconsistent_weights():
    schema = get_schema("LSTM")
    attrs = schema.resolve_attrs({"hidden_size": 6, "direction": "bidirectional"})
    types = [TensorType(np.dtype(np.float32), (5, 3, 4)), TensorType(np.dtype(np.float32), (1, 24, 4)),
             TensorType(np.dtype(np.float32), (1, 24, 6))]
    with pytest.raises(ValueError, match="directions"):
        infer_types(schema, types, attrs, num_outputs=3)


def test_recurrent_ops_are_not_differentiable():
    assert not any(get_schema(op).differentiable for op in GATES)


def test_recurrent_row_blocks_cover_the_weight_in_order():
    from edge_runtime.kernels.recurrent import RECURRENT_BLOCK_MACS, RECURRENT_BLOCK_MAX_BATCH, recurrent_row_blocks

    for rows, hidden, batch in [(1024, 256, 8), (1024, 256, 1), (40, 10, 3), (0, 5, 2), (12, 3, 0)]:
        blocks = recurrent_row_blocks(rows, hidden, batch)
        covered = [r for block in blocks for r in range(rows)[block]]
        assert covered == list(range(rows))
        assert all((block.stop - block.start) * hidden * batch <= max(RECURRENT_BLOCK_MACS, hidden * batch)
                   for block in blocks)
    assert len(recurrent_row_blocks(1024, 256, 8)) == 4  # hidden 256, batch 8: blocks of 256 rows
    assert recurrent_row_blocks(4096, 1024, RECURRENT_BLOCK_MAX_BATCH + 1) == (slice(0, 4096),)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("batch", [1, 4])
def test_lstm_recurrent_product_in_row_blocks(monkeypatch, direction, batch):
    # blocks of a few rows each (uneven: 4 * 10 gate rows in blocks of 3) give the product whole
    from edge_runtime.kernels import recurrent

    monkeypatch.setattr(recurrent, "RECURRENT_BLOCK_MACS", 3 * 10 * batch)
    assert len(recurrent.recurrent_row_blocks(40, 10, batch)) == 14
    feeds = make_inputs("LSTM", seq=7, batch=batch, inp=5, hidden=10, direction=direction, seed=9)
    check("LSTM", feeds, direction=direction)


@pytest.mark.parametrize("op, attrs", [("RNN", {}), ("GRU", {"linear_before_reset": 1}),
                                       ("GRU", {"linear_before_reset": 0}), ("LSTM", {"clip": 9.0})])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_recurrent_product_in_blocks_of_gate_rows(monkeypatch, op, attrs, direction):
    # RNN, GRU and the general LSTM multiply h @ R^T in blocks of R's rows (4 rows each here:
    # ragged against GRU's 2 * 7 and 7 gate rows and LSTM's 28), with sequence_lens masking steps
    from edge_runtime.kernels import recurrent

    monkeypatch.setattr(recurrent, "RECURRENT_BLOCK_MACS", 4 * 7 * 3)
    assert len(recurrent.recurrent_row_blocks(21, 7, 3)) == 6
    feeds = make_inputs(op, seq=6, batch=3, inp=5, hidden=7, direction=direction, lens=[6, 2, 4], seed=11)
    check(op, feeds, direction=direction, **attrs)
