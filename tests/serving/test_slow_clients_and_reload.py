"""Slow and stuck clients (slowloris, silent connections, clients that stop reading), hot reload
racing a writer (half-written and unreadable versions, symlinks out of the repository, directories
vanishing mid-scan), and /metrics staying consistent through errors. Real servers on loopback."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time

import grpc
import httpx
import numpy as np
import pytest

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from serving import ModelRepository
from serving.backends import EdgeRuntimeBackend
from serving.config import ModelConfig
from serving.metrics import ServingMetrics
from tests.serving.conftest import add_version, grpc_infer_codes, running_server, write_passthrough_model

X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
GOOD = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": X.ravel().tolist()}]}
GOOD_BODY = json.dumps(GOOD).encode()


def check_good(url: str, mlp) -> None:
    r = httpx.post(f"{url}/v2/models/mlp/infer", json=GOOD, timeout=5)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["outputs"][0]["data"]).reshape(2, 3), mlp(X), rtol=1e-5)


def read_until_closed(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes (or ``timeout``), and when it closed."""
    sock.settimeout(timeout)
    start, data = time.monotonic(), b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except (TimeoutError, socket.timeout):
        return data, float("inf")
    except ConnectionResetError:
        pass
    return data, time.monotonic() - start


def connect(address: str, **options) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    for option, value in options.items():
        sock.setsockopt(socket.SOL_SOCKET, getattr(socket, option), value)
    sock.connect((host, int(port)))
    return sock


# -- slow and stuck HTTP clients -------------------------------------------------------------------
def test_head_sent_byte_by_byte_gets_408_while_others_are_served(repo, mlp):
    with running_server(repo, request_timeout_s=1.0, keep_alive_timeout_s=0.3, grpc_port=None) as server:
        head = b"POST /v2/models/mlp/infer HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        sock = connect(server.http_address)
        started = time.monotonic()
        for byte in head[:40]:  # a byte every 50 ms: each one used to keep the connection alive forever
            sock.sendall(bytes([byte]))
            time.sleep(0.05)
            if time.monotonic() - started > 0.5:
                break
        check_good(server.http_url, mlp)
        data, closed_after = read_until_closed(sock, timeout=3)
        sock.close()
        assert time.monotonic() - started < 3, "the slow head was never cut off"
        assert data.startswith(b"HTTP/1.1 408 "), data
        assert b"application/json" in data and b"not received whole within 1.0 s" in data
        check_good(server.http_url, mlp)


def test_body_sent_slowly_or_never_gets_408_and_frees_the_request(repo, mlp):
    with running_server(repo, request_timeout_s=1.0, keep_alive_timeout_s=0.3, grpc_port=None) as server:
        stuck = []
        for _ in range(3):
            sock = connect(server.http_address)
            sock.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n" % len(GOOD_BODY) + GOOD_BODY[:10])
            stuck.append(sock)
        check_good(server.http_url, mlp)
        for sock in stuck:
            data, closed_after = read_until_closed(sock, timeout=4)
            sock.close()
            assert closed_after < 4, "a request whose body never came held its connection"
            assert data.startswith(b"HTTP/1.1 408 "), data
            assert json.loads(data.split(b"\r\n\r\n", 1)[1])["error"].startswith("request not received whole")
        check_good(server.http_url, mlp)


