"""benchmarks.user_models at small inputs: each architecture exports, converts and matches
onnxruntime (bench_onnx checks before it times), and the table names every model."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")

from benchmarks import user_models  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("name", list(user_models.USER_MODELS))
def test_model_converts_and_matches_onnxruntime(name: str) -> None:
    row = user_models.run_model(name, quick=True, budget_s=0.01)
    assert not row.error, row.error
    assert row.ratio is not None and name in user_models.render([row])


def test_unknown_models_are_refused() -> None:
    with pytest.raises(SystemExit):
        user_models.main(["--models", "alexnet"])
