"""The ONNX backend test suite, shipped inside the onnx package, run through our backend adapter.

Node cases are rebuilt in memory from ``onnx.backend.test.case``; the ``real`` kind holds the
light models (ResNet-50, DenseNet-121, ...), whose expected outputs ship with onnx too.
Expected failures live in expected_failures.txt, one test name per line with its reason; an
expected failure that starts passing fails the run, so the list can only shrink. Cases that pass
on the CPU and differ on CUDA (CuPy's own arithmetic) are listed, with why, in
expected_cuda_differences.txt; they fail only their ``_cuda`` variant. Cases whose expected values
are unseeded random draws, which any result matches only by chance, are skipped with their reason
(random_cases.txt).
"""

from __future__ import annotations

import os
import re
import tempfile
import unittest
from pathlib import Path

import onnx.backend.test

from exporter.onnx_backend import FlowBackend

# The light-model runner caches generated inputs under ONNX_HOME; keep that out of the user's home.
os.environ.setdefault("ONNX_HOME", tempfile.mkdtemp(prefix="flowstack-onnx-home-"))

EXPECTED_FAILURES = Path(__file__).with_name("expected_failures.txt")
EXPECTED_CUDA_DIFFERENCES = Path(__file__).with_name("expected_cuda_differences.txt")
RANDOM_CASES = Path(__file__).with_name("random_cases.txt")


def expected_failures(path: Path = EXPECTED_FAILURES) -> list[tuple[str, str]]:
    entries = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition("#")
        if not reason.strip():
            raise ValueError(f"{path.name}: {name.strip()!r} needs a reason after '#'")
        entries.append((name.strip(), reason.strip()))
    return entries


backend_test = onnx.backend.test.BackendTest(FlowBackend, __name__)
for _name, _reason in expected_failures():
    backend_test.xfail(rf"^{re.escape(_name)}_(cpu|cuda)$")
for _name, _reason in expected_failures(EXPECTED_CUDA_DIFFERENCES):
    backend_test.xfail(rf"^{re.escape(_name)}_cuda$")


def skip_random_cases(test_cases: dict[str, type[unittest.TestCase]]) -> dict[str, type[unittest.TestCase]]:
    """``test_cases`` with each case of random_cases.txt skipped, its reason given."""
    for name, reason in expected_failures(RANDOM_CASES):
        for case in test_cases.values():
            for test in (f"{name}_cpu", f"{name}_cuda"):
                if hasattr(case, test):
                    setattr(case, test, unittest.skip(reason)(getattr(case, test)))
    return test_cases


# CUDA variants run only where CuPy finds a device (FlowBackend.supports_device says so).
globals().update(skip_random_cases(backend_test.test_cases))
