"""The CuPy backend (``--device gpu``): same answers as NumPy, over HTTP and gRPC."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from tests.serving.conftest import running_server


@pytest.mark.gpu
def test_gpu_backend_matches_numpy(repo, mlp):
    x = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    with running_server(repo, device="gpu") as server:
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [6, 4], "data": x.ravel().tolist()}]}
        r = httpx.post(f"{server.http_url}/v2/models/mlp/infer", json=body, timeout=30)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()["outputs"][0]["data"]).reshape(6, 3), mlp(x), rtol=1e-4, atol=1e-6)
        assert httpx.get(f"{server.http_url}/v2/models/mlp").json()["platform"] == "flowstack_gpu"


@pytest.mark.gpu
def test_batched_gpu_answers_match_the_cpu(repo, mlp):
    """Concurrent requests (batched on the device by the dynamic batcher) get the CPU's answers, each its own rows."""
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((1 + i % 3, 4)).astype(np.float32) for i in range(48)]

    def ask(url, x):
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape), "data": x.ravel().tolist()}]}
        r = httpx.post(f"{url}/v2/models/mlp/infer", json=body, timeout=60)
        assert r.status_code == 200, r.text
        return np.array(r.json()["outputs"][0]["data"], np.float32).reshape(len(x), -1)

    answers = {}
    for device in ("gpu", "cpu"):
        with running_server(repo, device=device) as server, ThreadPoolExecutor(16) as pool:
            answers[device] = list(pool.map(lambda x: ask(server.http_url, x), xs))
            stats = httpx.get(f"{server.http_url}/v2/models/mlp/stats", timeout=10).json()["model_stats"][0]
            if device == "gpu":
                assert stats["execution_count"] < len(xs), "some requests were batched"
    for x, gpu, cpu in zip(xs, answers["gpu"], answers["cpu"]):
        np.testing.assert_allclose(gpu, cpu, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(gpu, mlp(x), rtol=1e-4, atol=1e-6)
