"""Load benchmark for ``flowstack serve`` against a bare Starlette app (HTTP) and a bare grpc.aio
server (gRPC), each parsing the same request and returning a fixed response.

Every server runs in its own process; this process is the load generator: a minimal asyncio
HTTP/1.1 client on keep-alive connections and a grpc.aio client sending pre-serialized bytes,
one connection or in-flight call per unit of concurrency. For each protocol and concurrency it
prints requests/s and p50/p99 latency for (a) ours with dynamic batching, (b) ours with batching
off, (c) the bare peer, then the ratios. Ratios within one run are what mean something on a
shared machine. A second table gives each server's CPU time per request (all its threads, read
from /proc over the measured window) and the mean rows per model call of (a).

    python benchmarks/serving_load.py                         # concurrency 1, 16, 64; 3 s each
    python benchmarks/serving_load.py --duration 5 --concurrency 1 64
    python benchmarks/serving_load.py --device gpu --duration 10 --concurrency 64

``--device gpu`` measures something else: ResNet-18 (224x224, batch-1 requests as binary tensor
data over gRPC, dynamic batching up to ``--max-batch-size``) served by ``flowstack serve --device
gpu`` against the same server on the machine's CPU cores (all of them for BLAS), one after the
other; it prints both throughputs and gpu/cpu
(``--device cpu`` runs the same comparison CPU against CPU: how CI checks the script).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
IN_DIM, OUT_DIM = 256, 10


# -- servers -----------------------------------------------------------------------------------
def write_repository(root: Path, config: dict, hidden: int) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    sys.path.insert(0, str(ROOT))
    from exporter.onnx_import import convert_onnx

    rng = np.random.default_rng(0)
    weights = {
        "w1": rng.standard_normal((IN_DIM, hidden)).astype(np.float32) / 16,
        "b1": np.zeros(hidden, np.float32),
        "w2": rng.standard_normal((hidden, hidden)).astype(np.float32) / 32,
        "b2": np.zeros(hidden, np.float32),
        "w3": rng.standard_normal((hidden, OUT_DIM)).astype(np.float32) / 32,
        "b3": np.zeros(OUT_DIM, np.float32),
    }
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"]),
            helper.make_node("Relu", ["h1"], ["r1"]),
            helper.make_node("Gemm", ["r1", "w2", "b2"], ["h2"]),
            helper.make_node("Relu", ["h2"], ["r2"]),
            helper.make_node("Gemm", ["r2", "w3", "b3"], ["z"]),
            helper.make_node("Softmax", ["z"], ["probs"], axis=1),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", IN_DIM])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["n", OUT_DIM])],
        [numpy_helper.from_array(a, n) for n, a in weights.items()],
    )
    model_dir = root / "mlp"
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_dir / "1" / "model.flow")
    (model_dir / "config.json").write_text(json.dumps(config))
    return root


def _drain(stream) -> None:
    for _ in stream:
        pass


def start_ours(repo: Path, device: str | None = None) -> tuple[subprocess.Popen, int, int]:
    """``flowstack serve`` on ``repo``; with a ``device`` (the device comparison) BLAS keeps its threads."""
    # One BLAS thread: concurrency comes from requests, and BLAS threads that spin-wait for work
    # on a machine shared with the peer and the load generator only steal their cores.
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(repo), "--http-port", "0",
               "--grpc-port", "0", "--poll-interval", "0"]
    if device is not None:
        env = dict(os.environ)
        command += ["--device", device]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env)
    for line in process.stderr:
        try:
            event = json.loads(line)
        except ValueError:
            print(line, end="", file=sys.stderr)  # not an event: a warning or a traceback
            continue
        if event.get("event") == "serving":
            threading.Thread(target=_drain, args=(process.stderr,), daemon=True).start()
            if device is None:
                wait_ready(event["http_port"])
            return process, event["http_port"], event["grpc_port"]
    raise RuntimeError(f"server did not start (exit code {process.wait(10)})")


def _http_parser() -> str:
    """What uvicorn's default ``http="auto"`` picks, in our server and in the peer alike."""
    import importlib.util

    return "httptools" if importlib.util.find_spec("httptools") else "h11"


