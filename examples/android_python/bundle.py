"""Pack the digits app, the edge runtime and a model into one zip that a phone's Python runs.

    python examples/android_python/bundle.py -o flowstack_digits.pyz
    adb push flowstack_digits.pyz /sdcard/Download/      # then, in Termux: python flowstack_digits.pyz

The bundle holds only pure-Python sources (``edge_runtime``, ``schemas`` without the serving
protocol stubs, the app as ``__main__``), the model converted to .flow and the held-out digits;
NumPy and flatbuffers come from the phone's own packages. Converting needs the ``onnx`` extra on
this machine, never on the phone.
"""

from __future__ import annotations

import argparse
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = Path(__file__).resolve().parent / "digits_app.py"
DEFAULT_ONNX = ROOT / "flowstack_cli" / "data" / "digits_mlp.onnx"
DEFAULT_SAMPLES = ROOT / "flowstack_cli" / "data" / "digits_test.npz"
PACKAGES = ("edge_runtime", "schemas")
EXCLUDED = ("schemas/proto",)  # gRPC stubs: the server's, and they need protobuf


def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if not relative.startswith(EXCLUDED):
                yield relative, path


def build(output: Path, model: Path | None = None, onnx_model: Path = DEFAULT_ONNX, samples: Path = DEFAULT_SAMPLES) -> Path:
    """Write the bundle; ``model`` is a .flow file, else ``onnx_model`` is converted to one."""
    if model is None:
        from exporter.onnx_import import convert_onnx

        with tempfile.TemporaryDirectory() as scratch:
            model = Path(scratch) / "digits.flow"
            convert_onnx(onnx_model, model)
            flow = model.read_bytes()
    else:
        flow = model.read_bytes()
    output.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as bundle:
        bundle.write(APP, "__main__.py")
        for name, path in _sources():
            bundle.write(path, name)
        # Stored, not deflated: the runtime reads the model bytes straight out of the archive.
        bundle.writestr(zipfile.ZipInfo("digits.flow"), flow, compress_type=zipfile.ZIP_STORED)
        bundle.write(samples, "digits_test.npz")
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=Path("flowstack_digits.pyz"))
    parser.add_argument("--model", type=Path, help="a .flow file to bundle (default: convert the bundled digits MLP)")
    args = parser.parse_args(argv)
    path = build(args.output, args.model)
    print(f"wrote {path} ({path.stat().st_size:,} bytes): run it with `python {path.name}`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