def test_an_endless_header_gets_431(repo, mlp):
    """httptools has no head limit: one endless header grew without bound (and, copied whole for
    each piece, took the event loop's time) until the request timeout."""
    with running_server(repo, request_timeout_s=10.0, grpc_port=None) as server:
        sock = connect(server.http_address)
        sock.sendall(b"GET /v2 HTTP/1.1\r\nhost: x\r\nx-endless: ")
        for _ in range(5):  # 80 KiB, in pieces, then waiting: nothing unread left for a reset to lose the answer
            sock.sendall(b"a" * 16384)
            time.sleep(0.05)
        data, closed_after = read_until_closed(sock, timeout=5)
        sock.close()
        assert data.startswith(b"HTTP/1.1 431 "), data[:200]
        assert b"request head is over 65536 bytes" in data
        check_good(server.http_url, mlp)
        r = httpx.get(f"{server.http_url}/v2", headers={"x-long": "a" * 40_000}, timeout=5)
        assert r.status_code == 200  # a long head within the limit is fine
        # A head over the limit arriving whole, in one write or completed by a second, and one
        # whose first part alone is within the limit: each refused, with no answer of its request's;
        # so is one after a request answered on the same connection, or begun in the same write.
        big = b"GET /v2 HTTP/1.1\r\nhost: x\r\nx-big: "
        small = b"GET /v2 HTTP/1.1\r\nhost: x\r\n\r\n"
        cases = [  # (writes, requests answered before the 431)
            ([big + b"a" * 100_000], 0),
            ([big + b"a" * 60_000, b"a" * 40_000], 0),
            ([small, big + b"a" * 100_000], 1),
            ([small + big + b"a" * 60_000, b"a" * 40_000], 1),
        ]
        for writes, answered in cases:
            sock = connect(server.http_address)
            writes[-1] += b"\r\n\r\n"
            for part in writes:
                sock.sendall(part)
                time.sleep(0.05)
            data, _ = read_until_closed(sock, timeout=5)
            sock.close()
            assert data.count(b"HTTP/1.1 200 ") == answered and data.count(b"HTTP/1.1 431 ") == 1, data[:200]
            assert data.count(b"HTTP/1.1") == answered + 1, data[:200]
        check_good(server.http_url, mlp)


def test_a_request_arriving_whole_in_time_is_answered_after_the_timeout(tmp_path, mlp):
    """The timeout bounds receiving, not computing: a slow model's answer is not cut off."""
    add_version(tmp_path, "mlp", 1, mlp, {"max_batch_size": 2, "warmup": []})

    class Slow(EdgeRuntimeBackend):
        def infer_batch(self, requests):
            time.sleep(0.8)
            return super().infer_batch(requests)

    with running_server(tmp_path, request_timeout_s=0.5, keep_alive_timeout_s=0.2, backend_factory=Slow, grpc_port=None) as server:
        with httpx.Client(base_url=server.http_url, timeout=5) as client:
            for _ in range(2):  # the second on the kept-alive connection
                r = client.post("/v2/models/mlp/infer", json=GOOD)
                assert r.status_code == 200, r.text


def test_a_connection_that_sends_nothing_is_closed(repo, mlp):
    with running_server(repo, keep_alive_timeout_s=0.5, grpc_port=None) as server:
        silent = [connect(server.http_address) for _ in range(5)]
        check_good(server.http_url, mlp)
        for sock in silent:
            data, closed_after = read_until_closed(sock, timeout=3)
            sock.close()
            assert data == b"" and closed_after < 3, "a connection that never sent a byte was held open"


def test_a_client_that_stops_reading_is_cut_off(tmp_path):
    """A response the client does not read (socket buffers full) used to hold the connection and
    its buffered bytes forever: the keep-alive close waits for the buffer to drain."""
    from onnx import TensorProto

    width = 1 << 22  # one row: 16 MiB in, 16 MiB out, more than the socket buffers hold
    write_passthrough_model(tmp_path / "echo" / "1" / "model.flow", {"x": (TensorProto.FLOAT, ["n", width])}, {"y": "x"})
    (tmp_path / "echo" / "config.json").write_text(json.dumps({"max_batch_size": 1, "warmup": []}))
    with running_server(tmp_path, request_timeout_s=1.0, keep_alive_timeout_s=30, grpc_port=None) as server:
        header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, width],
                                         "parameters": {"binary_data_size": 4 * width}}],
                             "parameters": {"binary_data_output": True}}).encode()
        body = header + np.ones(width, np.float32).tobytes()
        sock = connect(server.http_address, SO_RCVBUF=4096)
        sock.sendall(b"POST /v2/models/echo/infer HTTP/1.1\r\nhost: x\r\ninference-header-content-length: %d\r\n"
                     b"content-length: %d\r\n\r\n" % (len(header), len(body)) + body)
        time.sleep(3)  # not reading
        data, _ = read_until_closed(sock, timeout=5)
        sock.close()
        assert len(data) < 4 * width, "the server kept the stalled response for a client that read nothing"
        r = httpx.get(f"{server.http_url}/v2/health/ready", timeout=5)
        assert r.status_code == 200


