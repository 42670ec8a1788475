"""The benchmark's models: valid ONNX, and our runtime agrees with onnxruntime on each.

Small configurations run always; the full-size 224x224 nets and the 6-layer transformer are
``slow``.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from benchmarks.edge_vs_onnxruntime import agree, flow_bytes, main, ort_session
from benchmarks.models import BENCHMARKS, MOBILENET_V2_BLOCKS, _divisible
from edge_runtime import load
from exporter.onnx_export import to_onnx
from exporter.onnx_import import import_onnx
from exporter.passes import optimize

SLOW_AT_FULL_SIZE = {"resnet18", "mobilenet_v2", "transformer"}

SIZES = [pytest.param(name, True, id=f"{name}-quick") for name in BENCHMARKS] + [
    pytest.param(name, False, id=f"{name}-full", marks=[pytest.mark.slow] if name in SLOW_AT_FULL_SIZE else [])
    for name in BENCHMARKS
]


@pytest.mark.parametrize("name, quick", SIZES)
def test_model_is_valid_onnx_and_matches_onnxruntime(name: str, quick: bool) -> None:
    spec = BENCHMARKS[name]
    model = spec.build(quick=quick)
    onnx.checker.check_model(model, full_check=True)
    feeds = spec.feeds(model, quick=quick)
    names = [o.name for o in model.graph.output]
    want = ort_session(model.SerializeToString()).run(names, feeds)
    for optimized in (False, True):  # BatchNormalization as its own node, then folded by the exporter
        got = load(flow_bytes(model, optimized)).run(feeds)
        agree(name, f"edge runtime ({'optimized' if optimized else 'plain import'})", [got[n] for n in names], want)


@pytest.mark.parametrize("name, quick", SIZES)
def test_onnx_round_trip_through_passes_matches_onnxruntime(name: str, quick: bool) -> None:
    """ONNX -> the optimized graph a .flow file holds -> ONNX again: onnx.checker accepts it and
    onnxruntime answers as on the original (ResNet-18's channels-last convolutions, at either size,
    written back as Transpose + planar op + Transpose)."""
    spec = BENCHMARKS[name]
    model = spec.build(quick=quick)
    feeds = spec.feeds(model, quick=quick)
    names = [o.name for o in model.graph.output]
    want = ort_session(model.SerializeToString()).run(names, feeds)
    optimized, report = optimize(import_onnx(model))
    exported = to_onnx(optimized)
    onnx.checker.check_model(exported, full_check=True)
    assert report.nodes_after <= report.nodes_before
    agree(name, "onnxruntime on the re-exported ONNX", ort_session(exported.SerializeToString()).run(names, feeds), want)


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_quick_model_matches_reference_evaluator(name: str) -> None:
    """onnxruntime and onnx's own evaluator agree, so the builders mean what they say."""
    spec = BENCHMARKS[name]
    model = spec.build(quick=True)
    feeds = spec.feeds(model, quick=True)
    agree(
        name,
        "ReferenceEvaluator",
        ReferenceEvaluator(model).run(None, feeds),
        ort_session(model.SerializeToString()).run(None, feeds),
    )


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_batch_dimension_is_dynamic(name: str) -> None:
    spec = BENCHMARKS[name]
    model = spec.build(quick=True)
    session = ort_session(model.SerializeToString())
    for batch in (1, 5):
        axis = 1 if name == "lstm" else 0  # the LSTM takes [seq, batch, input]
        feeds = {
            k: np.repeat(v.take([0], axis=axis), batch, axis=axis) for k, v in spec.feeds(model, quick=True).items()
        }
        (out,) = session.run(None, feeds)
        assert out.shape[axis] == batch


def test_builders_are_deterministic() -> None:
    first, second = BENCHMARKS["resnet18"].build(quick=True), BENCHMARKS["resnet18"].build(quick=True)
    assert first.SerializeToString() == second.SerializeToString()


def test_full_size_architectures() -> None:
    """Parameter counts of the published architectures (ResNet-18 11.69M, MobileNetV2 3.50M + BN)."""

    def parameters(name: str) -> int:
        return sum(int(np.prod(t.dims)) for t in BENCHMARKS[name].build().graph.initializer)

    assert parameters("resnet18") == 11_699_112  # torchvision's 11,689,512 plus BN statistics
    assert parameters("mobilenet_v2") == 3_539_054  # torchvision's 3,504,872 plus BN statistics and Clip bounds
    assert sum(n for _, _, n, _ in MOBILENET_V2_BLOCKS) == 17
    assert [_divisible(c * 0.35) for c in (32, 16, 24)] == [16, 8, 8]


def test_quick_cli_prints_table_and_geomean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--quick", "--models", "mlp", "--budget", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "| mlp | 4x784 |" in out
    assert "geometric mean ours/ort over 1 models" in out
