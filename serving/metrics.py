"""The server's Prometheus metrics: counted here, rendered by prometheus-client.

Each ``ServingMetrics`` has its own registry, so several servers in one process do not collide.
A series is bound once per model version (``labels(...)``) and created by its first update, so a
version that has served nothing shows none; ``keep_versions`` drops a retired version's series,
and a bound series updated after that starts a fresh one. Serving is one process (threads), so
prometheus-client's multiprocess mode is not used.

The counts live in plain Python objects, one lock and a few additions an update, and each family
is a prometheus-client collector that renders them as its Counter and Histogram do (the same
samples, ``_created`` included). prometheus-client's own metric objects took two locks and five
Python calls an observation: the four observations and one increment of a request at
concurrency 1 cost 2.9 us against 1.5 here (in-process, warm; benchmarks/RESULTS.md, session 15).
"""

from __future__ import annotations

import math
import os
import threading
import time
from bisect import bisect_left
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4 as CONTENT_TYPE
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

__all__ = ["BATCH_SIZE_BUCKETS", "CONTENT_TYPE", "LATENCY_BUCKETS_S", "Family", "Series", "ServingMetrics"]

LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
# prometheus-client's switch for the ``_created`` samples, honoured as the library honours it.
CREATED_SAMPLES = os.environ.get("PROMETHEUS_DISABLE_CREATED_SERIES", "False").lower() not in ("true", "1", "t")

Labels = tuple[tuple[str, str], ...]


class _Counts:
    """One series' numbers: a counter's total in ``sum``, or a histogram's per-bucket counts
    (not cumulative; the last is +Inf's) and the sum of its observations."""

    __slots__ = ("lock", "counts", "sum", "created")

    def __init__(self, buckets: int) -> None:
        self.lock = threading.Lock()
        self.counts = [0] * buckets if buckets else None
        self.sum = 0.0
        self.created = time.time()


class Family:
    """A labelled counter (``buckets`` None) or histogram whose series can be bound and dropped;
    a prometheus-client collector of its series."""

    def __init__(self, name: str, help_text: str, labelnames: Iterable[str], buckets: Iterable[float] | None = None):
        self.name, self.help_text = name, help_text
        self.labelnames = tuple(labelnames)
        self.bounds = None if buckets is None else tuple(float(b) for b in buckets) + (math.inf,)
        self.generation = 0  # bumped when series are dropped: bound series then look theirs up again
        self._series: dict[tuple[str, ...], _Counts] = {}
        self._lock = threading.Lock()

    def labels(self, **labels: str) -> Series:
        """The series with these label values, bound for repeated updates."""
        if set(labels) != set(self.labelnames):
            raise ValueError(f"metric {self.name}: labels {sorted(labels)} given, {list(self.labelnames)} expected")
        return Series(self, tuple(str(labels[name]) for name in self.labelnames))

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self.labels(**labels).inc(amount)

    def observe(self, value: float, **labels: str) -> None:
        self.labels(**labels).observe(value)

    def counts(self, values: tuple[str, ...]) -> _Counts:
        """The numbers of the series with label ``values``, made by the first update."""
        with self._lock:
            counts = self._series.get(values)
            if counts is None:
                counts = self._series[values] = _Counts(0 if self.bounds is None else len(self.bounds))
            return counts

    def forget(self, keep: Callable[[Labels], bool]) -> None:
        """Drop every series whose labels ``keep`` refuses (a retired model version's, say)."""
        with self._lock:
            dropped = [values for values in self._series if not keep(tuple(zip(self.labelnames, values)))]
            for values in dropped:
                del self._series[values]
            if dropped:
                self.generation += 1

    def describe(self) -> list[Metric]:
        return [self._metric()]

    def collect(self) -> list[Metric]:
        """The family's samples, as prometheus-client's Counter or Histogram gives them."""
        metric = self._metric()
        with self._lock:
            series = list(self._series.items())
        for values, counts in series:
            labels = dict(zip(self.labelnames, values))
            with counts.lock:
                total, buckets = counts.sum, list(counts.counts or ())
            if self.bounds is None:
                metric.add_sample(metric.name + "_total", labels, total)
            else:
                cumulative = 0
                for bound, count in zip(self.bounds, buckets):
                    cumulative += count
                    metric.add_sample(metric.name + "_bucket", {**labels, "le": floatToGoString(bound)}, float(cumulative))
                metric.add_sample(metric.name + "_count", labels, float(cumulative))
                metric.add_sample(metric.name + "_sum", labels, total)
            if CREATED_SAMPLES:
                metric.add_sample(metric.name + "_created", labels, counts.created)
        return [metric]

    def _metric(self) -> Metric:
        if self.bounds is None:  # a counter's family is named without its samples' ``_total``
            return Metric(self.name.removesuffix("_total"), self.help_text, "counter")
        return Metric(self.name, self.help_text, "histogram")