# -- gRPC --------------------------------------------------------------------------------------
def test_grpc_silent_connection_is_closed_and_others_are_served(repo, mlp):
    with running_server(repo, request_timeout_s=1.0, http_port=None) as server:
        silent = connect(server.grpc_address)  # never sends the HTTP/2 preface
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="mlp")
        request.inputs.add(name="x", datatype="FP32", shape=[2, 4])
        request.raw_input_contents.append(X.tobytes())
        reply = stub.ModelInfer(request, timeout=5)
        np.testing.assert_allclose(np.frombuffer(reply.raw_output_contents[0], "<f4").reshape(2, 3), mlp(X), rtol=1e-5)
        data, closed_after = read_until_closed(silent, timeout=6)
        silent.close()
        assert closed_after < 6, "a gRPC connection that never spoke HTTP/2 was held open (grpc's default is 120 s)"
        assert stub.ModelInfer(request, timeout=5).model_name == "mlp"
        channel.close()


def test_grpc_connection_options():
    from serving.grpc_server import GrpcSettings, connection_options

    options = dict(connection_options(GrpcSettings(idle_timeout_s=300, handshake_timeout_s=60)))
    assert options["grpc.max_connection_idle_ms"] == 300_000
    assert options["grpc.server_handshake_timeout_ms"] == 60_000
    assert options["grpc.keepalive_time_ms"] < 2 * 3600 * 1000  # grpc's default would hold a dead peer for 2 h
    assert "grpc.max_connection_idle_ms" not in dict(connection_options(GrpcSettings(idle_timeout_s=None)))


def test_cli_flags_reach_the_server_options(tmp_path, monkeypatch):
    from flowstack_cli import serve

    seen = {}
    monkeypatch.setattr("serving.server.serve", lambda options: seen.setdefault("options", options) and 0)
    monkeypatch.setattr("serving.server.configure_logging", lambda level: None)
    serve.main(["--model-repository", str(tmp_path), "--request-timeout", "7", "--keep-alive-timeout", "2",
                "--grpc-idle-timeout", "0"])
    options = seen["options"]
    assert (options.request_timeout_s, options.keep_alive_timeout_s, options.grpc_idle_timeout_s) == (7, 2, None)


# -- hot reload races -------------------------------------------------------------------------
class NeedsReadPermission(EdgeRuntimeBackend):
    """Refuses a file without read permission, as the edge runtime does for any user but root
    (these tests may run as root, who reads it anyway)."""

    def __init__(self, path, device="cpu"):
        if not os.stat(path).st_mode & 0o444:
            raise PermissionError(13, "Permission denied", str(path))
        super().__init__(path, device)


def test_version_failing_for_permissions_is_retried_once_they_are_fixed(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp)
    path = add_version(tmp_path, "mlp", 2, mlp_v2)
    os.chmod(path, 0)
    repository = ModelRepository(tmp_path, backend_factory=NeedsReadPermission)
    try:
        repository.poll()
        assert repository.versions("mlp") == [1]
        (status,) = [s for s in repository.statuses("mlp") if s.version == 2]
        assert status.state == "UNAVAILABLE" and "PermissionError" in status.reason
        repository.poll()  # unchanged: not tried again
        assert repository.versions("mlp") == [1]
        os.chmod(path, 0o644)  # changes only the file's ctime
        repository.poll()
        assert repository.versions("mlp") == [2]
    finally:
        repository.close()


