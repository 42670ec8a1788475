"""The chief's straggler report: each worker's step-time percentiles, gathered every N steps.

Each task's ``TaskMetrics`` keeps its recent step times; the chief asks every worker for them
(``PeerClient.step_stats``, bounded by ``timeout``), names the slowest against the median and
returns the line to log and the chief's own scalars (for TensorBoard).
"""

from __future__ import annotations

import statistics

from trainer.distributed.cluster import SERVING_JOBS, split_task_name
from trainer.distributed.errors import DistributedError

__all__ = ["straggler_report"]


def straggler_report(server, step: int, timeout: float = 1.0) -> tuple[str, dict[str, float]]:
    """(a one-line report, this task's scalars) for the workers of ``server``'s cluster at ``step``."""
    stats: dict[str, dict] = {}
    for task in server.cluster.tasks():
        if split_task_name(task)[0] in SERVING_JOBS:
            continue
        if task == server.task:
            stats[task] = server.metrics.step_stats()
            continue
        try:
            stats[task] = server.peer(task).step_stats(timeout)
        except DistributedError:
            stats[task] = {}
    parts = []
    for task, s in stats.items():
        if not s:
            parts.append(f"{task} unreachable")
        else:
            parts.append(f"{task} p50 {s['p50_ms']:.1f} p90 {s['p90_ms']:.1f} p99 {s['p99_ms']:.1f} ms "
                         f"{s['steps_per_sec']:.1f} steps/s")
    medians = {t: s["p50_ms"] for t, s in stats.items() if s and s.get("steps")}
    line = f"straggler report at global step {step}: " + "; ".join(parts)
    if len(medians) >= 2:
        slowest = max(medians, key=medians.get)
        middle = statistics.median(medians.values())
        if middle > 0:
            line += f"; slowest {slowest} at {medians[slowest] / middle:.2f}x the median p50"
    own = stats.get(server.task) or {}
    scalars = {f"flowstack/{k}": float(v) for k, v in own.items() if k != "task"}
    return line, scalars
