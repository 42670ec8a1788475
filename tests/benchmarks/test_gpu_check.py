"""The device check (scripts/gpu_check.sh, gpu_summary.py, benchmarks/gpu.py, serving_load.py
--device) in its CPU form: what CI can prove before a GPU run, so the one device call works."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("gpu_summary", ROOT / "scripts" / "gpu_summary.py")
gpu_summary = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gpu_summary)

CUDA_LOG = """\
..F.F
FAILED tests/conformance/test_onnx_backend.py::OnnxBackendNodeModelTest::test_conv_cuda - edge_runtime.plan.ExecutionError: subgraph 0, node 3 'c' (Conv): TypeError: bad
FAILED tests/conformance/test_onnx_backend.py::OnnxBackendNodeModelTest::test_pool_cuda - edge_runtime.plan.ExecutionError: subgraph 0, node 7 'p' (Conv): TypeError: bad
FAILED tests/conformance/test_onnx_backend.py::OnnxBackendNodeModelTest::test_both_cuda - AssertionError: 1.5 != 2
3 failed, 10 passed, 2 xfailed in 3.20s
"""
CPU_LOG = """\
FAILED tests/conformance/test_onnx_backend.py::OnnxBackendNodeModelTest::test_both_cpu - AssertionError: 1.5 != 2
1 failed, 12 passed, 2 xfailed in 2.00s
"""


def test_summary_lists_cuda_only_failures_by_reason_and_judges_targets(tmp_path, capsys) -> None:
    (tmp_path / "conformance_cuda.log").write_text(CUDA_LOG)
    (tmp_path / "conformance_cpu.log").write_text(CPU_LOG)
    (tmp_path / "pytest_gpu.log").write_text("FAILED tests/x.py::test_a - ValueError: no\n1 failed, 3 passed in 1.0s\n")
    (tmp_path / "steps.tsv").write_text("pytest\t1\t12\tlog\nbench\t124\t120\tlog\n")
    rows = [{"case": "resnet18", "batch": 32, "ours_ms": 9.0, "peer_ms": 2.0, "ratio": 4.5},
            {"case": "encoder", "batch": 32, "ours_ms": 4.0, "peer_ms": 2.0, "ratio": 2.0},
            {"case": "train_cnn", "batch": 256, "ours_ms": 3.0, "peer_ms": 2.0, "ratio": 1.5}]
    (tmp_path / "bench_gpu.json").write_text(json.dumps({"card": "H100", "device": "gpu", "rows": rows}))
    cell = {"device": "gpu", "ours": {"rps": 1200.0, "p50": 40.0}, "cpu": {"rps": 60.0, "p50": 900.0}, "ratio": 20.0}
    (tmp_path / "serving_gpu.json").write_text(json.dumps({"64": cell}))
    assert gpu_summary.main([str(tmp_path), "--elapsed", "300"]) == 0
    printed = capsys.readouterr().out
    assert "conformance cuda: 3 failed, 10 passed, 2 xfailed" in printed
    assert "cases failing on cuda that pass on the CPU: 2" in printed
    assert "2 x edge_runtime.plan.ExecutionError: (Conv): TypeError: bad" in printed
    assert "test_both_cuda" not in printed.split("pass on the CPU")[1]
    assert "bench              rc     124  120s TIMED OUT" in printed
    assert "test_a: ValueError: no" in printed
    assert "ratio   4.50 MISSED (target <= 3)" in printed and "ratio   2.00 ok (target <= 3)" in printed
    assert "ratio   1.50 ok (target <= 2)" in printed
    assert "gpu/cpu 20.0x ok (target >= 10x)" in printed
    assert "test_pool_cuda | edge_runtime" in (tmp_path / "summary.txt").read_text()


def test_summary_of_an_empty_run_says_what_is_missing(tmp_path, capsys) -> None:
    assert gpu_summary.main([str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "pytest -m gpu: no result" in printed and "benchmarks: no result" in printed


def test_gpu_benchmark_rejects_unknown_cases() -> None:
    from benchmarks import gpu

    with pytest.raises(SystemExit):
        gpu.main(["--device", "cpu", "--cases", "resnet50"])


@pytest.mark.slow
def test_the_check_script_runs_its_cpu_form_and_prints_the_summary_last(tmp_path) -> None:
    pytest.importorskip("torch")
    env = {**os.environ, "OUT": str(tmp_path), "GPU_CHECK_STEPS": "pytest bench serving", "GPU_CHECK_BUDGET_S": "240"}
    run = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tail = run.stdout[run.stdout.index("gpu_check summary"):]
    assert "pytest -m gpu:" in tail and "skipped" in tail, tail
    assert "resnet18   b1" in tail and "encoder    b2" in tail and "train_cnn  b8" in tail, tail
    assert "serving resnet18 conc 4: cpu" in tail, tail
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert len(files) <= 8, files
    rows = json.loads((tmp_path / "bench_gpu.json").read_text())["rows"]
    assert all(row["max_abs_diff"] < 1e-3 for row in rows if "max_abs_diff" in row), rows
