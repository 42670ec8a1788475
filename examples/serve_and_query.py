"""Serve the bundled digits model with ``flowstack serve`` and query it with the Triton clients.

Converts flowstack_cli/data/digits_mlp.onnx into a model repository, starts the server on free
loopback ports, classifies held-out digits over HTTP (JSON and binary tensors) and gRPC with the
unchanged ``tritonclient`` package, checks the TensorFlow Serving REST API, and shuts the server
down with SIGTERM.

    pip install 'tritonclient[all]'
    python examples/serve_and_query.py
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def make_repository() -> Path:
    from exporter.onnx_import import convert_onnx

    repo = Path(tempfile.mkdtemp(prefix="flowstack-models-"))
    convert_onnx(ROOT / "flowstack_cli" / "data" / "digits_mlp.onnx", repo / "digits" / "1" / "model.flow")
    (repo / "digits" / "config.json").write_text(json.dumps({"max_batch_size": 64, "max_queue_delay_us": 500}))
    return repo


def start_server(repo: Path) -> tuple[subprocess.Popen, int, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "flowstack_cli.serve", "--model-repository", str(repo), "--http-port", "0", "--grpc-port", "0"],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )
    for line in process.stderr:
        event = json.loads(line)
        if event.get("event") == "serving":
            return process, event["http_port"], event["grpc_port"]
    raise RuntimeError("the server did not start")


def main() -> int:
    with np.load(ROOT / "flowstack_cli" / "data" / "digits_test.npz") as data:
        images, labels = data["images"][:32].astype(np.float32), data["labels"][:32]
    process, http_port, grpc_port = start_server(make_repository())
    try:
        http = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
        deadline = time.time() + 30
        while not http.is_server_ready():
            if time.time() > deadline:
                raise RuntimeError("the server did not become ready")
            time.sleep(0.1)
        print("model metadata:", http.get_model_metadata("digits"))

        for binary in (False, True):
            tensor = httpclient.InferInput("image", list(images.shape), "FP32")
            tensor.set_data_from_numpy(images, binary_data=binary)
            result = http.infer("digits", [tensor], outputs=[httpclient.InferRequestedOutput("probs", binary_data=binary)])
            accuracy = (result.as_numpy("probs").argmax(axis=1) == labels).mean()
            print(f"HTTP ({'binary' if binary else 'JSON'} tensors): accuracy {accuracy:.0%} on {len(labels)} digits")

        grpc = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        tensor = grpcclient.InferInput("image", list(images.shape), "FP32")
        tensor.set_data_from_numpy(images)
        latencies = []
        for image in images:
            single = grpcclient.InferInput("image", [1, images.shape[1]], "FP32")
            single.set_data_from_numpy(image[None])
            start = time.perf_counter()
            grpc.infer("digits", [single])
            latencies.append((time.perf_counter() - start) * 1000)
        result = grpc.infer("digits", [tensor])
        accuracy = (result.as_numpy("probs").argmax(axis=1) == labels).mean()
        print(f"gRPC: accuracy {accuracy:.0%}; batch-1 latency p50 {np.percentile(latencies, 50):.2f} ms, "
              f"p99 {np.percentile(latencies, 99):.2f} ms")

        request = json.dumps({"instances": images[:4].tolist()}).encode()
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/v1/models/digits:predict", data=request) as r:
            predictions = np.array(json.load(r)["predictions"]).argmax(axis=1)
        print("TensorFlow Serving REST predictions:", predictions.tolist(), "labels:", labels[:4].tolist())
        http.close()
        grpc.close()
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(30)
        print(f"server drained and exited with code {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
