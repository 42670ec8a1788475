"""Failure detection: grpc.health.v1, peer watching, job ids, incarnations, bad TF_CONFIG cases, /metrics."""

from __future__ import annotations

import time
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import trainer as T
from trainer.distributed.errors import DistributedError, UnavailableError, UnknownTaskError
from trainer.distributed.server import Server

from .conftest import make_cluster
from .test_runtime import build_regression


@pytest.fixture
def servers():
    started: list[Server] = []

    def start(cluster, job, index=0, **kw):
        kw.setdefault("timeout", 10.0)
        kw.setdefault("startup_timeout", 5.0)
        s = Server(cluster, job, index, **kw)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop(grace=0.1)


def test_every_task_answers_the_standard_grpc_health_service(servers):
    cluster = make_cluster()
    servers(cluster, "ps")
    with grpc.insecure_channel(cluster["ps"][0]) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "flowstack.distributed.Task"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_a_task_that_never_comes_up_is_named_with_its_address(servers):
    cluster = make_cluster(ps=1, workers=1)  # nothing listens on the PS's port
    worker = servers(cluster, "worker", startup_timeout=1.0)
    g, m = build_regression("/job:ps/task:0")
    t0 = time.monotonic()
    with pytest.raises(UnavailableError, match=rf"/job:ps/task:0 at {cluster['ps'][0]} did not answer within 1 s"):
        T.Session(g, target=worker.target).run(m["init"])
    assert time.monotonic() - t0 < 5


def test_two_tasks_claiming_the_same_index_the_second_is_refused(servers):
    cluster = make_cluster()
    servers(cluster, "worker", 0)
    with pytest.raises(DistributedError, match=rf"/job:worker/task:0 cannot listen on {cluster['worker'][0]}: the port "
                                               "is taken \\(another process claiming the same task index"):
        Server(cluster, "worker", 0)


def test_a_task_of_another_job_is_refused_with_its_name_and_address(servers):
    cluster = make_cluster()
    servers(cluster, "ps", job_id="job-a")
    worker = servers(cluster, "worker", job_id="job-b")
    g, m = build_regression("/job:ps/task:0")
    with pytest.raises(UnknownTaskError, match=rf"/job:ps/task:0 \(job 'job-a'\) refused a request from "
                                               rf"/job:worker/task:0 at {cluster['worker'][0]} of another job, 'job-b'"
                                               rf".*\(asked at {cluster['ps'][0]}\)"):
        T.Session(g, target=worker.target).run(m["init"])


def test_the_job_id_comes_from_the_environment_or_the_cluster(monkeypatch):
    from trainer.distributed.cluster import ClusterSpec, job_id_of

    spec = ClusterSpec(make_cluster())
    monkeypatch.delenv("FLOWSTACK_JOB_ID", raising=False)
    assert job_id_of(spec) == job_id_of(ClusterSpec(spec.as_dict())) and job_id_of(spec).startswith("cluster-")
    assert job_id_of(spec, {"FLOWSTACK_JOB_ID": "tfjob-7"}) == "tfjob-7"


def test_a_hung_peer_fails_the_waiting_step_within_the_watch_interval(servers):
    cluster = make_cluster()
    ps = servers(cluster, "ps")
    worker = servers(cluster, "worker", watch_interval=0.2)
    peer = worker.peer("/job:ps/task:0")
    peer.wait_ready(5.0)
    pending = peer.start_recv(step_id=1, key="never-sent", timeout=30.0)
    ps.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)  # as a hung task looks to its peers
    t0 = time.monotonic()
    with pytest.raises(UnavailableError, match="/job:ps/task:0 at .* stopped answering health checks during Recv"):
        pending.result()
    assert time.monotonic() - t0 < 3
    ps.health.set("", health_pb2.HealthCheckResponse.SERVING)
    deadline = time.monotonic() + 5
    while peer.down_reason is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert peer.down_reason is None  # back up: watched as alive again


