"""The server's Prometheus metrics, kept and rendered by prometheus-client.

Each ``ServingMetrics`` has its own registry, so several servers in one process do not collide.
A series is bound once per model version (``labels(...)``) and created by its first update, so a
version that has served nothing shows none; ``keep_versions`` drops a retired version's series,
and a bound series updated after that starts a fresh one. Serving is one process (threads), so
prometheus-client's multiprocess mode is not used. Its cost on the request path (about 1.4 us a
request more than the hand-written exposition's, of 100-140 us of server CPU) is within the
host's spread at concurrency 64 (benchmarks/RESULTS.md, issue 19), so the library stays.
"""

from __future__ import annotations

from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import Counter as PrometheusCounter
from prometheus_client import Histogram as PrometheusHistogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4 as CONTENT_TYPE
from prometheus_client.metrics_core import Metric

__all__ = ["BATCH_SIZE_BUCKETS", "CONTENT_TYPE", "LATENCY_BUCKETS_S", "Family", "Series", "ServingMetrics"]

LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

Labels = tuple[tuple[str, str], ...]


class Family:
    """A labelled prometheus-client counter or histogram whose series can be bound and dropped."""

    def __init__(self, name: str, metric, labelnames: Iterable[str]):
        self.name, self.metric = name, metric
        self.labelnames = tuple(labelnames)
        self.generation = 0  # bumped when series are dropped: bound series then look theirs up again

    def labels(self, **labels: str) -> Series:
        """The series with these label values, bound for repeated updates."""
        if set(labels) != set(self.labelnames):
            raise ValueError(f"metric {self.name}: labels {sorted(labels)} given, {list(self.labelnames)} expected")
        return Series(self, tuple(str(labels[name]) for name in self.labelnames))

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self.labels(**labels).inc(amount)

    def observe(self, value: float, **labels: str) -> None:
        self.labels(**labels).observe(value)

    def forget(self, keep: Callable[[Labels], bool]) -> None:
        """Drop every series whose labels ``keep`` refuses (a retired model version's, say)."""
        dropped = [values for values in self._series_values() if not keep(tuple(zip(self.labelnames, values)))]
        for values in dropped:
            self.metric.remove(*values)
        if dropped:
            self.generation += 1

    def _series_values(self) -> set[tuple[str, ...]]:
        return {tuple(sample.labels[name] for name in self.labelnames)
                for family in self.metric.collect() for sample in family.samples}


class Series:
    """One series of a ``Family``, created by its first update (and again after a drop)."""

    __slots__ = ("_family", "_values", "_child", "_generation")

    def __init__(self, family: Family, values: tuple[str, ...]):
        self._family, self._values = family, values
        self._child = None
        self._generation = -1

    def _bound(self):
        family = self._family
        if self._generation != family.generation:
            self._child = family.metric.labels(*self._values)
            self._generation = family.generation
        return self._child

    def inc(self, amount: float = 1.0) -> None:
        self._bound().inc(amount)

    def observe(self, value: float) -> None:
        self._bound().observe(value)

    def observe_many(self, values: Iterable[float]) -> None:
        """Record several observations (e.g. the queue waits of one batch)."""
        observe = self._bound().observe
        for value in values:
            observe(value)


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
            return Family(name, PrometheusCounter(name, help_text, labelnames, registry=self.registry), labelnames)

        def histogram(name: str, help_text: str, buckets: tuple[float, ...]) -> Family:
            labelnames = ("model", "version")
            return Family(name, PrometheusHistogram(name, help_text, labelnames, registry=self.registry, buckets=buckets),
                          labelnames)

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
