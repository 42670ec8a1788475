"""A fused-LSTM model (trainer.layers.LSTMBlockFusedCell) exports as the standard ONNX LSTM and
matches the trainer on the edge runtime and in onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import trainer as T
from exporter import FreezeError, export_trained, freeze
from exporter.freeze import trainer_outputs


def _two_fused_layers(forget_bias: float = 0.0):
    g = T.Graph()
    with g.as_default():
        xs = T.placeholder(np.float32, (5, 3, 4), name="xs")
        h0 = T.placeholder(np.float32, (3, 6), name="h0")
        c0 = T.placeholder(np.float32, (3, 6), name="c0")
        l1, l2 = T.layers.LSTMBlockFusedCell(6, 4, name="l1"), T.layers.LSTMBlockFusedCell(6, 6, name="l2")
        seq, _ = l1(xs, (h0, c0))
        if forget_bias:
            seq.node.attrs["forget_bias"] = forget_bias
        out, (h, c) = l2(seq, l2.zero_state(3))
        target = T.placeholder(np.float32, (3, 6), name="target")
        train = T.train.AdamOptimizer(1e-2).minimize(T.losses.mean_squared_error(target, h))
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    rng = np.random.default_rng(0)
    feeds = {"xs": rng.standard_normal((5, 3, 4)).astype(np.float32),
             "h0": rng.standard_normal((3, 6)).astype(np.float32) * 0.5,
             "c0": rng.standard_normal((3, 6)).astype(np.float32) * 0.5}
    s.run(train, {xs: feeds["xs"], h0: feeds["h0"], c0: feeds["c0"],
                  target: rng.standard_normal((3, 6)).astype(np.float32)})  # weights off their initial values
    return s, {"xs": xs, "h0": h0, "c0": c0}, {"y": out, "h": h, "c": c}, feeds


@pytest.mark.parametrize("forget_bias", [0.0, 1.0])
def test_fused_lstm_exports_as_onnx_lstm_matching_the_trainer(tmp_path: Path, forget_bias: float) -> None:
    s, inputs, outputs, feeds = _two_fused_layers(forget_bias)
    frozen = freeze(s, inputs, outputs)
    ops = [n.op_type for n in frozen.graph.nodes]
    assert ops.count("LSTM") == 2 and all(n.domain == "" for n in frozen.graph.nodes)
    report = export_trained(s, tmp_path / "m.flow", inputs, outputs, samples=feeds)
    assert report.trainer_parity.ok and max(d.max_rel for d in report.trainer_parity.outputs.values()) <= 1e-5
    assert "Transpose" not in report.passes.ops_after  # the weight reshuffle folds into constants
    ort = pytest.importorskip("onnxruntime")
    from exporter import to_onnx

    got = ort.InferenceSession(to_onnx(frozen).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    want = trainer_outputs(s, feeds, inputs, outputs)
    for name, value in zip(outputs, got):
        np.testing.assert_allclose(value, want[name], rtol=1e-5, atol=1e-6)


def test_saved_gate_activations_are_refused_naming_them() -> None:
    s, inputs, outputs, _ = _two_fused_layers()
    gates = outputs["y"].node.outputs[3]
    with pytest.raises(FreezeError, match=r"reads l2/LSTMBlockFused:3 \(gates\), which LSTMBlockFused node .l2/LSTMBlockFused. saves for its gradient, kept for training only; export y"):
        freeze(s, inputs, {"gates": gates})
