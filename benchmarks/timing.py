"""Timing two runners side by side on a shared machine: alternating blocks, not alternating calls.

Each side runs a block of calls lasting about ``BLOCK_S``, then the other side does, until the
budget is spent; the median of each side's calls is its figure. Load from other processes falls on
both sides, so the ratio holds while absolute times drift, and each block runs with its own
weights warm in cache, as a deployed model called again and again does. Alternating call for call
measures something else: each call after the other model's evicted its weights (onnxruntime's MLP
took 2x longer that way, and the digits CNN's optimized graph 0.104 ms instead of 0.085 ms).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable

BLOCK_S = 0.2
# A pause before each block: onnxruntime's intra-op threads and OpenBLAS's spin for a while after
# a run and slow whatever runs next on the two cores (MobileNetV2 medians right after the other
# side's block: ours 14.2 ms, onnxruntime 3.76 ms; after a 0.2 s pause 10.5 and 2.16 ms).
SETTLE_S = 0.2


@dataclass
class Timing:
    median_ms: float
    count: int
    min_ms: float


class PairRatios:
    """``ratio`` and ``min_ratio`` of a row with ``ours`` and ``ort`` Timings (None until timed)."""

    ours: Timing | None
    ort: Timing | None

    @property
    def ratio(self) -> float | None:
        return self.ours.median_ms / self.ort.median_ms if self.ours and self.ort else None

    @property
    def min_ratio(self) -> float | None:
        """Best against best: the figure least moved by other processes on a shared machine."""
        return self.ours.min_ms / self.ort.min_ms if self.ours and self.ort else None


def elapsed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def time_pair(
    ours: Callable[[], object], peer: Callable[[], object], warmup: int, min_count: int, max_count: int, budget_s: float
) -> tuple[Timing, Timing]:
    """Median latency of two callables timed in alternating blocks of about ``BLOCK_S`` each: at
    least ``min_count`` calls of each, then more until ``budget_s`` is spent or ``max_count``."""
    blocks = []
    for fn in (ours, peer):
        first = min(elapsed_ms(fn) for _ in range(warmup))
        blocks.append(max(1, int(BLOCK_S * 1e3 / max(first, 1e-3))))
    a: list[float] = []
    b: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(a) < min_count or (len(a) < max_count and time.perf_counter() < deadline):
        time.sleep(SETTLE_S)
        a.extend(elapsed_ms(ours) for _ in range(blocks[0]))
        time.sleep(SETTLE_S)
        b.extend(elapsed_ms(peer) for _ in range(blocks[1]))
    return Timing(statistics.median(a), len(a), min(a)), Timing(statistics.median(b), len(b), min(b))


def time_one(fn: Callable[[], object], count: int, budget_s: float, first_ms: float) -> Timing:
    """Median of ``first_ms`` (an already timed call) and more calls until ``count`` or the budget."""
    times = [first_ms]
    deadline = time.perf_counter() + budget_s
    while len(times) < count and time.perf_counter() < deadline:
        times.append(elapsed_ms(fn))
    return Timing(statistics.median(times), len(times), min(times))
