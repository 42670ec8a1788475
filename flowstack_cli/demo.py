"""``flowstack demo``: the main job, end to end, from nothing.

Trains the digits CNN (batch norm, dropout) with the flowstack trainer behind a progress bar,
checkpoints it, exports the checkpoint directory (freeze, check against the trainer, optimize,
check again, write ``<workdir>/models/digits/1/model.flow``), runs the exported model on the edge
runtime and prints the test accuracy from the trainer and from the edge runtime (they must
agree), file sizes and edge latency; writes the model as ONNX and runs it in onnxruntime when
both are installed; then serves the repository on loopback and queries it over HTTP and gRPC.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

IO = {"inputs": {"image": "images"}, "outputs": {"probs": "probabilities"}}
STEPS = 6


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", help="train, export, run and serve the digits CNN, end to end")
    p.add_argument("--workdir", type=Path, help="where checkpoints and the model repository go (default: a temporary directory)")
    p.add_argument("--epochs", type=int, default=10, help="training epochs (default 10)")
    p.set_defaults(handler=run)


def _step(i: int, text: str) -> None:
    print(f"[{i}/{STEPS}] {text}", flush=True)


def _size(path: Path) -> str:
    return f"{path.stat().st_size:,} bytes"


def run(args) -> int:
    from edge_runtime import load
    from exporter import check_trainer_parity, freeze, write_repository
    from exporter.freeze import trainer_outputs
    from flowstack_cli import digits
    from trainer.checkpoint_format import checkpoint_file

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="flowstack-demo-"))
    checkpoint_dir, repository = workdir / "checkpoints", workdir / "models"
    (xtr, ytr), (xte, yte) = digits.load_digits()

    start = time.perf_counter()
    graph, handles = digits.build_cnn()
    _, checkpoint = digits.train_cnn(graph, handles, (xtr, ytr), str(checkpoint_dir), epochs=args.epochs)
    _step(1, f"trained the digits CNN on {len(xtr)} images, {args.epochs} epochs in {time.perf_counter() - start:.1f}s; "
             f"checkpoint {checkpoint}")

    start = time.perf_counter()
    frozen = freeze(checkpoint_dir, **IO, labels=[str(d) for d in range(10)],
                    descriptions={"image": "8x8 grey digit, values in [0, 1]", "probs": "class probabilities, digits 0-9"})
    samples = {"image": xte[:64]}
    check_trainer_parity(frozen, checkpoint_dir, samples, **IO)
    (repository / "digits").mkdir(parents=True, exist_ok=True)
    report = write_repository(frozen, repository, "digits", 1, samples=samples,
                              config={"max_batch_size": 64, "max_queue_delay_us": 500})
    flow_path = report.path
    _step(2, f"exported {checkpoint_dir} -> {flow_path} in {time.perf_counter() - start:.1f}s: "
             f"{report.passes.nodes_before} -> {report.passes.nodes_after} ops "
             f"({', '.join(f'{k} {v}' for k, v in report.passes.changes.items() if v)}); "
             f"parity with the trainer and with the frozen graph checked")

    model = load(flow_path)
    edge_probs = model.run({"image": xte})["probs"]
    trainer_probs = trainer_outputs(checkpoint_dir, {"image": xte}, **IO)["probs"]
    edge_acc = float((edge_probs.argmax(1) == yte).mean())
    trainer_acc = float((trainer_probs.argmax(1) == yte).mean())
    agree = int((edge_probs.argmax(1) == trainer_probs.argmax(1)).sum())
    max_diff = float(np.abs(edge_probs - trainer_probs).max())
    _step(3, f"test accuracy on {len(yte)} held-out digits: trainer {trainer_acc:.2%}, edge runtime {edge_acc:.2%} "
             f"(same prediction for {agree}/{len(yte)}, max abs difference {max_diff:.1e})")

    shard = Path(checkpoint_file(checkpoint))  # train_cnn returns the checkpoint's prefix, as Saver.save does
    frozen_size = int(frozen.metadata["frozen_size"])
    latency = _latency(model, xte[:1])
    _step(4, f"sizes: checkpoint {_size(shard)} + graph {_size(checkpoint_dir / 'graph.npz')}; frozen graph "
             f"{frozen_size:,} bytes; model.flow {_size(flow_path)}. Edge latency, batch 1: {latency}")

    status = 0 if trainer_acc == edge_acc and agree == len(yte) else 1
    status |= _onnx_step(frozen, xte, trainer_probs, workdir)

    try:
        from flowstack_cli.demo_serving import serve_and_query
    except ImportError as exc:
        _step(6, f"serving skipped: {exc.name} is not installed (pip install '.[serve]')")
        return status
    try:
        lines = serve_and_query(repository, "digits", xte, yte)
    except ImportError as exc:
        _step(6, f"serving skipped: {exc.name} is not installed (pip install '.[serve]')")
        return status
    _step(6, "served the repository on loopback and queried it:")
    for text in lines:
        print("      " + text)
    return status


def _latency(model, x: np.ndarray, calls: int = 200) -> str:
    model.run({"image": x})
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        model.run({"image": x})
        times.append(time.perf_counter() - start)
    p50, p99 = np.percentile(np.array(times) * 1e6, [50, 99])
    return f"p50 {p50:.0f} us, p99 {p99:.0f} us"


def _onnx_step(frozen, images: np.ndarray, trainer_probs: np.ndarray, workdir: Path) -> int:
    try:
        import onnxruntime as ort

        from flowstack_cli.export import write_onnx
    except ImportError as exc:
        _step(5, f"ONNX skipped: {exc.name} is not installed (pip install onnx onnxruntime)")
        return 0
    path = workdir / "digits.onnx"
    size = write_onnx(frozen, path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    max_diff = float(np.abs(session.run(None, {"image": images})[0] - trainer_probs).max())
    _step(5, f"wrote {path} ({size:,} bytes, passes onnx.checker); onnxruntime matches the trainer "
             f"(max abs difference {max_diff:.1e})")
    return 0 if max_diff < 1e-4 else 1
