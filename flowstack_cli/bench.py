"""``flowstack bench model.flow [--onnx model.onnx] [--profile [N]]``: latency percentiles, optionally
beside onnxruntime, and optionally where the time goes per operator (LiteRT's op profiling)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np


def register(subparsers) -> None:
    p = subparsers.add_parser("bench", help="measure a .flow model's latency")
    p.add_argument("model", type=Path)
    p.add_argument("--onnx", type=Path, help="the source .onnx, to time onnxruntime side by side")
    p.add_argument("--batch", type=int, default=1, help="size for dynamic dimensions")
    p.add_argument("--seconds", type=float, default=3.0, help="time budget per runtime")
    p.add_argument("--threads", type=int, default=2, help="onnxruntime intra-op threads")
    p.add_argument("--profile", type=int, nargs="?", const=10, metavar="N",
                   help="also time each operator and list the N slowest nodes (default 10)")
    p.set_defaults(handler=run)


def sample_inputs(model, batch: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in model.inputs:
        shape = [batch if d == -1 else d for d in spec.shape]
        if spec.dtype.kind == "f":
            feeds[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        elif spec.dtype.kind == "b":
            feeds[spec.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            feeds[spec.name] = rng.integers(0, 4, shape).astype(spec.dtype)
    return feeds


def measure(fn, seconds: float, min_runs: int = 5, max_runs: int = 10_000) -> np.ndarray:
    fn()  # warm up
    times = []
    deadline = time.perf_counter() + seconds
    while len(times) < min_runs or (time.perf_counter() < deadline and len(times) < max_runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return np.array(times) * 1e3


def minor_faults() -> int | None:
    """This process's minor page faults so far (None where the platform does not count them)."""
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def memory_line(faults_per_run: float | None) -> str:
    """Page faults a run: a steady model faults in no new memory; hundreds a run mean the allocator
    returns freed arrays to the kernel between runs (see ``edge_runtime.allocator``)."""
    from edge_runtime.allocator import keep_freed_memory

    counted = "not counted here" if faults_per_run is None else f"{faults_per_run:.1f}"
    return f"memory: minor page faults a run {counted} (malloc thresholds: {keep_freed_memory()})"


def summary(label: str, ms: np.ndarray) -> str:
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return f"{label:<12} runs {len(ms):>6}  p50 {p50:9.3f} ms  p90 {p90:9.3f} ms  p99 {p99:9.3f} ms"


def run(args) -> int:
    from edge_runtime import load
    from edge_runtime.threads import describe_blas, forced_blas_kernels

    model = load(args.model)
    print(f"BLAS: {describe_blas()}")
    forced = forced_blas_kernels()
    if forced:
        print(f"note: {forced}")
    feeds = sample_inputs(model, args.batch)
    model.run(feeds)  # the first run touches every array for the first time: its faults do not count
    before = minor_faults()
    ours = measure(lambda: model.run(feeds), args.seconds)
    after = minor_faults()
    print(summary("flowstack", ours))
    print(memory_line(None if before is None else (after - before) / (len(ours) + 1)))  # + measure's warm-up
    if args.onnx:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(args.onnx), options, providers=["CPUExecutionProvider"])
        theirs = measure(lambda: session.run(None, feeds), args.seconds)
        print(summary("onnxruntime", theirs))
        print(f"ratio flowstack/onnxruntime (p50): {np.median(ours) / np.median(theirs):.2f}")
    if args.profile is not None:
        from edge_runtime.profiler import profile_ops

        runs = max(1, min(100, int(args.seconds * 1e3 / max(float(np.median(ours)), 1e-3))))
        print(profile_ops(model, feeds, runs=runs).table(args.profile))
    return 0
