"""Prometheus text rendering, and bound series agreeing with label-keyword updates."""

from __future__ import annotations

from serving.metrics import Counter, Histogram


def test_bound_counter_series_is_the_keyword_series():
    counter = Counter("requests_total", "Requests.")
    counter.inc(model="m", status="ok")
    series = counter.labels(status="ok", model="m")  # label order does not matter
    series.inc()
    series.inc(2)
    assert counter.value(model="m", status="ok") == 4
    assert 'requests_total{model="m",status="ok"} 4' in list(counter.render())


def test_histogram_observe_many_matches_single_observations():
    one, many = Histogram("h", "H.", (0.1, 1.0)), Histogram("h", "H.", (0.1, 1.0))
    for value in (0.05, 0.5, 2.0):
        one.observe(value, model="m")
    many.labels(model="m").observe_many([0.05, 0.5, 2.0])
    assert list(one.render()) == list(many.render())
    assert 'h_bucket{model="m",le="1"} 2' in list(many.render())
    assert many.count(model="m") == 3


def test_an_unused_bound_series_is_not_rendered():
    histogram = Histogram("h", "H.", (1.0,))
    histogram.labels(model="m")
    assert list(histogram.render()) == ["# HELP h H.", "# TYPE h histogram"]


def test_keep_versions_drops_retired_series_and_bound_series_come_back():
    from serving.metrics import ServingMetrics

    metrics = ServingMetrics()
    old = metrics.queue_seconds.labels(model="m", version="1")
    old.observe(0.1)
    metrics.queue_seconds.labels(model="m", version="2").observe(0.1)
    metrics.requests.inc(model="m", version="1", protocol="http", status="success")
    metrics.requests.inc(model="", version="", protocol="http", status="ModelNotFound")
    metrics.keep_versions({("m", "2")})
    page = metrics.render()
    assert 'version="1"' not in page and 'version="2"' in page and 'status="ModelNotFound"' in page
    old.observe(0.2)  # a bound series observed again after its drop starts a fresh series
    assert metrics.queue_seconds.count(model="m", version="1") == 1
