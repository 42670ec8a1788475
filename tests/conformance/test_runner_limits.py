"""Cases expected_failures.txt lists because the onnx runner cannot compare them, not because we
compute them wrong: each is run here through our backend and compared directly, so the listed
reason stays true (a case that fails here has a real bug, whatever the runner says)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from onnx.backend.test.loader import load_model_tests

from exporter.onnx_backend import FlowBackend
from tests.conformance.test_onnx_backend import expected_failures

RUNNER_LIMITS = sorted(name for name, reason in expected_failures() if reason.startswith("the onnx runner cannot"))
pytestmark = pytest.mark.slow  # onnx generates all of its node cases to hand out one (11 s)


@lru_cache(maxsize=1)
def _cases() -> dict:
    return {case.name: case for case in load_model_tests(kind="node") if case.name in RUNNER_LIMITS}


def _assert_same(got, want) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _assert_same(g, w)
        return
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("name", RUNNER_LIMITS)
def test_listed_for_the_runner_but_computed_right(name: str) -> None:
    case = _cases()[name]
    for inputs, outputs in case.data_sets:
        got = FlowBackend.prepare(case.model).run(inputs)
        assert len(got) == len(outputs)
        for g, w in zip(got, outputs):
            _assert_same(g, w)


def test_the_runner_limits_are_listed() -> None:
    assert RUNNER_LIMITS == ["test_loop16_seq_none"]
