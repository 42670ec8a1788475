"""The edge runtime on CuPy (``device="gpu"``) gives NumPy's answers. Skipped where CuPy finds no GPU."""

from __future__ import annotations

import numpy as np
import pytest

from edge_runtime import load
from exporter import flow_writer
from tests.edge_runtime.flow_models import mlp, mlp_reference


@pytest.mark.gpu
def test_mlp_on_gpu_matches_numpy() -> None:
    model = mlp()
    x = np.random.default_rng(3).standard_normal((16, 4)).astype(np.float32)
    out = load(flow_writer.to_bytes(model), device="gpu").run({"x": x})["y"]
    assert isinstance(out, np.ndarray), "outputs come back to the host"
    np.testing.assert_allclose(out, mlp_reference(model, x), rtol=1e-4, atol=1e-6)


@pytest.mark.gpu
def test_conformance_cases_on_gpu() -> None:
    """A slice of the ONNX node suite through the CuPy path: conv, pooling, norms, shapes, control flow."""
    import warnings

    from onnx.backend.test.case.node import collect_testcases

    from exporter.onnx_backend import FlowBackend

    warnings.simplefilter("ignore")
    wanted = ("test_conv_", "test_maxpool_2d", "test_batchnorm", "test_gemm", "test_softmax", "test_reshape", "test_if", "test_loop11")
    cases = [c for c in collect_testcases(None) if c.name.startswith(wanted)]
    assert cases
    for case in cases:
        rep = FlowBackend.prepare(case.model, "CUDA")
        for inputs, expected in case.data_sets:
            for got, want in zip(rep.run(inputs), expected):
                np.testing.assert_allclose(np.asarray(got), want, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5), err_msg=case.name)