class Series:
    """One series of a ``Family``, created by its first update (and again after a drop)."""

    __slots__ = ("_family", "_values", "_counts", "_generation")

    def __init__(self, family: Family, values: tuple[str, ...]):
        self._family, self._values = family, values
        self._counts: _Counts | None = None
        self._generation = -1

    def _bound(self) -> _Counts:
        family = self._family
        if self._generation != family.generation:
            # The generation read first (a drop meanwhile rebinds next time) and stored last, so
            # that another thread seeing it current finds these counts stored.
            generation = family.generation
            self._counts = family.counts(self._values)
            self._generation = generation
        return self._counts  # type: ignore[return-value]

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        counts = self._bound()
        with counts.lock:
            counts.sum += amount

    def observe(self, value: float) -> None:
        counts = self._bound()
        index = bisect_left(self._family.bounds, value)  # the first bucket whose bound is >= value
        with counts.lock:
            counts.counts[index] += 1
            counts.sum += value

    def observe_many(self, values: Iterable[float]) -> None:
        """Record several observations (e.g. the queue waits of one batch)."""
        counts = self._bound()
        bounds = self._family.bounds
        with counts.lock:
            for value in values:
                counts.counts[bisect_left(bounds, value)] += 1
                counts.sum += value


class CallbackGauges:
    """Gauges whose samples are read when scraped, from ``collect() -> {labels: value}``."""

    def __init__(self) -> None:
        self.gauges: list[tuple[str, str, Callable[[], dict[Labels, float]]]] = []

    def collect(self) -> Iterable[Metric]:
        for name, help_text, read in self.gauges:
            metric = Metric(name, help_text, "gauge")
            for labels, value in sorted(read().items()):
                metric.add_sample(name, dict(labels), value)
            yield metric


class ServingMetrics:
    """The server's metric families; ``render()`` returns the /metrics page."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

        def counter(name: str, help_text: str, labelnames: tuple[str, ...]) -> Family:
            family = Family(name, help_text, labelnames)
            self.registry.register(family)
            return family

        def histogram(name: str, help_text: str, buckets: tuple[float, ...]) -> Family:
            family = Family(name, help_text, ("model", "version"), buckets)
            self.registry.register(family)
            return family

        self.requests = counter("flowstack_inference_requests_total", "Inference requests by model, protocol and status.",
                                ("model", "protocol", "status", "version"))
        self.request_seconds = histogram("flowstack_request_duration_seconds",
                                         "End-to-end inference time inside the server.", LATENCY_BUCKETS_S)
        self.queue_seconds = histogram("flowstack_queue_duration_seconds", "Time requests wait in the batcher queue.",
                                       LATENCY_BUCKETS_S)
        self.compute_seconds = histogram("flowstack_compute_duration_seconds", "Time of one batched backend call.",
                                         LATENCY_BUCKETS_S)
        self.batch_size = histogram("flowstack_batch_size", "Rows per batched backend call.", BATCH_SIZE_BUCKETS)
        self.load_failures = counter("flowstack_model_load_failures_total",
                                     "Model versions (or configs) that failed to load, by model.", ("model",))
        self._gauges = CallbackGauges()
        self.registry.register(self._gauges)

    def add_gauge(self, name: str, help_text: str, collect: Callable[[], dict[Labels, float]]) -> None:
        self._gauges.gauges.append((name, help_text, collect))

    def keep_versions(self, served: set[tuple[str, str]]) -> None:
        """Drop the series of model versions no longer served: those labelled with a model and a
        version whose (model, version) is not in ``served``. Series of no model (requests refused
        before reaching one) stay. Without this a server reloading models grew /metrics by every
        version it ever served (1,472 lines after 40 reloads)."""

        def keep(labels: Labels) -> bool:
            found = dict(labels)
            if "version" not in found:  # a model's own series (its load failures)
                return True
            model, version = found.get("model", ""), found["version"]
            return not model or (model, version) in served

        for family in (self.requests, self.request_seconds, self.queue_seconds, self.compute_seconds,
                       self.batch_size, self.load_failures):
            family.forget(keep)

    def render(self) -> str:
        return generate_latest(self.registry).decode()
