"""The PyTorch-exported zoo (``benchmarks.zoo``) at small sizes: after ``optimize`` every model runs on
the edge runtime and matches onnxruntime within 1e-4 and PyTorch itself, at batch 1 and at its batch.

torch (and transformers, for the BERT entry) are benchmark peers, never package dependencies: the
module is skipped where torch is not installed.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from benchmarks.edge_vs_onnxruntime import flow_bytes, ort_session  # noqa: E402
from benchmarks.zoo import ZOO, export, torch_outputs  # noqa: E402
from edge_runtime import load  # noqa: E402

TOLERANCE = 1e-4


def _assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Within ``TOLERANCE`` of the reference's largest magnitude (at least 1)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    scale = max(1.0, float(np.abs(want).max()))
    worst = float(np.abs(got.astype(np.float64) - want).max())
    assert worst <= TOLERANCE * scale, f"{what}: off by {worst:.3g} (largest |value| {scale:.3g})"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_matches_onnxruntime_and_torch_after_optimize(name: str) -> None:
    spec = ZOO[name]
    module = spec.build(quick=True)
    model = export(module, spec.feeds(spec.quick_batch, quick=True))
    flow = load(flow_bytes(model, optimized=True))
    session = ort_session(model.SerializeToString())
    for batch in sorted({1, spec.quick_batch}):
        feeds = spec.feeds(batch, quick=True, seed=batch)
        got = flow.run(feeds)["output"]
        _assert_close(got, session.run(["output"], feeds)[0], f"{name} at batch {batch} against onnxruntime")
        _assert_close(got, torch_outputs(module, feeds), f"{name} at batch {batch} against PyTorch")


def test_zoo_inputs_are_at_the_batch_users_run() -> None:
    # the batches: 1 for 224x224 vision, 4-8 for text, 16-32 for small nets
    batches = {name: spec.batch for name, spec in ZOO.items()}
    assert batches["resnet18"] == batches["mobilenet_v2"] == batches["efficientnet_b0"] == batches["vit"] == 1
    assert 4 <= batches["bert"] <= 8 and 4 <= batches["lstm_tagger"] <= 8
    assert 16 <= batches["mlp"] <= 32 and 16 <= batches["lenet_bn"] <= 32
    feeds = ZOO["bert"].feeds(4)
    assert feeds["attention_mask"].shape == (4, 64) and not feeds["attention_mask"].all(), "BERT batch has no padding"


@pytest.mark.slow
def test_encoder_exported_before_opset_17_gets_one_node_per_layer_norm_and_gelu() -> None:
    # opset 16 has no LayerNormalization: PyTorch writes each nn.LayerNorm as nine nodes
    from exporter.onnx_import import import_onnx
    from exporter.passes import optimize

    spec = ZOO["vit"]
    module = spec.build(quick=True)
    feeds = spec.feeds(spec.quick_batch, quick=True)
    model = export(module, feeds, opset=16)
    assert not any(n.op_type == "LayerNormalization" for n in model.graph.node)
    optimized, report = optimize(import_onnx(model))
    depth = len(module.encoder.layers)
    assert report.ops_after["LayerNormalization"] == 2 * depth + 1 and report.ops_after["Gelu"] == depth
    assert not report.ops_after["Erf"] and not report.ops_after["ReduceMean"]
    got = load(flow_bytes(model, optimized=True)).run(feeds)["output"]
    _assert_close(got, ort_session(model.SerializeToString()).run(["output"], feeds)[0], "vit at opset 16")


@pytest.mark.slow
def test_dynamo_export_matches_onnxruntime_after_optimize() -> None:
    pytest.importorskip("onnxscript")  # the dynamo exporter's translator
    spec = ZOO["lenet_bn"]
    model, feeds = spec.export(quick=True, dynamo=True)
    name = model.graph.output[0].name
    got = load(flow_bytes(model, optimized=True)).run(feeds)[name]
    _assert_close(got, ort_session(model.SerializeToString()).run([name], feeds)[0], "lenet_bn by dynamo")


def test_a_model_the_exporter_refuses_is_a_row_with_its_error(monkeypatch) -> None:
    from benchmarks import edge_vs_onnxruntime
    from benchmarks.zoo import ZooModel

    def refuse(self, *args, **kwargs):
        raise RuntimeError("Failed to export the model with torch.export. \x1b[96mThis is step 1/3\x1b[0m\nmore")

    monkeypatch.setattr(ZooModel, "export", refuse)
    row = edge_vs_onnxruntime.bench_zoo_model("vit", quick=True, budget_s=0.01)
    assert row.error == "export failed: RuntimeError: Failed to export the model with torch.export. This is step 1/3"
    assert row.ratio is None
