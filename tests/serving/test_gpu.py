"""The CuPy backend (``--device gpu``): same answers as NumPy, over HTTP and gRPC."""

from __future__ import annotations

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
