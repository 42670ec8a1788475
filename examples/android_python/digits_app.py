"""Handwritten-digit classifier for a phone: the flowstack edge runtime with nothing but NumPy.

What an Android app does with the runtime, in the shape LiteRT apps have: load the model once
(``Interpreter`` with ``model_content``, so it also works from inside a zip bundle), allocate,
then per frame ``set_tensor`` / ``invoke`` / ``get_tensor``. Run as a script it classifies the
held-out digits shipped beside it and prints accuracy, latency percentiles and resident memory.

    python digits_app.py --model digits.flow --samples digits_test.npz   # from a checkout
    python flowstack_digits.pyz                                          # the bundle (bundle.py)

On Android through Chaquopy, Kotlin calls ``classify`` directly (see README.md).
Needs only numpy and flatbuffers besides the ``edge_runtime`` and ``schemas`` packages.
"""

from __future__ import annotations

import argparse
import io
import pkgutil
import resource
import sys
import time
from pathlib import Path

import numpy as np

import edge_runtime

# Names of the files bundle.py puts beside this module inside the zip.
BUNDLED_MODEL = "digits.flow"
BUNDLED_SAMPLES = "digits_test.npz"
IMAGE_PIXELS = 64


class DigitClassifier:
    """One loaded model and one interpreter: call ``classify`` once per image (not thread-safe)."""

    def __init__(self, model_content: bytes):
        self.interpreter = edge_runtime.Interpreter(model_content=model_content)
        self.interpreter.allocate_tensors()
        (self._input,) = self.interpreter.get_input_details()
        (self._output,) = self.interpreter.get_output_details()
        # one image as the model takes it: (1, 64) for the MLP, (1, 1, 8, 8) for the demo's CNN
        self.image_shape = (1, *(int(d) for d in self._input["shape"][1:]))
        if int(np.prod(self.image_shape)) != IMAGE_PIXELS:
            shape = [int(d) for d in self._input.get("shape_signature", self._input["shape"])]
            raise ValueError(f"model input {self._input['name']!r} takes images of shape {shape}, "
                             f"not the 8x8 digits ({IMAGE_PIXELS} values)")

    def classify(self, pixels) -> tuple[int, list[float]]:
        """(digit, class probabilities) for one 8x8 image given as 64 values in [0, 1], row by row."""
        image = np.asarray(pixels, dtype=np.float32).reshape(self.image_shape)
        self.interpreter.set_tensor(self._input["index"], image)
        self.interpreter.invoke()
        probs = self.interpreter.get_tensor(self._output["index"])[0]
        return int(np.argmax(probs)), probs.tolist()


_classifier: DigitClassifier | None = None


def classify(pixels, model_path: str | None = None) -> list:
    """Entry point for Kotlin/Java via Chaquopy: ``[digit, probabilities]`` for 64 pixel values.

    The model is loaded on the first call (from ``model_path``, else from the bundle) and kept.
    """
    global _classifier
    if _classifier is None:
        content = Path(model_path).read_bytes() if model_path else _bundled(BUNDLED_MODEL)
        _classifier = DigitClassifier(content)
    digit, probs = _classifier.classify(pixels)
    return [digit, probs]


def _bundled(name: str) -> bytes:
    data = pkgutil.get_data(__name__ if __name__ != "__main__" else "__main__", name)
    if data is None:
        raise FileNotFoundError(f"{name} is not bundled beside {__file__}; pass a path instead")
    return data


def _load_samples(path: str | None) -> tuple[np.ndarray, np.ndarray]:
    raw = Path(path).read_bytes() if path else _bundled(BUNDLED_SAMPLES)
    with np.load(io.BytesIO(raw), allow_pickle=False) as data:
        return data["images"].astype(np.float32), data["labels"].astype(np.int64)


def _peak_rss_mib() -> float:
    # ru_maxrss is KiB on Linux (Android included), bytes on macOS
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a .flow file (default: the one bundled beside this module)")
    parser.add_argument("--samples", help="an .npz with float images (N, 64) and int labels (N,)")
    parser.add_argument("--limit", type=int, default=0, help="classify only the first N samples")
    args = parser.parse_args(argv)

    content = Path(args.model).read_bytes() if args.model else _bundled(BUNDLED_MODEL)
    started = time.perf_counter()
    classifier = DigitClassifier(content)
    load_ms = (time.perf_counter() - started) * 1e3
    images, labels = _load_samples(args.samples)
    if args.limit:
        images, labels = images[: args.limit], labels[: args.limit]

    latencies, correct = [], 0
    for image, label in zip(images, labels):
        started = time.perf_counter()
        digit, _ = classifier.classify(image)
        latencies.append((time.perf_counter() - started) * 1e3)
        correct += digit == label
    p50, p90, p99 = np.percentile(latencies, [50, 90, 99])
    print(f"edge_runtime from {Path(edge_runtime.__file__).parent}")
    print(f"model {len(content):,} bytes, loaded in {load_ms:.1f} ms")
    print(f"accuracy {correct}/{len(labels)} = {correct / len(labels):.2%}")
    print(f"latency per image: p50 {p50:.3f} ms, p90 {p90:.3f} ms, p99 {p99:.3f} ms")
    print(f"peak resident memory {_peak_rss_mib():.1f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