def wait_ready(port: int, timeout: float = 60.0) -> None:
    import urllib.error
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"server on port {port} did not become ready")


def start_inline(repo: Path) -> tuple[subprocess.Popen, int, int]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    process = subprocess.Popen([sys.executable, __file__, "--inline-server", str(repo)], cwd=ROOT, stdout=subprocess.PIPE,
                               text=True, env=env)
    ports = json.loads(process.stdout.readline())
    wait_ready(ports["http_port"])
    return process, ports["http_port"], ports["grpc_port"]


def run_inline_server(repo: Path) -> None:
    """Our server with the model called in the event loop, one request at a time: no queue, no
    worker thread. Not a mode we ship (a slow model would stall every connection); a reference for
    what batching-off costs without the thread handoff."""
    sys.path.insert(0, str(ROOT))
    import serving.server
    from serving.core import InferenceCore

    class InlineCore(InferenceCore):
        async def infer(self, request):
            mv = self.repository.get(request.model_name, request.model_version)
            feeds, _ = self._validate(mv, request)
            return self._response(mv, request, mv.backend.infer_batch([feeds])[0])

    serving.server.InferenceCore = InlineCore

    async def main():
        server = serving.server.InferenceServer(serving.server.ServerOptions(repo, http_port=0, grpc_port=0,
                                                                             poll_interval_s=None))
        await server.start()
        print(json.dumps({"http_port": server.http_port, "grpc_port": server.grpc_port}), flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


def start_peer() -> tuple[subprocess.Popen, int, int]:
    process = subprocess.Popen([sys.executable, __file__, "--peer"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    ports = json.loads(process.stdout.readline())
    return process, ports["http_port"], ports["grpc_port"]


def run_peer() -> None:
    """The peer: bare Starlette on uvicorn and bare grpc.aio, parse the request, fixed answer.

    It parses JSON with orjson, the parser our server uses, so the comparison is of everything
    but the parsing (with the standard library's json the peer spends 50-75 us a request there)."""
    import socket

    import grpc
    import orjson
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    sys.path.insert(0, str(ROOT))
    from schemas.proto import grpc_service_pb2 as pb

    fixed = json.dumps({"model_name": "mlp", "model_version": "1", "outputs": [
        {"name": "probs", "datatype": "FP32", "shape": [1, OUT_DIM], "data": [0.1] * OUT_DIM}]}).encode()

    async def infer(request):
        orjson.loads(await request.body())
        return Response(fixed, media_type="application/json")

    reply = pb.ModelInferResponse(model_name="mlp", model_version="1")
    reply.outputs.add(name="probs", datatype="FP32", shape=[1, OUT_DIM])
    reply.raw_output_contents.append(np.full(OUT_DIM, 0.1, np.float32).tobytes())
    reply_bytes = reply.SerializeToString()

    async def grpc_infer(request_bytes, context):
        pb.ModelInferRequest.FromString(request_bytes)
        return reply_bytes

    async def main():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        app = Starlette(routes=[Route("/v2/models/mlp/infer", infer, methods=["POST"])])
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", backlog=2048))
        task = asyncio.create_task(server.serve(sockets=[sock]))
        handler = grpc.method_handlers_generic_handler("inference.GRPCInferenceService", {
            "ModelInfer": grpc.unary_unary_rpc_method_handler(grpc_infer)})
        grpc_server = grpc.aio.server()
        grpc_server.add_generic_rpc_handlers((handler,))
        grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
        await grpc_server.start()
        while not server.started:
            await asyncio.sleep(0.01)
        print(json.dumps({"http_port": sock.getsockname()[1], "grpc_port": grpc_port}), flush=True)
        await task

    asyncio.run(main())


# -- load ----------------------------------------------------------------------------------------
def http_request_bytes(port: int) -> bytes:
    x = np.random.default_rng(1).standard_normal((1, IN_DIM)).astype(np.float32)
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, IN_DIM],
                                   "data": [round(float(v), 6) for v in x.ravel()]}]}).encode()
    head = (f"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head + body


def grpc_request_bytes() -> bytes:
    sys.path.insert(0, str(ROOT))
    from schemas.proto import grpc_service_pb2 as pb

    x = np.random.default_rng(1).standard_normal((1, IN_DIM)).astype(np.float32)
    request = pb.ModelInferRequest(model_name="mlp")
    request.inputs.add(name="x", datatype="FP32", shape=[1, IN_DIM])
    request.raw_input_contents.append(x.tobytes())
    return request.SerializeToString()


async def http_worker(port: int, payload: bytes, until: float, warm_until: float, latencies: list, errors: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while (start := time.perf_counter()) < until:
            writer.write(payload)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
            await reader.readexactly(length)
            if start >= warm_until:
                latencies.append(time.perf_counter() - start)
                if status != 200:
                    errors.append(status)
    finally:
        writer.close()


async def grpc_worker(call, payload: bytes, until: float, warm_until: float, latencies: list, errors: list) -> None:
    import grpc

    while (start := time.perf_counter()) < until:
        try:
            await call(payload, timeout=30)
            ok = True
        except grpc.aio.AioRpcError:
            ok = False
        if start >= warm_until:
            latencies.append(time.perf_counter() - start)
            if not ok:
                errors.append("rpc")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux), or NaN where /proc is missing."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(protocol: str, port: int, concurrency: int, duration: float, warmup: float, pid: int,
                  payload: bytes | None = None) -> dict:
    latencies: list[float] = []
    errors: list = []
    now = time.perf_counter()
    warm_until, until = now + warmup, now + warmup + duration
    cpu: list[float] = []

    async def sample_cpu() -> None:  # the server's CPU over the measured window only
        await asyncio.sleep(warmup)
        cpu.append(cpu_seconds(pid))

    sampler = asyncio.ensure_future(sample_cpu())
    if protocol == "http":
        payload = http_request_bytes(port)
        await asyncio.gather(*[http_worker(port, payload, until, warm_until, latencies, errors) for _ in range(concurrency)])
    else:
        import grpc

        payload = payload or grpc_request_bytes()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
            await asyncio.gather(*[grpc_worker(call, payload, until, warm_until, latencies, errors) for _ in range(concurrency)])
    elapsed = time.perf_counter() - warm_until
    await sampler
    cpu_us = (cpu_seconds(pid) - cpu[0]) / max(len(latencies), 1) * 1e6
    ms = np.array(latencies) * 1000 if latencies else np.array([float("nan")])
    return {"rps": len(latencies) / elapsed, "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "errors": len(errors), "cpu_us": cpu_us}


def batch_counts(http_port: int) -> tuple[int, int]:
    """(rows run, model calls) so far for the benchmark model, from the server's statistics."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v2/models/mlp/stats", timeout=10) as response:
        stats = json.load(response)["model_stats"][0]
    return stats["inference_count"], stats["execution_count"]


# -- the GPU against the CPU ------------------------------------------------------------------------
def write_resnet_repository(root: Path, image: int, max_batch_size: int) -> Path:
    sys.path.insert(0, str(ROOT))
    from benchmarks.models import resnet18
    from exporter.onnx_import import convert_onnx

    model_dir = root / "resnet18"
    convert_onnx(resnet18(image=image), model_dir / "1" / "model.flow", verify=False)
    (model_dir / "config.json").write_text(json.dumps({"max_batch_size": max_batch_size, "max_queue_size": 4096}))
    return root


def resnet_request_bytes(image: int) -> bytes:
    sys.path.insert(0, str(ROOT))
    from schemas.proto import grpc_service_pb2 as pb

    x = np.random.default_rng(1).standard_normal((1, 3, image, image)).astype(np.float32)
    request = pb.ModelInferRequest(model_name="resnet18")
    request.inputs.add(name="x", datatype="FP32", shape=[1, 3, image, image])
    request.raw_input_contents.append(x.tobytes())
    return request.SerializeToString()


def wait_model_ready(port: int, name: str, process: subprocess.Popen, timeout: float) -> None:
    """Until model ``name`` answers ready; fails with the server's reason (from an inference
    attempt) when it has not within ``timeout`` or the server exits."""
    import urllib.error
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/models/{name}/ready", timeout=5) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    reason = f"server exited with {process.returncode}" if process.poll() is not None else f"not ready after {timeout:.0f} s"
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{name}/infer", data=b"{}", method="POST")
        urllib.request.urlopen(request, timeout=5)
    except urllib.error.HTTPError as exc:
        reason += f": {exc.read().decode(errors='replace')[:2000]}"
    except (urllib.error.URLError, OSError):
        pass
    raise RuntimeError(f"model {name!r}: {reason}")


def compare_devices(args: argparse.Namespace) -> dict:
    """ResNet-18 served on the GPU, then on the CPU, at each concurrency; returns the figures."""
    repo = write_resnet_repository(Path(tempfile.mkdtemp(prefix="serving-gpu-")), args.image, args.max_batch_size)
    payload = resnet_request_bytes(args.image)
    print(f"model: ResNet-18 {args.image}x{args.image}, batch-1 requests of {len(payload) / 1e3:.0f} kB binary tensor "
          f"data over gRPC, max_batch_size {args.max_batch_size}; {os.cpu_count()} CPUs; {args.duration:.0f} s per cell "
          f"after {args.warmup:.0f} s warm-up", flush=True)
    results: dict = {}
    for side, device in (("device", args.device), ("cpu", "cpu")):
        process, http_port, grpc_port = start_ours(repo, device)
        try:
            wait_model_ready(http_port, "resnet18", process, args.ready_timeout)
            for concurrency in args.concurrency:
                r = asyncio.run(measure("grpc", grpc_port, concurrency, args.duration, args.warmup, process.pid, payload))
                results[(side, concurrency)] = r
                print(f"{device:4} conc {concurrency:>4} | {r['rps']:9.1f} req/s  p50 {r['p50']:8.2f} ms  "
                      f"p99 {r['p99']:8.2f} ms" + (f"  ({r['errors']} errors)" if r["errors"] else ""), flush=True)
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    summary = {}
    for concurrency in args.concurrency:
        ours, cpu = results[("device", concurrency)], results[("cpu", concurrency)]
        ratio = ours["rps"] / cpu["rps"] if cpu["rps"] else float("inf")
        summary[str(concurrency)] = {"device": args.device, "ours": ours, "cpu": cpu, "ratio": ratio}
        print(f"conc {concurrency:>4}: {args.device} {ours['rps']:.1f} req/s, cpu {cpu['rps']:.1f} req/s, "
              f"{args.device}/cpu {ratio:.1f}x")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per cell (default 3)")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds run before measuring (default 0.5)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--protocols", nargs="+", default=["http", "grpc"], choices=["http", "grpc"])
    parser.add_argument("--max-queue-delay-us", type=int, default=0,
                        help="max_queue_delay_us for (a); 0 batches whatever queued while the backend was busy (default)")
    # Half the highest concurrency: with one model instance, the event loop then decodes and answers
    # one batch's requests while the other batch computes, where batches of all 64 leave the loop
    # idle during each model call and the model idle while the loop works (HTTP at concurrency 64:
    # 9,040-9,090 req/s against 7,220-8,230 in alternated runs).
    parser.add_argument("--max-batch-size", type=int, default=32, help="max_batch_size for (a) (default 32)")
    parser.add_argument("--hidden", type=int, default=1024, help="width of the MLP's two hidden layers (default 1024)")
    parser.add_argument("--inline-reference", action="store_true",
                        help="also measure (d): batching off with the model called in the event loop, no worker thread")
    parser.add_argument("--device", choices=["gpu", "cpu"],
                        help="compare ResNet-18 served on this device with the CPU (see above; cpu: the script's own check)")
    parser.add_argument("--image", type=int, default=224, help="ResNet-18 input size for --device gpu (default 224)")
    parser.add_argument("--json", type=Path, help="with --device gpu: write the figures here")
    parser.add_argument("--ready-timeout", type=float, default=45.0,
                        help="with --device: seconds a server may take to load the model (default 45)")
    parser.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--inline-server", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peer:
        run_peer()
        return 0
    if args.inline_server:
        run_inline_server(args.inline_server)
        return 0
    if args.device:
        summary = compare_devices(args)
        if args.json:
            args.json.write_text(json.dumps(summary, indent=1))
        return 0

    work = Path(tempfile.mkdtemp(prefix="serving-load-"))
    batched = write_repository(work / "batched", {"max_batch_size": args.max_batch_size, "max_queue_delay_us": args.max_queue_delay_us,
                                                  "max_queue_size": 4096}, args.hidden)
    unbatched = write_repository(work / "unbatched", {"max_batch_size": 0, "max_queue_size": 4096}, args.hidden)
    processes = []
    try:
        targets = {}
        for label, starter in (("batching", lambda: start_ours(batched)), ("no batching", lambda: start_ours(unbatched)),
                               ("peer", start_peer)):
            process, http_port, grpc_port = starter()
            processes.append(process)
            targets[label] = {"http": http_port, "grpc": grpc_port, "pid": process.pid}
        if args.inline_reference:
            process, http_port, grpc_port = start_inline(unbatched)
            processes.append(process)
            targets["inline"] = {"http": http_port, "grpc": grpc_port, "pid": process.pid}
        time.sleep(1.0)
        parameters = IN_DIM * args.hidden + args.hidden * args.hidden + args.hidden * OUT_DIM
        print(f"model: MLP {IN_DIM}-{args.hidden}-{args.hidden}-{OUT_DIM} ({parameters / 1e6:.1f}M parameters), batch-1 requests, (a) max_batch_size {args.max_batch_size}; peer = bare Starlette on uvicorn (HTTP), "
              f"HTTP parser {_http_parser()} on both; bare grpc.aio (gRPC); {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} before; "
              f"{args.duration:.0f} s per cell")
        header = (f"{'proto':5} {'conc':>4} | {'batching req/s':>14} {'p50 ms':>7} {'p99 ms':>7} | {'no-batch req/s':>14} "
                  f"{'p50 ms':>7} {'p99 ms':>7} | {'peer req/s':>10} {'p50 ms':>7} {'p99 ms':>7} | "
                  f"{'ours/peer':>9} {'batch/no':>8} {'p99/p50':>7}")
        print(header)
        print("-" * len(header))
        details = []
        for protocol in args.protocols:
            for concurrency in args.concurrency:
                rows_before, calls_before = batch_counts(targets["batching"]["http"])
                row = {label: asyncio.run(measure(protocol, ports[protocol], concurrency, args.duration, args.warmup,
                                                  ports["pid"]))
                       for label, ports in targets.items()}
                rows_after, calls_after = batch_counts(targets["batching"]["http"])
                a, b, c = row["batching"], row["no batching"], row["peer"]
                errors = sum(r["errors"] for r in row.values())
                print(f"{protocol:5} {concurrency:>4} | {a['rps']:>14.0f} {a['p50']:>7.2f} {a['p99']:>7.2f} | "
                      f"{b['rps']:>14.0f} {b['p50']:>7.2f} {b['p99']:>7.2f} | {c['rps']:>10.0f} {c['p50']:>7.2f} "
                      f"{c['p99']:>7.2f} | {a['rps'] / c['rps']:>9.2f} {a['rps'] / b['rps']:>8.2f} "
                      f"{a['p99'] / a['p50']:>7.2f}" + (f"  ({errors} errors)" if errors else ""), flush=True)
                mean_batch = (rows_after - rows_before) / max(calls_after - calls_before, 1)
                details.append(f"{protocol:5} {concurrency:>4} | {a['cpu_us']:>8.0f} {b['cpu_us']:>10.0f} "
                               f"{c['cpu_us']:>6.0f} | {mean_batch:>10.1f}")
                if "inline" in row:
                    d = row["inline"]
                    details[-1] += (f" | (d) inline {d['rps']:.0f} req/s, p50 {d['p50']:.2f} ms, {d['cpu_us']:.0f} us CPU; "
                                    f"batching/inline {a['rps'] / d['rps']:.2f}")
        # CPU per request is steadier than req/s on a shared machine: it does not count the time a
        # server waits for a core, only what it spends once it has one.
        print("\nserver CPU per request (us, all threads), and (a)'s mean rows per model call (warmup included)")
        print(f"{'proto':5} {'conc':>4} | {'batching':>8} {'no-batching':>10} {'peer':>6} | {'mean batch':>10}")
        print("\n".join(details))
        print(f"load average after: {os.getloadavg()[0]:.1f} (includes this benchmark's own processes)")
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
