"""A task's metrics: step times, bytes and RPC errors per peer, restarts; Prometheus ``/metrics``.

``TaskMetrics`` is made by each ``Server``. ``MonitoredTrainingSession`` feeds it one step time per
step (``observe_step``: a deque append and a histogram observe); everything else (bytes, RPC errors,
restarts) is read from the server's own counters when Prometheus scrapes, so watching costs a step
nothing. ``serve(port)`` answers ``GET /metrics`` (``prometheus-client``'s HTTP server, on a thread).

Exposed names (all prefixed ``flowstack_``): ``steps_total``, ``step_seconds`` (histogram),
``steps_per_second``, ``step_time_seconds{quantile}``, ``bytes_sent_total{peer}``,
``bytes_received_total{peer}``, ``rpc_errors_total{peer,code}``, ``peer_restarts_total{peer}``,
``task_restarts`` (how often a supervisor restarted this task: ``$FLOWSTACK_RESTARTS``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from trainer.distributed.server import Server

__all__ = ["RESTARTS_ENV", "TaskMetrics", "percentiles_ms"]

RESTARTS_ENV = "FLOWSTACK_RESTARTS"  # set by `flowstack cluster launch` on a restarted task
_WINDOW = 1000  # step times kept for percentiles and steps per second
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
QUANTILES = (50, 90, 99)


def percentiles_ms(seconds) -> dict[str, float]:
    """``{"p50_ms": ..., "p90_ms": ..., "p99_ms": ...}`` of step times given in seconds (empty: zeros)."""
    if len(seconds) == 0:
        return {f"p{q}_ms": 0.0 for q in QUANTILES}
    values = np.percentile(np.asarray(seconds, dtype=np.float64), QUANTILES) * 1e3
    return {f"p{q}_ms": round(float(v), 3) for q, v in zip(QUANTILES, values)}


class TaskMetrics:
    """The metrics of ``server``'s task; ``registry`` is what ``/metrics`` shows."""

    def __init__(self, server: "Server"):
        self.server = server
        self.restarts = int(os.environ.get(RESTARTS_ENV, "0") or 0)
        self.steps = 0
        self._times: deque[tuple[float, float]] = deque(maxlen=_WINDOW)  # (end time, seconds)
        self._lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=True)
        self._steps = Counter("flowstack_steps", "Training steps this task ran", registry=self.registry)
        self._step_hist = Histogram("flowstack_step_seconds", "Time of one training step on this task",
                                    buckets=_BUCKETS, registry=self.registry)
        self.registry.register(_ServerCollector(self))
        self._http = None

    def observe_step(self, seconds: float) -> None:
        with self._lock:
            self._times.append((time.monotonic(), seconds))
            self.steps += 1
        self._steps.inc()
        self._step_hist.observe(seconds)

    def step_stats(self) -> dict:
        """Steps run, steps per second and step-time percentiles over the last ``_WINDOW`` steps."""
        with self._lock:
            times = list(self._times)
        stats = {"task": self.server.task, "steps": self.steps, "steps_per_sec": 0.0}
        if len(times) >= 2 and times[-1][0] > times[0][0]:
            stats["steps_per_sec"] = round((len(times) - 1) / (times[-1][0] - times[0][0]), 3)
        stats.update(percentiles_ms([s for _, s in times]))
        return stats

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Answer ``GET http://host:port/metrics``; the port it listens on (``port=0``: any free one)."""
        self._http, _ = start_http_server(port, addr=host, registry=self.registry)
        return self._http.server_port

    def close(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None


class _ServerCollector:
    """Reads the server's counters at scrape time (nothing is counted twice or on the step's path)."""

    def __init__(self, metrics: TaskMetrics):
        self.metrics = metrics

    def collect(self):
        server = self.metrics.server
        stats = self.metrics.step_stats()
        yield GaugeMetricFamily("flowstack_steps_per_second", "Steps per second over the recent steps",
                                value=stats["steps_per_sec"])
        quantiles = GaugeMetricFamily("flowstack_step_time_seconds", "Step time percentiles over the recent steps",
                                      labels=["quantile"])
        for q in QUANTILES:
            quantiles.add_metric([f"0.{q}"], stats[f"p{q}_ms"] / 1e3)
        yield quantiles
        sent = CounterMetricFamily("flowstack_bytes_sent", "Tensor bytes peers pulled from this task", labels=["peer"])
        for peer, n in sorted(server.service.bytes_sent_to.items()):
            sent.add_metric([peer], n)
        yield sent
        received = CounterMetricFamily("flowstack_bytes_received", "Tensor bytes this task pulled from a peer",
                                       labels=["peer"])
        errors = CounterMetricFamily("flowstack_rpc_errors", "Failed calls to a peer, by gRPC status",
                                     labels=["peer", "code"])
        for peer, client in server.peers().items():
            received.add_metric([peer], client.bytes_received)
            for code, n in sorted(client.rpc_errors.items()):
                errors.add_metric([peer, code], n)
        yield received
        yield errors
        restarts = CounterMetricFamily("flowstack_peer_restarts", "Restarts of a peer this task noticed",
                                       labels=["peer"])
        for peer, n in sorted(server.peer_restarts.items()):
            restarts.add_metric([peer], n)
        yield restarts
        yield GaugeMetricFamily("flowstack_task_restarts", "How often a supervisor restarted this task",
                                value=self.metrics.restarts)
