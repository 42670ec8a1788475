"""Per-operator timing of a loaded model: LiteRT's op profiling (``benchmark_model
--enable_op_profiling``), for finding where a model's time goes before optimizing it.

``profile_ops`` times every node's kernel over a number of runs, on a private copy of the model's
plans, so the model itself (and any concurrent ``run`` on it) is untouched. Timing a kernel inside
its model matters: the caches, the memory allocator and the BLAS threads are in the state the
neighbouring nodes leave them in, which a kernel timed alone in a loop does not see.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from edge_runtime.model import Model


@dataclass
class NodeTiming:
    """One node's kernel time over the profiled runs (nodes inside If/Loop/Scan bodies count each call)."""

    label: str  # "subgraph 0, node 3 'conv2/Conv' (Conv)"
    op_type: str
    calls: int
    seconds: float


@dataclass
class OpProfile:
    runs: int
    run_seconds: float  # wall time of the profiled runs, kernels and everything around them
    nodes: list[NodeTiming]  # slowest first

    def by_op_type(self) -> list[tuple[str, int, float]]:
        """(op type, nodes of that type, seconds), slowest first."""
        totals: dict[str, list] = {}
        for node in self.nodes:
            entry = totals.setdefault(node.op_type, [0, 0.0])
            entry[0] += 1
            entry[1] += node.seconds
        return sorted(((op, n, s) for op, (n, s) in totals.items()), key=lambda row: -row[2])

    def table(self, top: int = 10) -> str:
        """The profile as text: per op type, then the ``top`` slowest nodes, in ms per run."""
        per_run = 1e3 / max(self.runs, 1)
        kernels = sum(n.seconds for n in self.nodes)
        lines = [f"{self.runs} runs: {self.run_seconds * per_run:.3f} ms a run, "
                 f"{kernels * per_run:.3f} ms of it in kernels",
                 f"{'op type':<28s} {'nodes':>5s} {'ms/run':>9s} {'share':>6s}"]
        for op, count, seconds in self.by_op_type():
            lines.append(f"{op:<28s} {count:5d} {seconds * per_run:9.3f} {seconds / max(kernels, 1e-12):6.1%}")
        lines.append(f"slowest {min(top, len(self.nodes))} nodes:")
        for node in self.nodes[:top]:
            lines.append(f"  {node.seconds * per_run:9.3f} ms  {node.label}")
        return "\n".join(lines)


def profile_ops(model: Model, feeds: Mapping[str, Any], runs: int = 10, warmup: int = 2,
                signature: str | None = None) -> OpProfile:
    """Run ``model`` on ``feeds`` ``warmup`` times, then ``runs`` times with each node's kernel timed."""
    if runs < 1 or warmup < 0:
        raise ValueError(f"runs must be >= 1 and warmup >= 0, got runs={runs}, warmup={warmup}")
    copy = model.replanned()  # plans of its own: the model and its concurrent runs are untouched
    sync = _synchronizer(copy.xp)
    timings: list[NodeTiming] = []
    for plan in copy.plans.values():
        for step in plan.steps:
            timings.append(NodeTiming(step.label, step.op_type, 0, 0.0))
            step.kernel = _timed(step.kernel, timings[-1], sync)
    for _ in range(warmup):
        copy.run(feeds, signature=signature)
    for timing in timings:
        timing.calls, timing.seconds = 0, 0.0
    start = time.perf_counter()
    for _ in range(runs):
        copy.run(feeds, signature=signature)
    elapsed = time.perf_counter() - start
    nodes = sorted((t for t in timings if t.calls), key=lambda t: -t.seconds)
    return OpProfile(runs, elapsed, nodes)


def _timed(kernel: Callable, timing: NodeTiming, sync: Callable[[], None]) -> Callable:
    def timed(*args, **kwargs):
        start = time.perf_counter()
        result = kernel(*args, **kwargs)
        sync()
        timing.seconds += time.perf_counter() - start
        timing.calls += 1
        return result

    return timed


def _synchronizer(xp) -> Callable[[], None]:
    """A wait for the device's queued work (CuPy kernels run asynchronously); nothing on NumPy."""
    if xp.__name__ == "numpy":
        return lambda: None
    return xp.cuda.get_current_stream().synchronize