def test_a_restarted_sender_is_recognised_by_its_new_incarnation(servers):
    cluster = make_cluster()
    ps = servers(cluster, "ps")
    first = Server(cluster, "worker", 0, timeout=5.0)
    first.peer("/job:ps/task:0").wait_ready(5.0)
    ps.peer("/job:worker/task:0").wait_ready(5.0)
    first.stop(grace=0.1)
    second = servers(cluster, "worker", 0)
    second.peer("/job:ps/task:0").health()
    assert ps.peer_restarts["/job:worker/task:0"] == 1
    assert ps.peer("/job:worker/task:0").incarnation == second.service.incarnation
    ps.peer("/job:worker/task:0").health()  # addressed to the new incarnation: accepted


def test_a_restarted_peer_is_reached_at_once_though_calls_to_it_failed_while_it_was_down(servers):
    cluster = make_cluster()
    ps = servers(cluster, "ps")
    first = Server(cluster, "worker", 0, timeout=5.0)
    first.peer("/job:ps/task:0").wait_ready(5.0)
    to_worker = ps.peer("/job:worker/task:0")
    to_worker.wait_ready(5.0)
    first.stop(grace=0.1)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:  # refused connections put the channel into backoff
        with pytest.raises(UnavailableError):
            to_worker.health(timeout=0.2)
        time.sleep(0.1)
    second = servers(cluster, "worker", 0)
    second.peer("/job:ps/task:0").health()  # the new incarnation calls the PS first
    assert to_worker.health(timeout=2.0)["incarnation"] == second.service.incarnation


def test_metrics_are_served_for_prometheus(servers):
    cluster = make_cluster()
    ps = servers(cluster, "ps")
    worker = servers(cluster, "worker", metrics_port=0)
    g, m = build_regression("/job:ps/task:0")
    sess = T.Session(g, target=worker.target)
    sess.run(m["init"])
    for seconds in (0.01, 0.02, 0.03):
        sess.run(m["w"])
        worker.metrics.observe_step(seconds)
    body = urllib.request.urlopen(f"http://127.0.0.1:{worker.metrics_port}/metrics", timeout=5).read().decode()
    assert "flowstack_steps_total 3.0" in body
    assert 'flowstack_step_time_seconds{quantile="0.50"} 0.02' in body
    assert 'flowstack_bytes_received_total{peer="/job:ps/task:0"}' in body
    assert "flowstack_task_restarts 0.0" in body
    assert ps.service.bytes_sent_to["/job:worker/task:0"] > 0
    stats = ps.peer("/job:worker/task:0").step_stats(timeout=5)
    assert stats["steps"] == 3 and stats["p50_ms"] == pytest.approx(20.0)


def test_the_chief_reports_stragglers_and_writes_step_scalars(servers, tmp_path, caplog):
    import logging

    from .test_runtime import data

    cluster = make_cluster(ps=1, workers=2)
    servers(cluster, "ps")
    chief = servers(cluster, "worker", 0)
    other = servers(cluster, "worker", 1)
    for seconds in (0.010, 0.012, 0.050):
        other.metrics.observe_step(seconds)  # worker 1's steps, as its own session would record them
    g, m = build_regression("/job:ps/task:0")
    xs, ys = data()
    caplog.set_level(logging.INFO, logger="trainer.monitored")
    with T.train.MonitoredTrainingSession(master=chief.target, is_chief=True, graph=g, checkpoint_dir=str(tmp_path),
                                          report_steps=2, save_secs=None, max_steps=4) as sess:
        while not sess.should_stop():
            sess.run(m["train"], {m["x"]: xs, m["y"]: ys})
    reports = [r.getMessage() for r in caplog.records if "straggler report" in r.getMessage()]
    assert len(reports) == 2, reports
    assert "/job:worker/task:1 p50 12.0 p90 42.4 p99 49.2 ms" in reports[0]
    assert "slowest /job:worker/task:1" in reports[0] or "slowest /job:worker/task:0" in reports[0]
    assert chief.metrics.steps >= 4  # one record per MonitoredTrainingSession.run
    events = b"".join(p.read_bytes() for p in tmp_path.glob("events.out.tfevents.*"))
    assert b"flowstack/p50_ms" in events and b"flowstack/steps_per_sec" in events
