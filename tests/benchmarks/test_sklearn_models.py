"""benchmarks.sklearn_models with small models: each exports, converts and matches onnxruntime
(bench_onnx checks before it times) at batch 1 and 1,000, and the table names every row."""

from __future__ import annotations

import pytest

pytest.importorskip("skl2onnx")
pytest.importorskip("onnxruntime")

from benchmarks import sklearn_models  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("name", ["random_forest", "svc_probability", "k_neighbors", "gradient_boosting_regressor"])
def test_model_converts_and_matches_onnxruntime(name: str) -> None:
    rows = sklearn_models.run_model(name, quick=True, budget_s=0.01)
    assert [row.name for row in rows] == [f"{name} b1", f"{name} b1000"]
    for row in rows:
        assert not row.error, row.error
        assert row.ratio is not None and row.name in sklearn_models.render([row])


def test_unknown_models_are_refused() -> None:
    with pytest.raises(SystemExit):
        sklearn_models.main(["--models", "xgboost"])
