"""The pipeline benchmark runs end to end: a real server, the ensemble and the two calls in turn."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_serving_pipeline_prints_a_row_without_errors() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/serving_pipeline.py", "--duration", "0.3", "--warmup", "0.1", "--concurrency", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    row = re.search(r"^\s+2 \|\s+(\d+)\s.*\|\s+(\d+)\s.*\|\s+([\d.]+)\s*$", result.stdout, re.MULTILINE)
    assert row is not None, result.stdout
    assert int(row.group(1)) > 0 and int(row.group(2)) > 0
