"""The serving step of ``flowstack demo``: serve a model repository on loopback, query it over
HTTP (KServe v2 JSON) and gRPC (KServe v2 with raw tensors), report accuracy and latency, shut down.

Uses only the standard library's HTTP client and the generated gRPC stubs, so the demo needs no
client package of its own.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path

import numpy as np


def _http_infer(port: int, model: str, x: np.ndarray) -> np.ndarray:
    body = json.dumps({"inputs": [{"name": "image", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.reshape(-1).tolist()}]}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/{model}/infer", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        out = json.loads(response.read())["outputs"][0]
    return np.asarray(out["data"], np.float32).reshape(out["shape"])


def _grpc_client(port: int):
    import grpc

    from schemas.proto import grpc_service_pb2 as pb
    from schemas.proto import grpc_service_pb2_grpc as pb_grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.GRPCInferenceServiceStub(channel)

    def infer(model: str, x: np.ndarray) -> np.ndarray:
        request = pb.ModelInferRequest(
            model_name=model,
            inputs=[pb.ModelInferRequest.InferInputTensor(name="image", datatype="FP32", shape=list(x.shape))],
            raw_input_contents=[np.ascontiguousarray(x, np.float32).tobytes()],
        )
        response = stub.ModelInfer(request, timeout=30)
        out = response.outputs[0]
        return np.frombuffer(response.raw_output_contents[0], np.float32).reshape(tuple(out.shape))

    return channel, infer


def _percentiles(seconds: list[float]) -> str:
    p50, p99 = np.percentile(np.array(seconds) * 1e3, [50, 99])
    return f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"


def _query(http_port: int, grpc_port: int, model: str, images: np.ndarray, labels: np.ndarray) -> list[str]:
    channel, grpc_infer = _grpc_client(grpc_port)
    lines = []
    try:
        for name, infer in (("HTTP", lambda x: _http_infer(http_port, model, x)), ("gRPC", lambda x: grpc_infer(model, x))):
            probs = np.concatenate([infer(images[i:i + 50]) for i in range(0, len(images), 50)])
            accuracy = float((probs.argmax(axis=1) == labels).mean())
            latencies = []
            for i in range(200):
                start = time.perf_counter()
                infer(images[i % len(images)][None])
                latencies.append(time.perf_counter() - start)
            lines.append(f"{name}: accuracy {accuracy:.2%}, batch-1 latency {_percentiles(latencies)}")
    finally:
        channel.close()
    return lines


def serve_and_query(repository: Path, model: str, images: np.ndarray, labels: np.ndarray) -> list[str]:
    """Start the server on free loopback ports, query it both ways, stop it; returns report lines."""
    from serving import InferenceServer, ServerOptions

    async def run() -> list[str]:
        server = InferenceServer(ServerOptions(repository, http_port=0, grpc_port=0, poll_interval_s=None))
        await server.start()
        try:
            loop = asyncio.get_running_loop()
            # Models load in the background (the server reports not-ready until they have): wait.
            await loop.run_in_executor(None, server.repository.wait_scanned, 120)
            if not server.repository.is_ready(model):
                reasons = "; ".join(f"version {s.version}: {s.state} {s.reason}" for s in server.repository.statuses(model))
                raise RuntimeError(f"model {model!r} did not become ready: {reasons or 'not found in the repository'}")
            return await loop.run_in_executor(None, _query, server.http_port, server.grpc_port, model, images, labels)
        finally:
            await server.stop()

    return asyncio.run(run())
