"""The memory one run frees is kept for the next (glibc): repeated runs of a model with multi-MB
intermediates touch no new pages, and the tuning can be turned off or left to the user."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.edge_vs_onnxruntime import flow_bytes
from benchmarks.models import mobilenet_v2

ROOT = Path(__file__).resolve().parents[2]

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the tuning applies to glibc's malloc only")


@pytest.fixture(scope="module")
def mobilenet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small MobileNetV2 (128x128, width 0.5): its runs allocate and free arrays of many sizes
    up to ~1.5 MB."""
    path = tmp_path_factory.mktemp("alloc") / "mobilenet.flow"
    path.write_bytes(flow_bytes(mobilenet_v2(image=128, width_mult=0.5)))
    return path


def _run(model: Path, env: dict[str, str]) -> tuple[str, float]:
    """(what keep_freed_memory did, minor page faults per run after warm-up) in a fresh process."""
    script = textwrap.dedent(
        f"""
        import resource, sys
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np, edge_runtime
        from edge_runtime.allocator import keep_freed_memory
        model = edge_runtime.load({str(model)!r})
        feeds = {{model.inputs[0].name: np.ones((1, 3, 128, 128), np.float32)}}
        for _ in range(3):
            want = model.run(feeds)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(10):
            got = model.run(feeds)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        for name, value in want.items():
            np.testing.assert_array_equal(got[name], value)
        print(keep_freed_memory() + "|" + str(faults / 10))
        """
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "FLOWSTACK_MALLOC"))}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                            env={**clean, **env})
    assert result.returncode == 0, result.stderr
    state, faults = result.stdout.strip().splitlines()[-1].split("|")
    return state, float(faults)


@glibc_only
def test_repeated_runs_fault_in_no_new_pages(mobilenet: Path) -> None:
    state, faults = _run(mobilenet, {})
    assert state == "tuned"
    assert faults < 20, f"{faults} minor page faults a run"


@glibc_only
def test_tuning_can_be_turned_off(mobilenet: Path) -> None:
    state, _ = _run(mobilenet, {"FLOWSTACK_MALLOC_TUNING": "0"})
    assert state == "disabled"


@glibc_only
def test_users_own_glibc_settings_are_kept(mobilenet: Path) -> None:
    state, _ = _run(mobilenet, {"MALLOC_TRIM_THRESHOLD_": "1048576"})
    assert state == "user settings"
