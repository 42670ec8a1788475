"""``flowstack export`` from a checkpoint directory alone, and ``flowstack inspect`` before/after."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import edge_runtime
from flowstack_cli import digits
from flowstack_cli.export import parse_tensors
from flowstack_cli.main import main


@pytest.fixture(scope="module")
def checkpoint_dir(tmp_path_factory) -> Path:
    (xtr, ytr), _ = digits.load_digits()
    graph, handles = digits.build_cnn()
    directory = tmp_path_factory.mktemp("ckpt")
    digits.train_cnn(graph, handles, (xtr[:320], ytr[:320]), str(directory), epochs=1, progress=False)
    return directory


def test_parse_tensors() -> None:
    assert parse_tensors(["image=images:0,labels", "fc1/out"]) == {"image": "images:0", "labels": "labels", "fc1_out": "fc1/out"}


def test_export_writes_flow_and_onnx(checkpoint_dir: Path, tmp_path: Path, capsys) -> None:
    out, onnx_path = tmp_path / "models" / "digits" / "1" / "model.flow", tmp_path / "digits.onnx"
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(str(i) for i in range(10)))
    assert main(["export", str(checkpoint_dir), "--inputs", "image=images", "--outputs", "probs=probabilities",
                 "-o", str(out), "--onnx", str(onnx_path), "--labels", str(labels), "--verbose"]) == 0
    text = capsys.readouterr().out
    assert "matches the trainer" in text and "fold_batch_norm: 2 change(s)" in text and "passes onnx.checker" in text
    model = edge_runtime.load(out)
    probs = model.run({"image": np.zeros((2, 1, 8, 8), np.float32)})["probs"]
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert model.definition.metadata["training_step"] == "5"
    ort = pytest.importorskip("onnxruntime")
    got = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"]).run(None, {"image": np.zeros((2, 1, 8, 8), np.float32)})[0]
    np.testing.assert_allclose(got, probs, rtol=1e-5, atol=1e-6)

    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "frozen graph:" in text and "-> optimized" in text


def test_inspect_compare(checkpoint_dir: Path, tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "frozen.flow", tmp_path / "optimized.flow"
    assert main(["export", str(checkpoint_dir), "--inputs", "image=images", "--outputs", "probs=probabilities", "-o", str(a), "--no-optimize"]) == 0
    assert main(["export", str(checkpoint_dir), "--inputs", "image=images", "--outputs", "probs=probabilities", "-o", str(b)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(b), "--compare", str(a)]) == 0
    text = capsys.readouterr().out
    assert "compared with" in text and "BatchNormalization" in text and "ChannelsLastConv" in text


@pytest.mark.parametrize("outputs, message", [
    ("loss=" + "SparseSoftmaxCrossEntropyWithLogits", "depends on placeholder 'labels'"),
    ("probs=nowhere", "no node named 'nowhere'"),
])
def test_bad_requests_are_refused_without_a_file(checkpoint_dir: Path, tmp_path: Path, capsys, outputs, message) -> None:
    out = tmp_path / "model.flow"
    assert main(["export", str(checkpoint_dir), "--inputs", "image=images", "--outputs", outputs, "-o", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_missing_shard_is_refused_naming_it(checkpoint_dir: Path, tmp_path: Path, capsys) -> None:
    copy = tmp_path / "ckpt"
    copy.mkdir()
    (copy / "graph.npz").write_bytes((checkpoint_dir / "graph.npz").read_bytes())
    (copy / "checkpoint").write_text(json.dumps({"model_checkpoint_path": str(copy / "model-5.ckpt")}))
    out = tmp_path / "model.flow"
    assert main(["export", str(copy), "--inputs", "images", "--outputs", "probabilities", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "model-5.ckpt" in err and "missing" in err and not out.exists()


def test_export_checks_parity_on_given_samples(checkpoint_dir: Path, tmp_path: Path, capsys) -> None:
    _, (xte, _) = digits.load_digits()
    np.save(tmp_path / "images.npy", xte[:16])
    out = tmp_path / "model.flow"
    assert main(["export", str(checkpoint_dir), "--inputs", "image=images", "--outputs", "probs=probabilities",
                 "-o", str(out), "--sample", f"image={tmp_path / 'images.npy'}"]) == 0
    assert "matches the trainer on 1 sample(s)" in capsys.readouterr().out

    np.save(tmp_path / "wrong.npy", xte[:4, :, :4])
    (tmp_path / "text.npy").write_text("not an array")
    for sample, message in [(f"image={tmp_path / 'wrong.npy'}", "shape (4, 1, 4, 8) for tensor 'images:0'"),
                            (f"image={tmp_path / 'text.npy'}", "text.npy is not a readable .npy file"),
                            (f"image={tmp_path / 'absent.npy'}", "absent.npy: no such file"),
                            ("image", "expected NAME=FILE.npy")]:
        target = tmp_path / "refused.flow"
        assert main(["export", str(checkpoint_dir), "--inputs", "image=images", "--outputs", "probs=probabilities",
                     "-o", str(target), "--sample", sample]) == 2
        err = capsys.readouterr().err
        assert message in err, err
        assert not target.exists()


def test_export_quantize_float16_reports_accuracy_drop(checkpoint_dir: Path, tmp_path: Path, capsys) -> None:
    plain, half = tmp_path / "plain.flow", tmp_path / "half.flow"
    common = [str(checkpoint_dir), "--inputs", "image=images", "--outputs", "probs=probabilities"]
    assert main(["export", *common, "-o", str(plain)]) == 0
    assert main(["export", *common, "-o", str(half), "--quantize", "float16"]) == 0
    text = capsys.readouterr().out
    assert re.search(r"quantized float16: \d+ weights, [\d,]+ -> [\d,]+ bytes \(2\.00x smaller\)", text)
    assert "float16 against the float model" in text
    assert 1.8 < plain.stat().st_size / half.stat().st_size <= 2.0
    image = {"image": np.random.default_rng(0).random((4, 1, 8, 8), np.float32)}
    np.testing.assert_allclose(edge_runtime.load(half).run(image)["probs"],
                               edge_runtime.load(plain).run(image)["probs"], atol=2e-3)