def test_half_written_version_is_reported_then_served_once_complete(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp)
    whole = mlp_v2.write(tmp_path / ".aside" / "model.flow").read_bytes()
    repository = ModelRepository(tmp_path)
    try:
        repository.poll()
        (tmp_path / "mlp" / "2").mkdir()  # the directory appears before its file
        repository.poll()
        assert repository.versions("mlp") == [1]
        target = tmp_path / "mlp" / "2" / "model.flow"
        target.write_bytes(whole[: len(whole) // 2])
        repository.poll()
        assert repository.versions("mlp") == [1]
        assert any(s.version == 2 and "failed to load" in s.reason for s in repository.statuses("mlp"))
        with target.open("ab") as f:
            f.write(whole[len(whole) // 2 :])
        repository.poll()
        assert repository.versions("mlp") == [2]
        assert [s.state for s in repository.statuses("mlp")] == ["UNAVAILABLE", "READY"]
    finally:
        repository.close()


def test_version_symlinked_outside_the_repository_is_reported(tmp_path, mlp, mlp_v2):
    root = tmp_path / "models"
    add_version(root, "mlp", 1, mlp)
    mlp_v2.write(tmp_path / "elsewhere" / "model.flow")
    (root / "mlp" / "2").symlink_to(tmp_path / "elsewhere")
    repository = ModelRepository(root)
    try:
        repository.poll()
        assert repository.versions("mlp") == [1]
        (status,) = [s for s in repository.statuses("mlp") if s.version == 2]
        assert status.state == "UNAVAILABLE" and "outside the model repository" in status.reason
        assert any(row["version"] == "2" and "outside" in row["reason"] for row in repository.index())
    finally:
        repository.close()


def test_a_model_directory_vanishing_mid_scan_does_not_stop_the_scan(tmp_path, mlp, monkeypatch):
    """A model directory deleted (or made unreadable) while the poller scans it used to raise out of
    the scan: the models after it were never loaded and a first scan never finished (never ready)."""
    for name in ("a", "b", "c"):
        add_version(tmp_path, name, 1, mlp)
    from_file = ModelConfig.from_file.__func__

    def deleted_while_read(cls, path, *args):  # b vanishes between the scan's listing and its reading
        if path.parent.name == "b" and path.parent.exists():
            shutil.rmtree(path.parent)
        return from_file(cls, path, *args)

    monkeypatch.setattr(ModelConfig, "from_file", classmethod(deleted_while_read))
    repository = ModelRepository(tmp_path)
    try:
        repository.start()
        assert repository.wait_scanned(20), "the first scan never finished"
        assert repository.versions("a") == [1] and repository.versions("c") == [1]
        assert any(row["name"] == "b" and "could not read" in row["reason"] for row in repository.index())
        repository.poll()  # the next scan finds it gone
        assert repository.model_names() == ["a", "c"] and repository.ready()
    finally:
        repository.close()


def test_config_rewritten_mid_scan_and_directory_recreated_under_load(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp, {"max_batch_size": 16})
    with running_server(tmp_path, poll_interval_s=0.05, grpc_port=None) as server:
        failures, done = [], threading.Event()

        def load():
            with httpx.Client(base_url=server.http_url, timeout=10) as client:
                while not done.is_set():
                    r = client.post("/v2/models/mlp/infer", json=GOOD)
                    if r.status_code != 200:
                        failures.append(r.text)

        thread = threading.Thread(target=load, daemon=True)
        thread.start()
        try:
            config = tmp_path / "mlp" / "config.json"
            for text in ('{"max_batch_', "", '{"max_batch_size": 8}'):  # a writer caught mid-write, twice
                config.write_text(text)
                time.sleep(0.2)
            # The last write is picked up by a later scan: waited for, not assumed done within
            # 0.2 s (on a loaded machine a scan, reloading the model, took longer: a flaky failure).
            deadline = time.time() + 20
            while time.time() < deadline and (server.repository._models["mlp"].error
                                               or server.repository.get("mlp").max_batch_size != 8):
                time.sleep(0.05)
            assert server.repository.versions("mlp") == [1]
            assert not server.repository._models["mlp"].error
            assert server.repository.get("mlp").max_batch_size == 8
            add_version(tmp_path, "mlp", 2, mlp_v2)
            deadline = time.time() + 20
            while server.repository.versions("mlp") != [2] and time.time() < deadline:
                time.sleep(0.05)
            assert server.repository.versions("mlp") == [2]
        finally:
            done.set()
            thread.join(20)
        assert failures == []


# -- metrics under errors ---------------------------------------------------------------------
SAMPLE = re.compile(
    r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)'
    r'(?:\{(?P<labels>[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*)\})?'
    r' (?P<value>[-+]?(?:[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|Inf|NaN))$'
)
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')


def parse_metrics(text: str) -> list[tuple[str, dict, float]]:
    """The samples of a Prometheus text page, asserting every line is well formed."""
    assert text.endswith("\n")
    samples, typed = [], set()
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            if parts[1] == "TYPE":
                assert parts[2] not in typed and parts[3] in ("counter", "gauge", "histogram"), line
                typed.add(parts[2])
            continue
        match = SAMPLE.match(line)
        assert match, f"malformed metrics line {line!r}"
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in LABEL.findall(match["labels"] or "")}
        samples.append((match["name"], labels, float(match["value"])))
    return samples


def test_label_values_are_escaped():
    metrics = ServingMetrics()
    odd = 'a"b\\c\nd'
    metrics.load_failures.inc(model=odd)
    samples = parse_metrics(metrics.render())
    assert ("flowstack_model_load_failures_total", {"model": odd}, 1.0) in samples


def test_metrics_stay_consistent_through_overload_timeouts_and_cancellations(tmp_path, mlp):
    add_version(tmp_path, "mlp", 1, mlp, {"max_batch_size": 2, "max_queue_size": 2, "warmup": []})

    class Slow(EdgeRuntimeBackend):
        def infer_batch(self, requests):
            time.sleep(0.3)
            return super().infer_batch(requests)

    with running_server(tmp_path, backend_factory=Slow) as server:
        channel = grpc.insecure_channel(server.grpc_address)
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="mlp")
        request.inputs.add(name="x", datatype="FP32", shape=[2, 4])
        request.raw_input_contents.append(X.tobytes())
        # Deadlines that pass while the request runs: the server-side task is cancelled.
        codes = [code for code, _ in grpc_infer_codes(stub, request, 6, timeout=0.1)]
        assert grpc.StatusCode.DEADLINE_EXCEEDED in codes
        with httpx.Client(base_url=server.http_url, timeout=10) as client:
            threads = [threading.Thread(target=client.post, args=("/v2/models/mlp/infer",), kwargs={"json": GOOD})
                       for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(20)
            assert client.post("/v2/models/ghost/infer", json=GOOD).status_code == 404
            assert client.post("/v2/models/mlp/infer", json={"inputs": [{**GOOD["inputs"][0], "shape": [8]}]}).status_code == 400
            assert client.post("/v2/models/mlp/infer", content=b'{"inputs": [').status_code == 400
            assert client.post("/v1/models/mlp:predict", content=b"[1]").status_code == 400
            bad = pb.ModelInferRequest(model_name="mlp")
            bad.inputs.add(name="x", datatype="FP32", shape=[2, 4])
            bad.raw_input_contents.append(b"\x00")
            with pytest.raises(grpc.RpcError):
                stub.ModelInfer(bad, timeout=5)
            time.sleep(1.0)  # let the cancelled ones finish computing
            samples = parse_metrics(client.get("/metrics").text)
        channel.close()

        def values(name: str, **match) -> list[tuple[dict, float]]:
            return [(labels, v) for n, labels, v in samples if n == name and all(labels.get(k) == w for k, w in match.items())]

        requests = values("flowstack_inference_requests_total", model="mlp")
        by_status: dict[str, float] = {}
        for labels, v in requests:
            by_status[labels["status"]] = by_status.get(labels["status"], 0) + v
        grpc_counted = sum(v for labels, v in requests if labels["protocol"] == "grpc")
        assert grpc_counted == 6, requests
        grpc_success = sum(v for labels, v in requests if labels["protocol"] == "grpc" and labels["status"] == "success")
        assert grpc_success == codes.count(grpc.StatusCode.OK), (requests, codes)  # a cancelled call is no success
        assert sum(by_status.values()) == 6 + 8 + 1
        assert "Overloaded" in by_status and "InvalidRequest" in by_status
        (count,) = [v for _, v in values("flowstack_request_duration_seconds_count", model="mlp")]
        assert count == sum(by_status.values())  # every counted request timed once
        buckets = [v for labels, v in values("flowstack_request_duration_seconds_bucket", model="mlp") if labels["le"] == "+Inf"]
        assert buckets == [count]
        assert values("flowstack_inference_requests_total", model="", status="ModelNotFound")
        refused = {labels["protocol"]: v for labels, v in values("flowstack_inference_requests_total", model="", status="InvalidRequest")}
        assert refused == {"http": 1, "tfserving": 1, "grpc": 1}  # bodies that never decoded are counted too
        assert all(v == 0 for _, v in values("flowstack_queue_depth"))
        assert values("flowstack_queue_depth", model="mlp")
