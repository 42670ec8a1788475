"""The flowstack command line, run as a user would."""

from __future__ import annotations

import platform
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from flowstack_cli.main import main

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = Path(str(resources.files("flowstack_cli") / "data" / "digits_mlp.onnx"))


@pytest.fixture(scope="module")
def flow_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "digits.flow"
    assert main(["convert", str(BUNDLED), "-o", str(path)]) == 0
    return path


def test_inspect_lists_inputs_outputs_and_ops(flow_file: Path, capsys) -> None:
    assert main(["inspect", str(flow_file)]) == 0
    out = capsys.readouterr().out
    assert "image: FP32 [?, 64]" in out and "probs: FP32 [?, 10]" in out
    assert "Gemm" in out and "weights: 4 tensors" in out


def test_run_reads_npy_and_writes_outputs(flow_file: Path, tmp_path: Path, capsys) -> None:
    x = np.zeros((2, 64), np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(flow_file), "--input", f"image={tmp_path / 'x.npy'}", "--output-dir", str(tmp_path / "out")]) == 0
    probs = np.load(tmp_path / "out" / "probs.npy")
    assert probs.shape == (2, 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


def test_run_with_wrong_input_shape_is_a_clear_error(flow_file: Path, tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "bad.npy", np.zeros((2, 63), np.float32))
    assert main(["run", str(flow_file), "--input", f"image={tmp_path / 'bad.npy'}"]) == 2
    assert "input 'image': dimension 1 must be 64, got 63" in capsys.readouterr().err


def test_convert_prints_its_parity_result(tmp_path: Path, capsys) -> None:
    assert main(["convert", str(BUNDLED), "-o", str(tmp_path / "m.flow")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"wrote {tmp_path / 'm.flow'} (")
    assert re.fullmatch(r"parity on \d+ sample\(s\) \(rtol=.*, atol=.*\): ok", out[1])
    assert re.fullmatch(r"  probs: max abs diff .*, max rel diff .*", out[2])


def test_inspect_on_an_onnx_file_points_at_convert(capsys) -> None:
    assert main(["inspect", str(BUNDLED)]) == 2
    assert f"is an ONNX model, not a .flow file: convert it first with `flowstack convert {BUNDLED}`" in capsys.readouterr().err


def test_convert_missing_file(tmp_path: Path, capsys) -> None:
    assert main(["convert", str(tmp_path / "absent.onnx")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_bench_side_by_side(flow_file: Path, capsys) -> None:
    assert main(["bench", str(flow_file), "--onnx", str(BUNDLED), "--seconds", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "flowstack" in out and "onnxruntime" in out and "ratio flowstack/onnxruntime" in out
    assert out.startswith("BLAS: ") and "kernels" in out.splitlines()[0]
    faults = re.search(r"memory: minor page faults a run (\d+\.\d) \(malloc thresholds: (\w[\w ]*)\)", out)
    assert faults, out
    if platform.libc_ver()[0] == "glibc":
        assert faults.group(2) == "tuned" and float(faults.group(1)) < 50, out


def test_bench_profile_lists_ops(flow_file: Path, capsys) -> None:
    assert main(["bench", str(flow_file), "--seconds", "0.1", "--profile", "2"]) == 0
    out = capsys.readouterr().out
    assert "op type" in out and "FusedGemm" in out and "slowest 2 nodes:" in out


def test_demo_runs_end_to_end(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "flowstack_cli", "demo", "--workdir", str(tmp_path)],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    accuracies = re.search(r"trainer (\d+\.\d+)%, edge runtime (\d+\.\d+)%", out)
    assert accuracies and accuracies.group(1) == accuracies.group(2) and float(accuracies.group(1)) > 90, out
    assert "onnxruntime matches the trainer" in out and "model.flow" in out and "latency" in out
    assert (tmp_path / "models" / "digits" / "1" / "model.flow").exists() and (tmp_path / "checkpoints" / "graph.npz").exists()
    assert "no version folder" not in out + result.stderr  # the repository holds models only


def test_convert_checks_parity_on_given_samples(tmp_path: Path, capsys) -> None:
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random((8, 64), dtype=np.float32))
    out = tmp_path / "digits.flow"
    assert main(["convert", str(BUNDLED), "-o", str(out), "--sample", f"image={tmp_path / 'x.npy'}", "--verbose"]) == 0
    assert "parity on 1 sample(s)" in capsys.readouterr().out
    assert main(["convert", str(BUNDLED), "-o", str(tmp_path / "refused.flow"), "--sample", f"pixels={tmp_path / 'x.npy'}"]) == 2
    err = capsys.readouterr().err
    assert "pixels" in err and "image" in err, err
    assert not (tmp_path / "refused.flow").exists()
