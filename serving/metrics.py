"""Prometheus metrics in the text exposition format (version 0.0.4), without a client library.

Three kinds, enough for a server: counters, histograms (cumulative buckets, _sum, _count) and
gauges read from a callback when scraped. All are thread-safe. ``labels(...)`` binds a series
once, so a hot path does not sort its labels on every update.
"""

from __future__ import annotations

import bisect
import math
import threading
from typing import Callable, Iterable

LATENCY_BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_labels(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _format_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class Counter:
    def __init__(self, name: str, help_text: str):
        self.name, self.help = name, help_text
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        self.labels(**labels).inc(amount)

    def labels(self, **labels: str) -> CounterSeries:
        """The series with these label values, bound for repeated updates."""
        return CounterSeries(self, tuple(sorted(labels.items())))

    def value(self, **labels: str) -> float:
        return self._values.get(tuple(sorted(labels.items())), 0.0)

    def forget(self, keep: Callable[[Labels], bool]) -> None:
        """Drop every series whose labels ``keep`` refuses (a retired model version's, say)."""
        with self._lock:
            for labels in [labels for labels in self._values if not keep(labels)]:
                del self._values[labels]

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} counter"
        with self._lock:
            items = sorted(self._values.items())
        for labels, value in items:
            yield f"{self.name}{_format_labels(labels)} {_format_value(value)}"


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...]):
        self.name, self.help, self.buckets = name, help_text, tuple(buckets)
        self._series: dict[Labels, list] = {}  # labels -> [bucket counts..., sum, count]
        self._lock = threading.Lock()
        self.generation = 0  # bumped when series are dropped: bound series then look theirs up again

    def observe(self, value: float, **labels: str) -> None:
        self.labels(**labels).observe(value)

    def labels(self, **labels: str) -> HistogramSeries:
        """The series with these label values, bound for repeated updates."""
        return HistogramSeries(self, tuple(sorted(labels.items())))

    def count(self, **labels: str) -> int:
        series = self._series.get(tuple(sorted(labels.items())))
        return series[-1] if series else 0

    def forget(self, keep: Callable[[Labels], bool]) -> None:
        """Drop every series whose labels ``keep`` refuses; bound series re-create theirs if observed again."""
        with self._lock:
            dropped = [labels for labels in self._series if not keep(labels)]
            for labels in dropped:
                del self._series[labels]
            if dropped:
                self.generation += 1

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        with self._lock:
            items = sorted((k, list(v)) for k, v in self._series.items())
        for labels, series in items:
            cumulative = 0
            for bound, n in zip(self.buckets + (math.inf,), series):
                cumulative += n
                le = (("le", _format_value(bound)),)
                yield f"{self.name}_bucket{_format_labels(labels, le)} {cumulative}"
            yield f"{self.name}_sum{_format_labels(labels)} {_format_value(series[-2])}"
            yield f"{self.name}_count{_format_labels(labels)} {series[-1]}"


class CounterSeries:
    __slots__ = ("_counter", "_key")

    def __init__(self, counter: Counter, key: Labels):
        self._counter, self._key = counter, key

    def inc(self, amount: float = 1.0) -> None:
        counter = self._counter
        with counter._lock:
            counter._values[self._key] = counter._values.get(self._key, 0.0) + amount


class HistogramSeries:
    __slots__ = ("_histogram", "_key", "_series", "_generation")

    def __init__(self, histogram: Histogram, key: Labels):
        self._histogram, self._key = histogram, key
        self._series: list | None = None  # created by the first observation, as unbound ones are
        self._generation = -1

    def observe(self, value: float) -> None:
        self.observe_many((value,))

    def observe_many(self, values) -> None:
        """Record several observations under one lock (e.g. the queue waits of one batch)."""
        histogram = self._histogram
        buckets = histogram.buckets
        with histogram._lock:
            series = self._series
            if series is None or self._generation != histogram.generation:
                series = histogram._series.get(self._key)
                if series is None:
                    series = histogram._series[self._key] = [0] * (len(buckets) + 1) + [0.0, 0]
                self._series = series
                self._generation = histogram.generation
            for value in values:
                series[bisect.bisect_left(buckets, value)] += 1
                series[-2] += value
                series[-1] += 1


class Gauge:
    """A gauge whose samples are read from ``collect() -> {labels dict as tuple: value}`` on scrape."""

    def __init__(self, name: str, help_text: str, collect: Callable[[], dict[Labels, float]]):
        self.name, self.help, self._collect = name, help_text, collect

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} gauge"
        for labels, value in sorted(self._collect().items()):
            yield f"{self.name}{_format_labels(labels)} {_format_value(value)}"


class ServingMetrics:
    """The server's metric families; ``render()`` returns the /metrics page."""

    def __init__(self) -> None:
        self.requests = Counter("flowstack_inference_requests_total", "Inference requests by model, protocol and status.")
        self.queue_seconds = Histogram(
            "flowstack_queue_duration_seconds", "Time requests wait in the batcher queue.", LATENCY_BUCKETS_S
        )
        self.compute_seconds = Histogram(
            "flowstack_compute_duration_seconds", "Time of one batched backend call.", LATENCY_BUCKETS_S
        )
        self.request_seconds = Histogram(
            "flowstack_request_duration_seconds", "End-to-end inference time inside the server.", LATENCY_BUCKETS_S
        )
        self.batch_size = Histogram("flowstack_batch_size", "Rows per batched backend call.", BATCH_SIZE_BUCKETS)
        self.load_failures = Counter("flowstack_model_load_failures_total",
                                     "Model versions (or configs) that failed to load, by model.")
        self._gauges: list[Gauge] = []

    def add_gauge(self, name: str, help_text: str, collect: Callable[[], dict[Labels, float]]) -> None:
        self._gauges.append(Gauge(name, help_text, collect))

    @property
    def _families(self) -> list:
        return [self.requests, self.request_seconds, self.queue_seconds, self.compute_seconds, self.batch_size,
                self.load_failures]

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

        for family in self._families:
            family.forget(keep)

    def render(self) -> str:
        families = self._families
        lines: list[str] = []
        for family in families + self._gauges:
            lines.extend(family.render())
        return "\n".join(lines) + "\n"
