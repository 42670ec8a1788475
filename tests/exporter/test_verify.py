"""Parity check: an optimized model passes; a broken one is refused naming the first diverging tensor."""

from __future__ import annotations

import numpy as np
import pytest

import edge_runtime.kernels.fused  # noqa: F401  (registers the fused kernels until the families list them)
import schemas.ops.fused  # noqa: F401
from exporter import ir
from exporter.passes import optimize
from exporter.passes.graph_edit import copy_model
from exporter.verify import ParityError, ParityReport, check_parity, compare_tensors, sample_inputs
from schemas import dtypes
from tests.exporter.test_passes import conv_bn, graph, if_model, model, randn


def two_layer() -> ir.Model:
    """x -> Conv+BN+Relu ("n" after folding is "y") -> Mul by k -> out."""
    m = conv_bn("Conv", "Relu")
    g = m.graph
    g.values["k"] = ir.Value("k", data=np.float32(2))
    g.nodes.append(ir.Node("Mul", ["y", "k"], ["out"], name="scale"))
    g.outputs = ["out"]
    return m


def test_optimized_model_passes_with_generated_samples() -> None:
    reference = two_layer()
    candidate, _ = optimize(reference)
    report = check_parity(reference, candidate)
    assert isinstance(report, ParityReport) and report.ok and report.samples == 1
    assert report.outputs["out"].max_rel < 1e-5
    assert "ok" in str(report)


def test_given_samples_are_used() -> None:
    reference = two_layer()
    candidate, _ = optimize(reference)
    samples = [{"x": randn(2, 3, 5, 5)}, {"x": randn(2, 3, 5, 5)}]
    assert check_parity(reference, candidate, samples=samples).samples == 2


def test_divergence_names_first_diverging_tensor() -> None:
    reference = two_layer()
    candidate, _ = optimize(reference)
    broken = copy_model(candidate)
    conv = broken.graph.nodes[0]
    broken.graph.values[conv.inputs[2]].data = broken.graph.values[conv.inputs[2]].data + 0.5
    with pytest.raises(ParityError, match=r"first diverging tensor 'y'; output 'out'") as info:
        check_parity(reference, broken)
    assert info.value.report.first_divergence == "y" and not info.value.report.ok


def test_tolerance_is_respected() -> None:
    reference = two_layer()
    nudged = copy_model(reference)
    nudged.graph.values["k"].data = np.float32(2 * (1 + 1e-6))
    check_parity(reference, nudged)  # within the default rtol
    with pytest.raises(ParityError):
        check_parity(reference, nudged, rtol=1e-8, atol=0)


def test_near_zero_element_is_judged_at_its_tensors_scale() -> None:
    # A folded batch norm rounds like its inputs' magnitude: an output that cancels to ~0 next to
    # outputs near 5 differs by float32 rounding of those terms, which is no divergence.
    reference = model(graph([ir.Node("Identity", ["x"], ["y"], name="i")], ["x"], ["y"], shapes={"x": (4,)}))
    nudged = copy_model(reference)
    nudged.graph.values["d"] = ir.Value("d", data=np.array([4e-5, 0, 0, 0], np.float32))
    nudged.graph.nodes = [ir.Node("Add", ["x", "d"], ["y"], name="add")]
    sample = {"x": np.array([0.1, 5.0, -5.0, 5.0], np.float32)}
    report = check_parity(reference, nudged, samples=sample)
    assert report.ok and report.outputs["y"].max_rel < 1e-4
    with pytest.raises(ParityError, match="first diverging tensor 'y'"):
        check_parity(reference, nudged, samples={"x": np.array([0.1, 0.1, -0.1, 0.1], np.float32)})


def test_candidate_that_does_not_run_is_refused() -> None:
    reference = two_layer()
    broken = copy_model(reference)
    broken.graph.nodes[0].op_type = "NoSuchOp"
    with pytest.raises(ParityError, match="candidate model does not load.*NoSuchOp"):
        check_parity(reference, broken)


def test_shape_mismatch_is_refused() -> None:
    reference = model(graph([ir.Node("Relu", ["x"], ["y"], name="r")], ["x"], ["y"], shapes={"x": (2, 3)}))
    candidate = copy_model(reference)
    candidate.graph.values["s"] = ir.Value("s", data=np.array([3, 2], np.int64))
    candidate.graph.nodes.append(ir.Node("Reshape", ["y0", "s"], ["y"], name="reshape"))
    candidate.graph.nodes[0].outputs = ["y0"]
    with pytest.raises(ParityError, match=r"tensor 'y': reference has shape \[2, 3\].*candidate shape \[3, 2\]"):
        check_parity(reference, candidate)


def test_samples_follow_signature_types() -> None:
    m = if_model()
    m.graph.values["n"] = ir.Value("n", dtypes.INT64, (-1, 2))
    m.graph.inputs.append("n")
    feeds = sample_inputs(m)
    assert feeds["x"].dtype == np.float32 and feeds["x"].shape == (3,)
    assert feeds["c"].dtype == np.bool_ and feeds["n"].dtype == np.int64 and feeds["n"].shape == (1, 2)
    reference = if_model()
    optimized, _ = optimize(reference)
    check_parity(reference, optimized, samples=[{"x": randn(3), "c": np.array(c)} for c in (True, False)])


def test_deep_folded_network_converts_with_default_tolerance() -> None:
    """MobileNetV2's 52 folded batch norms round differently from the unfolded graph (3e-5 of the
    logits' scale): the default tolerance accepts that, so `flowstack convert` needs no flag for it."""
    from benchmarks.models import mobilenet_v2
    from exporter.onnx_import import import_onnx

    reference = import_onnx(mobilenet_v2(image=64))
    candidate, _ = optimize(reference)
    report = check_parity(reference, candidate)
    assert report.ok and 0 < report.outputs["logits"].max_rel < 1e-4


def test_nans_in_the_same_places_agree_and_elsewhere_do_not() -> None:
    """A model whose output holds NaN for some inputs (a mean over an empty bag: an EmbeddingBag
    exported by PyTorch) converts when the candidate has the same NaNs; a NaN only one side has is
    a divergence."""
    want = np.array([[1.0, 2.0], [np.nan, np.nan], [3.0, np.inf]], np.float32)
    same = compare_tensors("out", want, want.copy(), 1e-4, 1e-6)
    assert same.within and same.max_abs == 0 and same.max_rel == 0
    moved = want.copy()
    moved[0, 0] = np.nan
    assert not compare_tensors("out", want, moved, 1e-4, 1e-6).within
    filled = np.nan_to_num(want, nan=0.0, posinf=np.inf)
    assert not compare_tensors("out", want, filled, 1e-4, 1e-6).within
