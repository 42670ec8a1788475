"""Memory returned on unload: a replaced version is freed at once (no cyclic garbage collection
needed), its metric series leave /metrics, and 50 reloads under requests keep resident memory
bounded."""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
import weakref
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from tests.serving.conftest import add_version, running_server

X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
GOOD = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": X.ravel().tolist()}]}
WIDE_IN, WIDE_OUT = 1024, 2048  # an 8 MiB weight: a model whose memory shows in the process's RSS


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def write_wide_model(path: Path, seed: int) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    from exporter.onnx_import import convert_onnx

    w = np.random.default_rng(seed).standard_normal((WIDE_IN, WIDE_OUT)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", WIDE_IN])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", WIDE_OUT])],
        [numpy_helper.from_array(w, "w")],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def exercise(server) -> None:
    """Requests of every kind the version sees: successes and refusals, over each protocol."""
    with httpx.Client(base_url=server.http_url, timeout=10) as client:
        assert client.post("/v2/models/mlp/infer", json=GOOD).status_code == 200
        assert client.post("/v2/models/mlp/infer", json={"inputs": [{**GOOD["inputs"][0], "shape": [2, 5]}]}).status_code == 400
        assert client.post("/v2/models/mlp/versions/9/infer", json=GOOD).status_code == 404
        assert client.post("/v1/models/mlp:predict", json={"instances": X.tolist()}).status_code == 200
        assert client.get("/v2/models/mlp").status_code == 200
        assert client.get("/v2/models/mlp/stats").status_code == 200
        assert client.get("/metrics").status_code == 200
    with grpc.insecure_channel(server.grpc_address) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="mlp")
        request.inputs.add(name="x", datatype="FP32", shape=[2, 4])
        request.raw_input_contents.append(X.tobytes())
        assert len(stub.ModelInfer(request, timeout=10).raw_output_contents) == 1
        request.inputs[0].shape[:] = [2, 5]
        with pytest.raises(grpc.RpcError) as refused:
            stub.ModelInfer(request, timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def test_a_replaced_version_is_freed_without_the_cyclic_collector(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp, {"max_batch_size": 8})
    with running_server(tmp_path) as server:
        exercise(server)
        old = server.repository.get("mlp")
        old_model, old_version = weakref.ref(old.backend.model), weakref.ref(old)
        del old
        gc.collect()
        gc.disable()
        try:
            exercise(server)
            add_version(tmp_path, "mlp", 2, mlp_v2)
            server.repository.poll()
            assert server.repository.versions("mlp") == [2]
            assert server.repository.wait_retired(10)
            # The last requests on version 1 may still be finishing in the event loop's thread.
            assert wait_for(lambda: old_model() is None, 5), gc.get_referrers(old_version())
            assert old_version() is None
            exercise(server)
        finally:
            gc.enable()
        metrics = httpx.get(f"{server.http_url}/metrics").text
        assert 'version="2"' in metrics and 'version="1"' not in metrics


def test_metrics_drop_the_series_of_retired_versions_only(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp, {"max_batch_size": 8})
    add_version(tmp_path, "other", 1, mlp)
    with running_server(tmp_path) as server:
        for model in ("mlp", "other"):
            assert httpx.post(f"{server.http_url}/v2/models/{model}/infer", json=GOOD).status_code == 200
        assert httpx.post(f"{server.http_url}/v2/models/ghost/infer", json=GOOD).status_code == 404
        lines = []
        for version in range(2, 12):
            add_version(tmp_path, "mlp", version, mlp_v2 if version % 2 else mlp)
            server.repository.poll()
            assert server.repository.wait_retired(10)
            assert httpx.post(f"{server.http_url}/v2/models/mlp/infer", json=GOOD).status_code == 200
            lines.append(len(httpx.get(f"{server.http_url}/metrics").text.splitlines()))
        assert lines[-1] == lines[0]  # a page that does not grow with every version served
        metrics = httpx.get(f"{server.http_url}/metrics").text
        served = [line for line in metrics.splitlines() if line.startswith("flowstack_inference_requests_total{")]
        assert {("mlp" if 'model="mlp"' in line else "other" if 'model="other"' in line else "") for line in served} == {"mlp", "other", ""}
        assert all('version="11"' in line for line in served if 'model="mlp"' in line)
        assert 'model="other",protocol="http",status="success",version="1"' in metrics


@pytest.mark.slow
def test_fifty_reloads_keep_resident_memory_bounded(tmp_path):
    sources = [write_wide_model(tmp_path / "src" / str(seed) / "model.flow", seed) for seed in (0, 1)]
    model_bytes = sources[0].stat().st_size
    repo = tmp_path / "models"

    def place(version: int) -> None:
        staging = repo / f".staging-{version}"
        staging.mkdir(parents=True)
        shutil.copyfile(sources[version % 2], staging / "model.flow")
        (repo / "wide").mkdir(exist_ok=True)
        staging.replace(repo / "wide" / str(version))

    x = np.ones((1, WIDE_IN), np.float32)
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, WIDE_IN], "data": x.ravel().tolist()}]}
    place(1)
    with running_server(repo) as server, httpx.Client(base_url=server.http_url, timeout=30) as client:
        assert client.post("/v2/models/wide/infer", json=body).status_code == 200
        assert server.repository.wait_retired(10)
        first = resident_bytes()
        peak = first
        for version in range(2, 52):
            place(version)
            shutil.rmtree(repo / "wide" / str(version - 1))
            server.repository.poll()
            assert server.repository.versions("wide") == [version]
            answer = client.post("/v2/models/wide/infer", json=body)
            assert answer.status_code == 200 and answer.json()["model_version"] == str(version)
            peak = max(peak, resident_bytes())
        assert server.repository.wait_retired(10)
        # The trimming thread gives the freed pages back shortly after the last version goes.
        wait_for(lambda: resident_bytes() <= first + 1.5 * model_bytes, 5)
        last = resident_bytes()
        assert server.repository.memory.trims > 0 or not server.repository.memory.available
    mib = 1 << 20
    report = (f"first load {first / mib:.0f} MiB, peak {peak / mib:.0f} MiB, after the last unload {last / mib:.0f} MiB, "
              f"model {model_bytes / mib:.0f} MiB")
    # Before unloads freed versions at once, resident memory grew by a model per reload until a
    # full collection ran (55 MB models: 121 -> 812 MiB over ten swaps).
    assert peak <= first + 3 * model_bytes, report
    assert last <= first + 1.5 * model_bytes, report
    print(report)


