"""The CuPy backend (``--device gpu``): same answers as NumPy, over HTTP and gRPC."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tests.serving.conftest import running_server


def _gpu_reason() -> str | None:
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CUDA reports no device"
    except Exception as exc:  # ImportError or a CUDA driver error
        return f"CuPy has no usable device: {type(exc).__name__}: {exc}"
    return None


@pytest.mark.gpu
def test_gpu_backend_matches_numpy(repo, mlp):
    reason = _gpu_reason()
    if reason:
        pytest.skip(reason)
    x = np.random.default_rng(5).standard_normal((6, 4)).astype(np.float32)
    with running_server(repo, device="gpu") as server:
        body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [6, 4], "data": x.ravel().tolist()}]}
        r = httpx.post(f"{server.http_url}/v2/models/mlp/infer", json=body, timeout=30)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(np.array(r.json()["outputs"][0]["data"]).reshape(6, 3), mlp(x), rtol=1e-4, atol=1e-6)
        assert httpx.get(f"{server.http_url}/v2/models/mlp").json()["platform"] == "flowstack_gpu"
