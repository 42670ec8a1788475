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
