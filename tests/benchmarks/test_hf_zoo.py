"""``benchmarks.hf_zoo`` end to end on tiny configs: export, convert, check against onnxruntime, time.

torch and transformers are benchmark peers, never package dependencies: the module is skipped
where either is missing.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="benchmarks.hf_zoo exports with torch.onnx.export")
pytest.importorskip("transformers", reason="benchmarks.hf_zoo builds transformers models")
pytest.importorskip("onnxruntime", reason="benchmarks.hf_zoo checks against onnxruntime")

from benchmarks import hf_zoo  # noqa: E402

# a conv net, an encoder with a padding mask, a decoder-only model with grouped-query attention and RoPE
SMOKE_MODELS = ["resnet50", "distilbert", "llama_gqa"]


@pytest.mark.slow
def test_quick_run_converts_matches_and_times_each_model(tmp_path, capsys) -> None:
    code = hf_zoo.main(["--quick", "--models", ",".join(SMOKE_MODELS), "--budget", "0.05", "--cache", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in out.splitlines() if line.startswith("| ")}
    for name in SMOKE_MODELS:
        assert rows[name][2] == "ok", rows[name]
        assert float(rows[name][4]) <= hf_zoo.TOLERANCE  # max diff against onnxruntime
        assert float(rows[name][7]) > 0 and float(rows[name][8].rstrip(" |")) > 0  # ours/ort, min
    assert f"within {hf_zoo.TOLERANCE:g} of onnxruntime {len(SMOKE_MODELS)}/{len(SMOKE_MODELS)}" in out
    assert "geometric mean ours/ort over 3 models" in out
    assert len(list(tmp_path.glob("*.onnx"))) == len(SMOKE_MODELS), "exports are cached"


@pytest.mark.slow
def test_second_run_loads_the_cached_export(tmp_path) -> None:
    spec = hf_zoo.HF_ZOO["distilbert"]
    first, feeds = hf_zoo.exported(spec, quick=True, cache=tmp_path)
    (cached,) = tmp_path.glob("*.onnx")
    assert cached.name.startswith("distilbert-quick-")
    again, again_feeds = hf_zoo.exported(spec, quick=True, cache=tmp_path)
    assert again.SerializeToString() == first.SerializeToString()
    assert list(again_feeds) == list(feeds) == ["input_ids", "attention_mask"]
    assert not feeds["attention_mask"].all(), "the text inputs carry padding"


def test_a_model_torch_cannot_export_is_a_row_with_the_first_line_of_its_error(tmp_path, monkeypatch) -> None:
    def refuse(module, feeds):
        raise RuntimeError("Exporting the operator 'aten::diff' to ONNX opset version 17 is not supported\ngraph(...)")

    monkeypatch.setattr(hf_zoo, "export", refuse)
    row = hf_zoo.bench(hf_zoo.HF_ZOO["distilbert"], quick=True, cache=tmp_path, budget_s=None)
    assert row.status == ("export failed: RuntimeError: Exporting the operator 'aten::diff' to ONNX opset "
                          "version 17 is not supported")
    assert row.ratio is None and row.max_diff is None
    assert "not ok: distilbert (export failed" in hf_zoo.summary([row])


def test_a_mismatch_beyond_the_tolerance_is_reported() -> None:
    import numpy as np

    want = np.array([[2.0, -4.0]], np.float32)
    assert hf_zoo.relative_max_diff(want + np.float32(4e-4), want) == pytest.approx(1e-4, rel=1e-3)
    row = hf_zoo.Row("m", max_diff=2e-4)
    assert not row.matches
    with pytest.raises(ValueError, match="output shape"):
        hf_zoo.relative_max_diff(want[:, :1], want)


def test_unknown_model_names_are_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        hf_zoo.main(["--models", "resnet50,nope"])
    assert "unknown model(s) ['nope']" in capsys.readouterr().err


@pytest.mark.slow
def test_dynamo_export_converts_and_matches(tmp_path) -> None:
    pytest.importorskip("onnxscript", reason="the dynamo exporter's translator")
    row = hf_zoo.bench(hf_zoo.HF_ZOO["resnet50"], quick=True, cache=tmp_path, budget_s=None, dynamo=True)
    assert row.status == "ok" and row.matches, row
    (cached,) = tmp_path.glob("*.onnx")
    assert cached.name.startswith("resnet50-quick-dynamo-")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama_decode", "gpt2_decode"])
def test_generation_step_with_a_kv_cache_converts_and_matches(name: str, tmp_path) -> None:
    """A causal LM's decode step: past keys/values in, the grown cache out, the past axis dynamic
    (checked at batch 1 and at CHECK_BATCH, whose rows cache 3 more tokens, one row left-padded)."""
    spec = hf_zoo.HF_ZOO[name]
    row = hf_zoo.bench(spec, quick=True, cache=tmp_path, budget_s=None)
    assert row.status == "ok" and row.matches, row
    model, feeds = hf_zoo.exported(spec, quick=True, cache=tmp_path)
    past = next(i for i in model.graph.input if i.name == "past.0.key")
    assert past.type.tensor_type.shape.dim[2].dim_param, "the past length is a dynamic axis"
    assert [o.name for o in model.graph.output][:3] == ["output", "present.0.key", "present.0.value"]
    assert feeds["attention_mask"].shape[1] == feeds["past.0.key"].shape[2] + 1
