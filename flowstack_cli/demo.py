"""``flowstack demo``: the main job, end to end on a bundled model.

Converts the bundled digits MLP from ONNX to .flow, runs the held-out digits through the edge
runtime, checks the answers against onnxruntime when it is installed, serves the model and
queries it over HTTP and gRPC, and prints accuracy, file sizes and latency.
"""

from __future__ import annotations

import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="convert and run the bundled digits model")
    p.add_argument("--workdir", type=Path, help="where to write model.flow (default: a temporary directory)")
    p.set_defaults(handler=run)


def run(args) -> int:
    from edge_runtime import load
    from exporter.onnx_import import convert_onnx

    data = resources.files("flowstack_cli") / "data"
    onnx_path = Path(str(data / "digits_mlp.onnx"))
    with np.load(str(data / "digits_test.npz"), allow_pickle=False) as test:
        images, labels = test["images"], test["labels"]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="flowstack-demo-"))
    flow_path = workdir / "digits" / "1" / "model.flow"

    report = convert_onnx(onnx_path, flow_path)
    (flow_path.parent.parent / "config.json").write_text('{"max_batch_size": 64, "max_queue_delay_us": 500}\n')
    print(f"[1/4] converted {onnx_path.name} ({onnx_path.stat().st_size:,} bytes) -> {flow_path} ({report.size:,} bytes); "
          f"{report.passes.nodes_before} -> {report.passes.nodes_after} ops, parity with the source graph checked")

    model = load(flow_path)
    probs = model.run({"image": images})["probs"]
    accuracy = float((probs.argmax(axis=1) == labels).mean())
    print(f"[2/4] edge runtime: {len(labels)} held-out digits, accuracy {accuracy:.2%}")

    single = images[:1]
    model.run({"image": single})
    times = []
    for _ in range(200):
        start = time.perf_counter()
        model.run({"image": single})
        times.append(time.perf_counter() - start)
    p50, p99 = np.percentile(np.array(times) * 1e6, [50, 99])
    line = f"[3/4] latency, batch 1: p50 {p50:.0f} us, p99 {p99:.0f} us"
    try:
        import onnxruntime as ort
    except ImportError:
        print(line + " (install onnxruntime to compare)")
        status = 0
    else:
        session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
        max_diff = float(np.abs(session.run(None, {"image": images})[0] - probs).max())
        print(line + f"; matches onnxruntime (max abs difference {max_diff:.1e})")
        status = 0 if max_diff < 1e-4 else 1

    try:
        from flowstack_cli.demo_serving import serve_and_query

        lines = serve_and_query(flow_path.parent.parent.parent, "digits", images, labels)
    except ImportError as exc:
        print(f"[4/4] serving skipped: {exc.name} is not installed (pip install '.[serve]')")
        return status
    print("[4/4] served on loopback and queried:")
    for text in lines:
        print("      " + text)
    return status
