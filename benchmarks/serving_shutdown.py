"""SIGTERM under load: does ``flowstack serve`` answer every request a client has sent?

Each run starts a real server process, puts it under 32 clients (by default 18 HTTP clients on
keep-alive connections, 6 HTTP clients opening a new connection per request, 8 gRPC clients,
each on its own channel) and sends SIGTERM. It then checks what Kubernetes expects of a server
shutting down: readiness false at once, every request a client sent answered (and answered
correctly), and the process exiting 0 within ``--drain-timeout``. A client whose connection is
refused once the listener has closed never sent its request: that is counted apart, not as lost.

    python benchmarks/serving_shutdown.py                 # 10 runs
    python benchmarks/serving_shutdown.py --runs 3 --lame-duck 0.5
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
IN_DIM, HIDDEN, OUT_DIM = 16, 64, 4

# gRPC details meaning the call never reached a server: the connection could not be made.
_GRPC_NOT_CONNECTED = ("failed to connect", "connection refused", "connections to all backends failing", "Connection refused")


@dataclass
class ShutdownRun:
    """What one SIGTERM under load came to."""

    answered: int = 0  # correct answers
    answered_after_sigterm: int = 0
    wrong: list[str] = field(default_factory=list)  # answers with the wrong values, or an error status
    lost: list[str] = field(default_factory=list)  # sent, and no answer came
    refused: int = 0  # not connected once the listener closed: never sent
    exit_code: int | None = None
    exit_seconds: float = 0.0  # from SIGTERM to exit
    not_ready_seconds: float | None = None  # from SIGTERM to the first 503 from /v2/health/ready
    grpc_not_ready: bool = False  # gRPC ServerReady said false during the lame duck
    drain_timeout_s: float = 0.0

    @property
    def ok(self) -> bool:
        return (not self.wrong and not self.lost and self.exit_code == 0 and self.exit_seconds <= self.drain_timeout_s + 1.0
                and self.not_ready_seconds is not None)


def write_model(path: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    sys.path.insert(0, str(ROOT))
    from exporter.onnx_import import convert_onnx

    rng = np.random.default_rng(0)
    weights = {"w1": rng.standard_normal((IN_DIM, HIDDEN)).astype(np.float32),
               "b1": rng.standard_normal(HIDDEN).astype(np.float32),
               "w2": rng.standard_normal((HIDDEN, OUT_DIM)).astype(np.float32)}
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("MatMul", ["r", "w2"], ["y"])],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", IN_DIM])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", OUT_DIM])],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def drain_and_close(stream) -> None:
    """Read the server's log to its end (a full pipe would stall the server), then close it."""
    with stream:
        for _ in stream:
            pass


def start_server(repo: Path, drain_timeout: float, lame_duck: float) -> tuple[subprocess.Popen, int, int]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(repo), "--http-port", "0",
         "--grpc-port", "0", "--poll-interval", "0", "--drain-timeout", str(drain_timeout), "--lame-duck", str(lame_duck)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )
    deadline = time.monotonic() + 60
    for line in process.stderr:
        try:
            event = json.loads(line)
        except ValueError:
            event = {}
        if event.get("event") == "serving":
            threading.Thread(target=drain_and_close, args=(process.stderr,), daemon=True).start()
            return process, event["http_port"], event["grpc_port"]
        if time.monotonic() > deadline:
            break
    process.kill()
    raise RuntimeError("server did not start")


