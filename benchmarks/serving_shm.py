"""System shared memory against binary HTTP and gRPC for large inputs, through tritonclient.

A real ``flowstack serve`` process serves a model taking a 224x224x3 float32 image (588 KiB) and
answering its per-channel mean (3 floats), so the time is the input's transfer. Each client
thread owns a tritonclient and sends the same image: (a) as a system shared-memory region it
registered once (the client rewrites the region's bytes before each request, as a producer of
new images would), (b) as binary HTTP (tritonclient.http, binary_data=True), (c) over gRPC
(tritonclient.grpc, raw_input_contents). Requests/s and p50 per cell; the ratio (a)/(b) is what
the serving issue set a target for (at least 2x at concurrency 1).

    python benchmarks/serving_shm.py                      # concurrency 1 and 16, 3 s each
    python benchmarks/serving_shm.py --duration 2 --concurrency 1
"""

from __future__ import annotations

import argparse
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
SHAPE = (1, 224, 224, 3)


def write_model(path: Path) -> Path:
    from onnx import TensorProto, helper

    sys.path.insert(0, str(ROOT))
    from exporter.onnx_import import convert_onnx

    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["image"], ["mean"], axes=[1, 2], keepdims=0)], "channel_mean",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 224, 224, 3])],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["n", 3])],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def start_server(repo: Path) -> tuple[subprocess.Popen, int, int]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(repo), "--http-port", "0",
         "--grpc-port", "0", "--poll-interval", "0", "--lame-duck", "0"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
    )
    for line in process.stderr:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "serving":
            threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()
            return process, event["http_port"], event["grpc_port"]
    process.kill()
    raise RuntimeError("server did not start")


def http_sender(port: int, image: np.ndarray, expected: np.ndarray, use_shm: bool, tag: str):
    import tritonclient.http as httpclient
    import tritonclient.utils.shared_memory as shm

    client = httpclient.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=60, network_timeout=60)
    handle = None
    tensor = httpclient.InferInput("image", list(SHAPE), "FP32")
    if use_shm:
        key = f"/flowstack_bench_{tag}"
        handle = shm.create_shared_memory_region(tag, key, image.nbytes)
        client.register_system_shared_memory(tag, key, image.nbytes)
        tensor.set_shared_memory(tag, image.nbytes)

    def send() -> None:
        if use_shm:
            shm.set_shared_memory_region(handle, [image])
        else:
            tensor.set_data_from_numpy(image, binary_data=True)
        result = client.infer("mean", [tensor], outputs=[httpclient.InferRequestedOutput("mean", binary_data=True)])
        if not np.allclose(result.as_numpy("mean"), expected, rtol=1e-4):
            raise AssertionError("wrong answer")

    def close() -> None:
        if use_shm:
            client.unregister_system_shared_memory(tag)
            shm.destroy_shared_memory_region(handle)
        client.close()

    return send, close


def grpc_sender(port: int, image: np.ndarray, expected: np.ndarray, use_shm: bool, tag: str):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(f"127.0.0.1:{port}")
    tensor = grpcclient.InferInput("image", list(SHAPE), "FP32")

    def send() -> None:
        tensor.set_data_from_numpy(image)
        result = client.infer("mean", [tensor], client_timeout=60)
        if not np.allclose(result.as_numpy("mean"), expected, rtol=1e-4):
            raise AssertionError("wrong answer")

    return send, client.close


def measure(make_sender, concurrency: int, duration: float, warmup: float) -> tuple[float, float]:
    """Each thread makes its own client (tritonclient.http's may not cross threads), then all
    send from one start time for ``warmup`` + ``duration`` seconds."""
    latencies: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(concurrency + 1)
    times: dict[str, float] = {}

    def run(index: int) -> None:
        send, close = make_sender(index)
        ready.wait()
        ready.wait()  # the start time is set
        start_at, end_at = times["start"], times["end"]
        mine = []
        while True:
            t0 = time.perf_counter()
            if t0 >= end_at:
                break
            send()
            if t0 >= start_at:
                mine.append(time.perf_counter() - t0)
        close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(concurrency)]
    for thread in threads:
        thread.start()
    ready.wait(120)
    times["start"] = time.perf_counter() + warmup
    times["end"] = times["start"] + duration
    ready.wait(120)
    for thread in threads:
        thread.join()
    return len(latencies) / duration, float(np.median(latencies) * 1000) if latencies else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    image = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    expected = image.mean(axis=(1, 2))
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "models"
        write_model(repo / "mean" / "1" / "model.flow")
        (repo / "mean" / "config.json").write_text(json.dumps({"max_batch_size": 16}))
        process, http_port, grpc_port = start_server(repo)
        try:
            time.sleep(1.0)
            cells = {
                "shared memory (HTTP)": lambda c, i: http_sender(http_port, image, expected, True, f"{os.getpid()}_{c}_{i}"),
                "binary HTTP": lambda c, i: http_sender(http_port, image, expected, False, ""),
                "gRPC": lambda c, i: grpc_sender(grpc_port, image, expected, False, ""),
            }
            print(f"224x224x3 float32 input ({image.nbytes:,} bytes), 3 floats out; {args.duration} s per cell; "
                  f"load average {os.getloadavg()[0]:.1f} before")
            print("conc | " + " | ".join(f"{name:>22}" for name in cells) + " | shm/binary")
            for concurrency in args.concurrency:
                figures = [measure(lambda i, make=make: make(concurrency, i), concurrency, args.duration, args.warmup)
                           for make in cells.values()]
                row = " | ".join(f"{rps:8.0f} req/s {p50:6.2f} ms" for rps, p50 in figures)
                print(f"{concurrency:4d} | {row} | {figures[0][0] / figures[1][0]:9.2f}x")
        finally:
            process.terminate()
            process.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
