"""Suite-wide fixtures and the conformance tally printed at the end of every run."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

_conformance: Counter[str] = Counter()


def _gpu_unavailable() -> str | None:
    """Why tests marked ``gpu`` cannot run here, or None when CuPy finds a CUDA device."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CUDA reports no device"
    except Exception as exc:  # ImportError, or a CUDA driver error
        return f"CuPy finds no usable GPU ({type(exc).__name__}: {exc})"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    reason = _gpu_unavailable() if gpu_items else None
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "tests/conformance/test_onnx_backend.py" not in report.nodeid.replace("\\", "/"):
        return
    kind = "node" if "OnnxBackendNodeModelTest" in report.nodeid else "model"
    if report.nodeid.endswith("_cuda"):
        kind += " (cuda)"
    if report.when == "call":
        outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
        _conformance[(kind, outcome)] += 1
    elif report.when == "setup" and report.skipped:
        _conformance[(kind, "skipped")] += 1


def pytest_terminal_summary(terminalreporter) -> None:
    if not _conformance:
        return
    terminalreporter.section("ONNX backend conformance")
    for kind in ("node", "model", "node (cuda)", "model (cuda)"):
        counts = {o: _conformance[(kind, o)] for o in ("passed", "failed", "xfailed", "skipped")}
        total = sum(counts.values())
        if total:
            terminalreporter.write_line(
                f"{kind} cases: {counts['passed']} passed of {total} "
                f"({counts['xfailed']} expected failures, {counts['failed']} failed, {counts['skipped']} skipped)"
            )
