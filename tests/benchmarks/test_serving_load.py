"""The serving benchmark runs end to end: three real servers on loopback, both protocols, a table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_serving_load_prints_a_row_per_protocol_without_errors() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/serving_load.py", "--duration", "0.3", "--warmup", "0.1", "--concurrency", "2",
         "--hidden", "16"],
        cwd=ROOT, capture_output=True, text=True, timeout=110,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "(a) max_batch_size 32" in result.stdout
    for protocol in ("http", "grpc"):
        row = re.search(rf"^{protocol}\s+2 \|\s+(\d+)\s.*\|\s+(\d+)\s.*\|\s+(\d+)\s.*\|(.*)$", result.stdout, re.MULTILINE)
        assert row is not None, result.stdout
        assert all(int(row.group(i)) > 0 for i in (1, 2, 3)), row.group(0)
        assert "errors" not in row.group(4), row.group(0)
