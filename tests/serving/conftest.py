"""Fixtures for the serving tests: small .flow models built from ONNX, repositories, and real
servers on free loopback ports, run in a background thread with their own event loop."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from serving import InferenceServer, ServerOptions

IN_DIM, HIDDEN, OUT_DIM = 4, 8, 3


@dataclass
class Mlp:
    """A Gemm-Relu-Gemm-Softmax MLP with a dynamic batch dim, and its NumPy reference."""

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray

    @classmethod
    def random(cls, seed: int) -> "Mlp":
        rng = np.random.default_rng(seed)
        return cls(
            rng.standard_normal((IN_DIM, HIDDEN)).astype(np.float32),
            rng.standard_normal(HIDDEN).astype(np.float32),
            rng.standard_normal((HIDDEN, OUT_DIM)).astype(np.float32),
            rng.standard_normal(OUT_DIM).astype(np.float32),
        )

    def __call__(self, x: np.ndarray) -> np.ndarray:
        h = np.maximum(x @ self.w1 + self.b1, 0)
        z = h @ self.w2 + self.b2
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def onnx(self):
        """The MLP as an ONNX ModelProto."""
        from onnx import TensorProto, helper, numpy_helper

        inits = [numpy_helper.from_array(a, n) for n, a in (("w1", self.w1), ("b1", self.b1), ("w2", self.w2), ("b2", self.b2))]
        graph = helper.make_graph(
            [
                helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
                helper.make_node("Relu", ["h"], ["r"]),
                helper.make_node("Gemm", ["r", "w2", "b2"], ["z"]),
                helper.make_node("Softmax", ["z"], ["probs"], axis=1),
            ],
            "mlp",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", IN_DIM])],
            [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["n", OUT_DIM])],
            inits,
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    def write(self, path: Path) -> Path:
        from exporter.onnx_import import convert_onnx

        path.parent.mkdir(parents=True, exist_ok=True)
        convert_onnx(self.onnx(), path)
        return path


def add_version(repo: Path, name: str, version: int, mlp: Mlp, config: dict | None = None) -> Path:
    """Write <repo>/<name>/<version>/model.flow atomically (built aside, then renamed in)."""
    model_dir = repo / name
    model_dir.mkdir(parents=True, exist_ok=True)
    if config is not None:
        tmp = model_dir / ".config.json.tmp"
        tmp.write_text(json.dumps(config))
        tmp.replace(model_dir / "config.json")
    staging = repo / f".staging-{name}-{version}"
    mlp.write(staging / "model.flow")
    staging.replace(model_dir / str(version))
    return model_dir / str(version) / "model.flow"


@pytest.fixture(scope="session")
def mlp() -> Mlp:
    return Mlp.random(0)


@pytest.fixture(scope="session")
def mlp_v2() -> Mlp:
    return Mlp.random(1)


@pytest.fixture
def repo(tmp_path: Path, mlp: Mlp) -> Path:
    root = tmp_path / "models"
    root.mkdir()
    add_version(root, "mlp", 1, mlp, {"max_batch_size": 16, "max_queue_delay_us": 500})
    return root


class RunningServer:
    """An InferenceServer on its own event loop thread."""

    def __init__(self, options: ServerOptions):
        self.loop = asyncio.new_event_loop()
        self.server = InferenceServer(options)
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.call(self.server.start())

    def call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.server.http_port}"

    @property
    def http_address(self) -> str:
        return f"127.0.0.1:{self.server.http_port}"

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.server.grpc_port}"

    @property
    def repository(self):
        return self.server.repository

    def wait_ready(self, timeout: float = 30.0) -> None:
        assert self.repository.wait_scanned(timeout), "repository scan did not finish"

    def stop(self) -> None:
        try:
            self.call(self.server.stop(), timeout=60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()


@contextmanager
def running_server(repo: Path, **overrides):
    options = ServerOptions(model_repository=repo, http_port=0, grpc_port=0, poll_interval_s=None, drain_timeout_s=10)
    for key, value in overrides.items():
        setattr(options, key, value)
    server = RunningServer(options)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def server(repo: Path):
    with running_server(repo) as running:
        yield running


def write_pair_model(path: Path) -> Path:
    """Two inputs a, b (FP32 [n, 2]) and two outputs sum = a + b, prod = a * b."""
    from onnx import TensorProto, helper

    from exporter.onnx_import import convert_onnx

    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Mul", ["a", "b"], ["prod"])],
        "pair",
        [info("a", TensorProto.FLOAT, ["n", 2]), info("b", TensorProto.FLOAT, ["n", 2])],
        [info("sum", TensorProto.FLOAT, ["n", 2]), info("prod", TensorProto.FLOAT, ["n", 2])],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def write_passthrough_model(path: Path, inputs: dict[str, tuple[int, list]], outputs: dict[str, str]) -> Path:
    """Identity outputs: ``inputs`` maps each input's name to its (ONNX element type, shape), with
    "n" for the batch dimension; ``outputs`` maps each output's name to the input it passes on."""
    from onnx import TensorProto, helper

    from exporter.onnx_import import convert_onnx

    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", [source], [out]) for out, source in outputs.items()],
        "passthrough",
        [info(name, elem, shape) for name, (elem, shape) in inputs.items()],
        [info(out, inputs[source][0], inputs[source][1]) for out, source in outputs.items()],
    )
    samples = {}
    for name, (elem, shape) in inputs.items():
        dims = [1 if d == "n" else d for d in shape]
        samples[name] = (np.full(dims, "a", dtype=object) if elem == TensorProto.STRING
                         else np.zeros(dims, helper.tensor_dtype_to_np_dtype(elem)))
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path, samples=samples)
    return path


def grpc_infer_codes(stub, request, count: int, timeout: float) -> list:
    """Send ``request`` ``count`` times at once (ModelInfer futures); each call's status code, and the
    details of those that failed, in order."""
    import grpc

    futures = [stub.ModelInfer.future(request, timeout=timeout) for _ in range(count)]
    results = []
    for f in futures:
        try:
            f.result()
            results.append((grpc.StatusCode.OK, ""))
        except grpc.RpcError as exc:
            results.append((exc.code(), exc.details()))
    return results


def client_report(script: str, *args: str, timeout: float = 120) -> dict:
    """Run one of the real-client scripts beside this file (``triton_*_client.py``) in its own
    process and return the JSON report it prints; a failing script fails the test with its stderr."""
    run = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / script), *args],
                         capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)