class Clients:
    """Client threads sending requests until stopped, each outcome recorded in a ``ShutdownRun``."""

    def __init__(self, run: ShutdownRun, http_port: int, grpc_port: int, x: np.ndarray, expected: np.ndarray,
                 keep_alive: int, new_connection: int, grpc_clients: int):
        self.run, self.x, self.expected = run, x, expected
        self.url, self.grpc_address = f"http://127.0.0.1:{http_port}", f"127.0.0.1:{grpc_port}"
        self.stop = threading.Event()
        self.signalled_at: float | None = None
        self.lock = threading.Lock()
        self.body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape),
                                            "data": x.ravel().tolist()}]}).encode()
        self.threads = ([threading.Thread(target=self._http, args=(True,), daemon=True) for _ in range(keep_alive)]
                        + [threading.Thread(target=self._http, args=(False,), daemon=True) for _ in range(new_connection)]
                        + [threading.Thread(target=self._grpc, daemon=True) for _ in range(grpc_clients)])

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def _record(self, sent_at: float, outcome: str, detail: str = "") -> None:
        with self.lock:
            run = self.run
            if outcome == "answered":
                run.answered += 1
                if self.signalled_at is not None and sent_at >= self.signalled_at:
                    run.answered_after_sigterm += 1
            elif outcome == "refused":
                run.refused += 1
            else:
                getattr(run, outcome).append(detail)

    def _check(self, sent_at: float, values: np.ndarray) -> None:
        if np.allclose(values, self.expected, rtol=1e-4, atol=1e-5):
            self._record(sent_at, "answered")
        else:
            self._record(sent_at, "wrong", f"wrong values {values.ravel()[:4]}")

    def _http(self, keep_alive: bool) -> None:
        import httpx

        limits = httpx.Limits(max_keepalive_connections=None if keep_alive else 0)
        with httpx.Client(base_url=self.url, timeout=60, limits=limits) as client:
            while not self.stop.is_set():
                sent_at = time.monotonic()
                try:
                    response = client.post("/v2/models/mlp/infer", content=self.body)
                except (httpx.ConnectError, httpx.ConnectTimeout):
                    self._record(sent_at, "refused")
                    time.sleep(0.01)
                    continue
                except httpx.HTTPError as exc:
                    self._record(sent_at, "lost", f"http: {type(exc).__name__}: {exc}")
                    continue
                if response.status_code != 200:
                    self._record(sent_at, "wrong", f"http {response.status_code}: {response.text[:200]}")
                    continue
                output = response.json()["outputs"][0]
                self._check(sent_at, np.array(output["data"], np.float32).reshape(output["shape"]))

    def _grpc(self) -> None:
        import grpc

        sys.path.insert(0, str(ROOT))
        from schemas.proto import grpc_service_pb2 as pb
        from schemas.proto import grpc_service_pb2_grpc as pb_grpc

        request = pb.ModelInferRequest(model_name="mlp")
        request.inputs.add(name="x", datatype="FP32", shape=list(self.x.shape))
        request.raw_input_contents.append(self.x.astype("<f4").tobytes())
        with grpc.insecure_channel(self.grpc_address) as channel:
            stub = pb_grpc.GRPCInferenceServiceStub(channel)
            while not self.stop.is_set():
                sent_at = time.monotonic()
                try:
                    reply = stub.ModelInfer(request, timeout=60)
                except grpc.RpcError as exc:
                    details = exc.details() or ""
                    if exc.code() == grpc.StatusCode.UNAVAILABLE and any(s in details for s in _GRPC_NOT_CONNECTED):
                        self._record(sent_at, "refused")
                        time.sleep(0.01)
                    else:
                        self._record(sent_at, "lost", f"grpc {exc.code().name}: {details} (sent {sent_at - (self.signalled_at or 0):+.3f} s after SIGTERM, failed {time.monotonic() - (self.signalled_at or 0):+.3f})")
                    continue
                values = np.frombuffer(reply.raw_output_contents[0], "<f4").reshape(tuple(reply.outputs[0].shape))
                self._check(sent_at, values)


def probe_not_ready(run: ShutdownRun, http_port: int, grpc_port: int, signalled_at: float, timeout: float) -> None:
    """Poll readiness right after SIGTERM: when HTTP says 503, and whether gRPC says not ready."""
    import grpc
    import httpx

    from schemas.proto import grpc_service_pb2 as pb
    from schemas.proto import grpc_service_pb2_grpc as pb_grpc

    deadline = signalled_at + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{http_port}/v2/health/ready", timeout=5).status_code == 503:
                run.not_ready_seconds = time.monotonic() - signalled_at
                break
        except httpx.HTTPError:
            return  # already closed: the lame duck was shorter than this probe
        time.sleep(0.005)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            ready = pb_grpc.GRPCInferenceServiceStub(channel).ServerReady(pb.ServerReadyRequest(), timeout=5).ready
        run.grpc_not_ready = not ready
    except grpc.RpcError:
        pass


