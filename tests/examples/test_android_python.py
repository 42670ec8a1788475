"""The phone example: bundle the app, runtime and model into a zip and run it with numpy and flatbuffers only."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "android_python"))

pytest.importorskip("onnx")

import bundle

from tests.import_guard import edge_only_imports

# The process that runs the bundle fails any third-party import but numpy and flatbuffers (and the
# bundle's own packages), as a phone would.
BLOCKER = edge_only_imports(who="the phone bundle") + textwrap.dedent(
    """
    import runpy
    sys.argv = [sys.argv[1]] + sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
    """
)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return bundle.build(tmp_path_factory.mktemp("phone") / "flowstack_digits.pyz")


def run_bundle(path: Path, *args: str) -> subprocess.CompletedProcess:
    # cwd away from the checkout: the bundle is first on sys.path, and the first test checks
    # that edge_runtime really came from it
    return subprocess.run([sys.executable, "-c", BLOCKER, str(path), *args], check=False, capture_output=True, text=True,
                          timeout=120, cwd=path.parent)


def test_bundle_runs_from_the_zip_with_only_numpy_and_flatbuffers(built: Path) -> None:
    result = run_bundle(built)
    assert result.returncode == 0, result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["edge_runtime"].startswith(f"from {built}"), result.stdout
    correct, total = lines["accuracy"].split(" = ")[0].split("/")
    assert int(total) == 450 and int(correct) / int(total) > 0.95, result.stdout


def test_the_blocker_blocks(tmp_path: Path) -> None:
    script = tmp_path / "needs_onnx.py"
    script.write_text("import onnx\n")
    result = run_bundle(script)
    assert result.returncode != 0 and "must not need onnx" in result.stderr


def test_bundle_predictions_match_the_runtime_on_the_source_model(built: Path, tmp_path: Path) -> None:
    """The Chaquopy entry point gives the same digits as the runtime loading the same .flow directly."""
    import zipfile

    import digits_app

    from edge_runtime import load

    with zipfile.ZipFile(built) as archive:
        flow = archive.read(digits_app.BUNDLED_MODEL)
        with np.load(archive.open(digits_app.BUNDLED_SAMPLES)) as data:
            images, labels = data["images"][:50], data["labels"][:50]
    model_path = tmp_path / "digits.flow"
    model_path.write_bytes(flow)
    expected = load(model_path).run({"image": images})["probs"]
    for image, want in zip(images, expected):
        digit, probs = digits_app.classify(image.tolist(), str(model_path))
        assert digit == int(np.argmax(want))
        np.testing.assert_allclose(probs, want, rtol=1e-5, atol=1e-7)
    assert (np.argmax(expected, axis=1) == labels).mean() > 0.9


def test_bundle_refuses_a_corrupt_model_with_a_clear_error(built: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.flow"
    corrupt.write_bytes(b"\x00" * 64)
    result = run_bundle(built, "--model", str(corrupt))
    assert result.returncode != 0
    assert "ModelFormatError" in result.stderr, result.stderr


def _image_model(tmp_path: Path, image_shape: list[int]) -> Path:
    """A .flow whose input takes images of ``image_shape`` (batch first): Flatten, MatMul, Softmax."""
    from exporter import flow_writer, ir
    from schemas import dtypes

    pixels = int(np.prod(image_shape[1:]))
    weights = np.random.default_rng(0).standard_normal((pixels, 10)).astype(np.float32)
    nodes = [ir.Node("Flatten", ["image"], ["flat"], {"axis": 1}), ir.Node("MatMul", ["flat", "w"], ["logits"]),
             ir.Node("Softmax", ["logits"], ["probs"], {"axis": -1})]
    graph = ir.Graph("digits", nodes, ["image"], ["probs"])
    graph.values["image"] = ir.Value("image", dtypes.FLOAT, tuple(image_shape))
    graph.values["w"] = ir.Value("w", data=weights)
    path = tmp_path / "model.flow"
    path.write_bytes(flow_writer.to_bytes(ir.Model(graph, opset_imports={"": 21})))
    return path


def test_a_model_taking_8x8_planes_classifies_flat_pixels(tmp_path: Path) -> None:
    """The demo's CNN takes (batch, 1, 8, 8): the app hands it each 64-pixel image in that shape."""
    import digits_app

    from edge_runtime import load

    path = _image_model(tmp_path, [-1, 1, 8, 8])
    image = np.random.default_rng(1).random(64).astype(np.float32)
    digit, probs = digits_app.DigitClassifier(path.read_bytes()).classify(image.tolist())
    want = load(path).run({"image": image.reshape(1, 1, 8, 8)})["probs"][0]
    assert digit == int(np.argmax(want))
    np.testing.assert_allclose(probs, want, rtol=1e-6)


def test_a_model_not_taking_8x8_digits_is_refused_by_name(tmp_path: Path) -> None:
    import digits_app

    path = _image_model(tmp_path, [-1, 28, 28])
    with pytest.raises(ValueError, match=r"'image' takes images of shape \[-1, 28, 28\]"):
        digits_app.DigitClassifier(path.read_bytes())