def test_a_large_request_asks_for_a_trim_once_answered(repo):
    """A request of LARGE_REQUEST_BYTES or more leaves its buffers' pages with malloc: a trim
    follows, a moment after the answer (when the front end has let go of them)."""
    from serving.core import LARGE_REQUEST_BYTES, LARGE_REQUEST_TRIM_DELAY_S

    with running_server(repo, grpc_port=None, max_request_bytes=64 << 20) as server:
        memory = server.repository.memory
        if not memory.available:
            pytest.skip("malloc_trim needs glibc")
        small = np.zeros((4, 4), np.float32)
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [4, 4], "data": small.ravel().tolist()}]}
        assert httpx.post(f"{server.http_url}/v2/models/mlp/infer", json=body, timeout=10).status_code == 200
        time.sleep(LARGE_REQUEST_TRIM_DELAY_S + 0.3)
        trims = memory.trims
        rows = LARGE_REQUEST_BYTES // 16 + 1
        header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [rows, 4],
                                         "parameters": {"binary_data_size": rows * 16}}]}).encode()
        answered_at = time.monotonic()
        reply = httpx.post(f"{server.http_url}/v2/models/mlp/infer", content=header + bytes(rows * 16), timeout=30,
                           headers={"Inference-Header-Content-Length": str(len(header))})
        assert reply.status_code == 400  # over max_batch_size: refused, yet received
        deadline = time.monotonic() + 10
        while memory.trims == trims and time.monotonic() < deadline:
            time.sleep(0.02)
        assert memory.trims == trims + 1 and time.monotonic() - answered_at >= LARGE_REQUEST_TRIM_DELAY_S