def sigterm_under_load(workdir: Path, *, drain_timeout: float = 10.0, lame_duck: float = 1.0, load_seconds: float = 1.0,
                       keep_alive: int = 18, new_connection: int = 6, grpc_clients: int = 8) -> ShutdownRun:
    """One run: a server under load, SIGTERM, and every client's outcome until the process exits."""
    sys.path.insert(0, str(ROOT))
    from edge_runtime import load

    repo = workdir / "models"
    model_path = repo / "mlp" / "1" / "model.flow"
    if not model_path.exists():
        write_model(model_path)
        (repo / "mlp" / "config.json").write_text(json.dumps({"max_batch_size": 16, "max_queue_delay_us": 2000}))
    x = np.linspace(-1, 1, 2 * IN_DIM, dtype=np.float32).reshape(2, IN_DIM)
    expected = load(str(model_path)).run({"x": x})["y"]
    run = ShutdownRun(drain_timeout_s=drain_timeout)
    process, http_port, grpc_port = start_server(repo, drain_timeout, lame_duck)
    clients = Clients(run, http_port, grpc_port, x, expected, keep_alive, new_connection, grpc_clients)
    try:
        import httpx

        deadline = time.monotonic() + 60
        while httpx.get(f"http://127.0.0.1:{http_port}/v2/health/ready", timeout=5).status_code != 200:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not become ready")
            time.sleep(0.05)
        clients.start()
        time.sleep(load_seconds)
        clients.signalled_at = signalled_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        probe_not_ready(run, http_port, grpc_port, signalled_at, timeout=min(lame_duck, 2.0))
        try:
            run.exit_code = process.wait(drain_timeout + 10)
        except subprocess.TimeoutExpired:
            run.exit_code = None
        run.exit_seconds = time.monotonic() - signalled_at
    finally:
        clients.join()
        if process.poll() is None:
            process.kill()
            process.wait(10)
        deadline = time.monotonic() + 10
        while not process.stderr.closed and time.monotonic() < deadline:  # the log reader finishes
            time.sleep(0.01)
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--drain-timeout", type=float, default=10.0)
    parser.add_argument("--lame-duck", type=float, default=1.0)
    parser.add_argument("--load-seconds", type=float, default=1.0, help="load before SIGTERM (default 1)")
    args = parser.parse_args()
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        print(f"32 clients (18 keep-alive HTTP, 6 new-connection HTTP, 8 gRPC), --drain-timeout {args.drain_timeout}, "
              f"--lame-duck {args.lame_duck}")
        print("run | answered (after SIGTERM) | wrong | lost | refused after close | not ready after | exit code, seconds")
        for index in range(args.runs):
            run = sigterm_under_load(Path(tmp), drain_timeout=args.drain_timeout, lame_duck=args.lame_duck,
                                     load_seconds=args.load_seconds)
            failures += not run.ok
            ready = f"{run.not_ready_seconds * 1000:.0f} ms" if run.not_ready_seconds is not None else "never"
            print(f"{index + 1:3d} | {run.answered:8d} ({run.answered_after_sigterm:5d})       | {len(run.wrong):5d} | "
                  f"{len(run.lost):4d} | {run.refused:19d} | {ready:>15} | {run.exit_code}, {run.exit_seconds:.2f} s"
                  f"{'' if run.ok else '  FAILED'}")
            for detail, count in Counter(run.lost + run.wrong).most_common(3):
                print(f"      {count} x {detail}")
    print(f"{args.runs - failures} of {args.runs} runs lost nothing, answered correctly and exited 0 in time")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
