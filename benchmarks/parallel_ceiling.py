"""How fast could the edge runtime be with two cores? The ceiling of splitting one inference in two.

Splitting a model's work between two threads (or processes) can at best run two halves as fast as
the machine runs two whole models side by side. So this times, on the zoo's PyTorch exports:

- onnxruntime with two intra-op threads (the peer of ``edge_vs_onnxruntime``);
- ours as it runs (OpenBLAS's own threads), and with OpenBLAS held to one thread;
- two Python threads each running the whole model at once (one BLAS thread each): the median per
  run halved is what a perfect two-thread split of one inference could reach, with no hand-off,
  no halo and no idle core; CPython's GIL and the interpreter's own work are what it leaves in;
- two processes doing the same: the ceiling without the GIL (but with copies between processes);
- how long OpenBLAS's worker keeps the second core busy after a call (it spins waiting for the
  next), which a thread of ours would have to share that core with.

Each figure is a median of timed runs; every "equivalent" is per inference, against onnxruntime
measured in the same round.

    python -m benchmarks.parallel_ceiling --models mobilenet_v2,efficientnet_b0 --runs 60
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import threading
import time

import numpy as np

from benchmarks.edge_vs_onnxruntime import flow_bytes, machine, ort_session
from edge_runtime.model import load
from edge_runtime.threads import BlasThreads, describe_blas


def median_ms(fn, runs: int, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def two_threads_ms(fn, runs: int) -> float:
    """The median run time of ``fn`` while two threads run it at once (the slower thread's median)."""
    results: list[float] = []
    start = threading.Barrier(2)

    def worker():
        fn()
        start.wait(timeout=60)
        results.append(median_ms(fn, runs, warmup=2))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    return max(results)


def _process_worker(path: str, feeds_path: str, runs: int, barrier, queue) -> None:
    model = load(path)
    feeds = dict(np.load(feeds_path))
    with BlasThreads(1).applied():
        model.run(feeds)
        barrier.wait(timeout=120)
        queue.put(median_ms(lambda: model.run(feeds), runs, warmup=2))


def two_processes_ms(path: str, feeds_path: str, runs: int) -> float:
    """The median run time while two processes (one BLAS thread each) run the model at once."""
    context = multiprocessing.get_context("spawn")
    barrier, queue = context.Barrier(2), context.Queue()
    procs = [context.Process(target=_process_worker, args=(path, feeds_path, runs, barrier, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return max(results)


def blas_spin_ms(after) -> float | None:
    """CPU milliseconds the process's other threads burn in the 300 ms after ``after()`` (Linux)."""
    tasks = f"/proc/{os.getpid()}/task"
    if not os.path.isdir(tasks):
        return None
    me = threading.get_native_id()

    def others() -> int:
        total = 0
        for tid in os.listdir(tasks):
            if int(tid) != me:
                with open(f"{tasks}/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        return total

    after()
    before = others()
    time.sleep(0.3)
    return (others() - before) * 1e3 / os.sysconf("SC_CLK_TCK")


def bench(name: str, runs: int, rounds: int) -> list[str]:
    from benchmarks.zoo import ZOO

    model_proto, feeds = ZOO[name].export()
    session = ort_session(model_proto.SerializeToString())
    outputs = [o.name for o in model_proto.graph.output]
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        path, feeds_path = os.path.join(tmp, f"{name}.flow"), os.path.join(tmp, "feeds.npz")
        with open(path, "wb") as f:
            f.write(flow_bytes(model_proto))
        np.savez(feeds_path, **feeds)
        model = load(path)
        ours = lambda: model.run(feeds)  # noqa: E731
        for round_ in range(1, rounds + 1):
            ort = median_ms(lambda: session.run(outputs, feeds), runs)
            as_is = median_ms(ours, runs)
            with BlasThreads(1).applied():
                one = median_ms(ours, runs)
                threads = two_threads_ms(ours, runs)
            procs = two_processes_ms(path, feeds_path, runs)
            cells = [("onnxruntime", ort), ("ours", as_is), ("ours, 1 BLAS thread", one),
                     ("2 threads, per inference", threads / 2), ("2 processes, per inference", procs / 2)]
            lines.append(f"| {name} | {round_} | " + " | ".join(f"{ms:.2f} ({ms / ort:.2f})" for _, ms in cells) + " |")
        spin = blas_spin_ms(lambda: [model.run(feeds) for _ in range(3)])
    if spin is not None:
        lines.append(f"| {name} | OpenBLAS's other threads after a run: {spin:.0f} ms of CPU in the next 300 ms | | | | | |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mobilenet_v2,efficientnet_b0", help="zoo models, comma-separated")
    parser.add_argument("--runs", type=int, default=60, help="timed runs per figure")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per model, each timing onnxruntime again")
    args = parser.parse_args(argv)
    print(machine())
    print(f"BLAS: {describe_blas()}")
    print("| model | round | onnxruntime ms | ours ms (/ort) | ours, 1 BLAS thread | two threads at once, "
          "per inference | two processes at once, per inference |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        for line in bench(name.strip(), args.runs, args.rounds):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
