"""The /metrics families: bound series agree with label-keyword updates, and retired versions go."""

from __future__ import annotations

import pytest

from serving.metrics import ServingMetrics


def test_bound_counter_series_is_the_keyword_series():
    metrics = ServingMetrics()
    metrics.load_failures.inc(model="m")
    series = metrics.load_failures.labels(model="m")
    series.inc()
    series.inc(2)
    assert metrics.registry.get_sample_value("flowstack_model_load_failures_total", {"model": "m"}) == 4
    assert 'flowstack_model_load_failures_total{model="m"} 4.0' in metrics.render()


def test_labels_other_than_the_family_s_are_refused_naming_them():
    with pytest.raises(ValueError, match="flowstack_batch_size.*'model', 'version'"):
        ServingMetrics().batch_size.labels(model="m")


def test_histogram_observe_many_matches_single_observations():
    one, many = ServingMetrics(), ServingMetrics()
    for value in (0.05, 0.5, 2.0):
        one.compute_seconds.observe(value, model="m", version="1")
    many.compute_seconds.labels(model="m", version="1").observe_many([0.05, 0.5, 2.0])

    def page(metrics):
        return [line for line in metrics.render().splitlines() if "_created" not in line]

    assert page(one) == page(many)
    assert 'flowstack_compute_duration_seconds_bucket{le="1.0",model="m",version="1"} 2.0' in page(many)
    assert many.registry.get_sample_value("flowstack_compute_duration_seconds_count", {"model": "m", "version": "1"}) == 3


def test_an_unused_bound_series_is_not_rendered():
    metrics = ServingMetrics()
    metrics.queue_seconds.labels(model="m", version="1")
    assert 'model="m"' not in metrics.render()


def test_gauges_are_read_when_scraped():
    metrics = ServingMetrics()
    depth = {(("model", "m"), ("version", "1")): 3.0}
    metrics.add_gauge("flowstack_queue_depth", "Queued requests.", lambda: depth)
    assert 'flowstack_queue_depth{model="m",version="1"} 3.0' in metrics.render()
    depth[(("model", "m"), ("version", "1"))] = 0.0
    assert 'flowstack_queue_depth{model="m",version="1"} 0.0' in metrics.render()


def test_keep_versions_drops_retired_series_and_bound_series_come_back():
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
    count = metrics.registry.get_sample_value("flowstack_queue_duration_seconds_count", {"model": "m", "version": "1"})
    assert count == 1
