"""Post-training quantization on the edge runtime: size, agreement with float, load, memory, latency.

    flock /tmp/bench.lock python benchmarks/quantization.py --model digits
    flock /tmp/bench.lock python benchmarks/quantization.py --model resnet18 --inputs 1000
    flock /tmp/bench.lock python benchmarks/quantization.py --model bert
    flock /tmp/bench.lock python benchmarks/quantization.py --onnxruntime-quantized

Per model: the optimized float model and its float16, dynamic-int8 and int8 (calibrated on
samples kept apart from the evaluation inputs) quantizations; for each, the .flow file size,
top-1 agreement with the float model over ``--inputs`` inputs (BERT's output is a hidden state:
its "top-1" is the arg-max over the hidden units of each token, a strict proxy), load time and
resident memory with weights dequantized at load and per call (each measured in a fresh process:
the RSS growth over the load, then over the load and one run, whose freed buffers the runtime's
allocator keeps),
and latency against the float model timed in alternating blocks in one process (medians, and the
ratio of the fastest calls, which holds up better on a loaded machine).

``--onnxruntime-quantized``: the zoo's LeNet (batch 16) and MobileNetV2 (batch 1) quantized by
onnxruntime's own tool (quantize_dynamic; quantize_static in QDQ and QOperator formats),
converted by ``flowstack convert`` (which folds the quantization to float), timed against the
converted float model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import time_pair  # noqa: E402
from edge_runtime import load  # noqa: E402
from exporter import flow_writer  # noqa: E402
from exporter.accuracy import OutputAccuracy  # noqa: E402
from exporter.calibration import calibration_batches  # noqa: E402
from exporter.passes import optimize  # noqa: E402
from exporter.quantize import SCHEMES, quantize  # noqa: E402

MODES = ("at_load", "per_call")
EVAL_BATCH = 50
CALIBRATION_SAMPLES = 64


# ------------------------------------------------------------------------------------ the models
def digits_model(inputs: int):
    """The demo's digits CNN trained 2 epochs with flowstack; calibration on 64 training images,
    evaluation on the test images and then training images the calibration did not use."""
    from benchmarks.export_passes import trained_digits_cnn
    from flowstack_cli import digits

    _, optimized, _, _ = trained_digits_cnn()
    (xtr, _), (xte, _) = digits.load_digits()
    evaluation = np.concatenate([xte, xtr[CALIBRATION_SAMPLES:]])[:inputs]
    return optimized, {"image": xtr[:CALIBRATION_SAMPLES]}, [{"image": evaluation[i:i + EVAL_BATCH]}
                                                             for i in range(0, len(evaluation), EVAL_BATCH)], 1


def zoo_model(name: str, inputs: int):
    from benchmarks import zoo
    from exporter.onnx_import import import_onnx

    spec = zoo.ZOO[name]
    proto, _ = spec.export()
    optimized, _ = optimize(import_onnx(proto))
    batch = max(spec.batch, EVAL_BATCH // 10)
    calibration = spec.feeds(CALIBRATION_SAMPLES, seed=100)
    evaluation = [spec.feeds(batch, seed=1000 + i) for i in range(-(-inputs // batch))]
    return optimized, calibration, evaluation, spec.batch


MODELS = {
    "digits": digits_model,
    "resnet18": lambda inputs: zoo_model("resnet18", inputs),
    "bert": lambda inputs: zoo_model("bert", inputs),
}


# ------------------------------------------------------------------------------ the measurements
def probe(path: str, mode: str, feeds_path: str) -> dict:
    """In this (fresh) process: load ``path`` with ``mode``, run it once; load time and RSS."""
    feeds = dict(np.load(feeds_path, allow_pickle=False))
    before = _rss_mb()
    start = time.perf_counter()
    model = load(path, dequantize=mode)
    load_ms = (time.perf_counter() - start) * 1e3
    loaded = _rss_mb() - before
    model.run(feeds)
    return {"load_ms": load_ms, "rss_mb": loaded, "run_rss_mb": _rss_mb() - before}


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def probe_in_subprocess(path: Path, mode: str, feeds_path: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--probe", str(path), mode, str(feeds_path)],
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def agreement(float_model, quantized_model, evaluation) -> OutputAccuracy:
    result = OutputAccuracy("output")
    for feeds in evaluation:
        want = next(iter(float_model.run(feeds).values()))
        got = next(iter(quantized_model.run(feeds).values()))
        result.add(want, got)
    return result


def measure(name: str, inputs: int, seconds: float, schemes: list[str]) -> None:
    optimized, calibration, evaluation, batch = MODELS[name](inputs)
    batches = calibration_batches(optimized, calibration)
    count = sum(next(iter(f.values())).shape[0] for f in evaluation)
    timing_feeds = {k: v[:batch] for k, v in evaluation[0].items()}
    print(f"{name}: {count} evaluation inputs, calibration {CALIBRATION_SAMPLES} samples, latency at batch {batch}; "
          f"load average {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        feeds_path = root / "feeds.npz"
        np.savez(feeds_path, **timing_feeds)
        paths = {"float": root / "float.flow"}
        flow_writer.write(optimized, paths["float"])
        for scheme in schemes:
            paths[scheme] = root / f"{scheme}.flow"
            flow_writer.write(quantize(optimized, scheme, batches)[0], paths[scheme])
        float_model = load(paths["float"])
        float_size = paths["float"].stat().st_size
        print(f"{'scheme':<13}{'size':>12}{'smaller':>8}{'top-1':>9}{'rel RMS':>9}  "
              f"{'mode':<9}{'load ms':>9}{'RSS MB':>8}{'+run':>6}{'float ms':>10}{'ms':>9}{'ratio':>7}{'min ratio':>10}")
        for scheme, path in paths.items():
            size = path.stat().st_size
            quality = "" if scheme == "float" else _quality(agreement(float_model, load(path), evaluation))
            for mode in MODES if scheme != "float" else MODES[:1]:
                probed = probe_in_subprocess(path, mode, feeds_path)
                model = load(path, dequantize=mode)
                theirs, ours = time_pair(lambda: float_model.run(timing_feeds), lambda: model.run(timing_feeds),
                                         warmup=2, min_count=5, max_count=10**6, budget_s=seconds)
                print(f"{scheme:<13}{size:>12,}{float_size / size:>7.2f}x{quality}  {mode:<9}{probed['load_ms']:>9.1f}"
                      f"{probed['rss_mb']:>8.1f}{probed['run_rss_mb']:>6.0f}{theirs.median_ms:>10.3f}{ours.median_ms:>9.3f}"
                      f"{ours.median_ms / theirs.median_ms:>6.2f}x{ours.min_ms / theirs.min_ms:>9.2f}x")
                quality = " " * len(quality)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


def _quality(result: OutputAccuracy) -> str:
    return f"{result.top1_agreement:>8.2%} {result.relative_rms:>8.4f}"


# ------------------------------------------------------------- onnxruntime's quantization, folded
def onnxruntime_quantized(seconds: float) -> None:
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

    from benchmarks import zoo
    from exporter.onnx_import import convert_onnx

    class Reader(CalibrationDataReader):
        def __init__(self, samples):
            self.samples = iter(samples)

        def get_next(self):
            return next(self.samples, None)

    print(f"onnxruntime-quantized models converted (folded to float), load average {os.getloadavg()[0]:.1f}")
    print(f"{'model':<10}{'format':<10}{'size':>11}{'float ms':>10}{'ms':>9}{'ratio':>7}{'min ratio':>10}  "
          f"ops float -> quantized")
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        for name in ("lenet_bn", "mobilenet_v2"):
            spec = zoo.ZOO[name]
            proto, feeds = spec.export()
            source = root / f"{name}.onnx"
            onnx.save(proto, source)
            samples = [spec.feeds(1, seed=200 + i) for i in range(8)]
            variants = {
                "dynamic": lambda s, d: quantize_dynamic(s, d),
                "QDQ": lambda s, d: quantize_static(s, d, Reader(samples), quant_format=QuantFormat.QDQ),
                "QOperator": lambda s, d: quantize_static(s, d, Reader(samples), quant_format=QuantFormat.QOperator),
            }
            convert_onnx(source, root / f"{name}.flow", samples=feeds)
            float_model = load(root / f"{name}.flow")
            for variant, make in variants.items():
                quantized_onnx = root / f"{name}-{variant}.onnx"
                make(str(source), str(quantized_onnx))
                convert_onnx(quantized_onnx, root / f"{name}-{variant}.flow", samples=feeds)
                model = load(root / f"{name}-{variant}.flow")
                theirs, ours = time_pair(lambda: float_model.run(feeds), lambda: model.run(feeds), warmup=2,
                                         min_count=5, max_count=10**6, budget_s=seconds)
                ops = (sum(len(g.operators) for g in float_model.definition.subgraphs),
                       sum(len(g.operators) for g in model.definition.subgraphs))
                print(f"{name:<10}{variant:<10}{quantized_onnx.stat().st_size:>11,}{theirs.median_ms:>10.3f}"
                      f"{ours.median_ms:>9.3f}{ours.median_ms / theirs.median_ms:>6.2f}x"
                      f"{ours.min_ms / theirs.min_ms:>9.2f}x  {ops[0]} -> {ops[1]}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="digits")
    parser.add_argument("--inputs", type=int, default=1000, help="evaluation inputs for the top-1 agreement")
    parser.add_argument("--seconds", type=float, default=1.5, help="timing budget per pair")
    parser.add_argument("--schemes", default=",".join(SCHEMES),
                        help="comma-separated schemes to measure (a run per scheme keeps big models' runs short)")
    parser.add_argument("--onnxruntime-quantized", action="store_true", help="time onnxruntime-quantized models")
    parser.add_argument("--probe", nargs=3, metavar=("FILE", "MODE", "FEEDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(*args.probe)))
    elif args.onnxruntime_quantized:
        onnxruntime_quantized(args.seconds)
    else:
        measure(args.model, args.inputs, args.seconds, args.schemes.split(","))


if __name__ == "__main__":
    main()
