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
    wanted = ("test_conv_", "test_maxpool_2d", "test_averagepool_2d", "test_lppool_2d", "test_batchnorm", "test_gemm",
              "test_softmax", "test_reshape", "test_if", "test_loop11", "test_scatter_elements", "test_string_concat",
              "test_equal_string", "test_sequence_insert", "test_split_to_sequence", "test_regex_full_match")
    cases = [c for c in collect_testcases(None) if c.name.startswith(wanted)]
    assert cases
    for case in cases:
        rep = FlowBackend.prepare(case.model, "CUDA")
        for inputs, expected in case.data_sets:
            for got, want in zip(rep.run(inputs), expected):
                assert_same_on_host(got, want, case)


def assert_same_on_host(got, want, case) -> None:
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), case.name
        for g, w in zip(got, want):
            assert_same_on_host(g, w, case)
        return
    assert isinstance(got, np.ndarray), f"{case.name}: outputs come back to the host, got {type(got)}"
    if want.dtype == object:
        np.testing.assert_array_equal(got, want, err_msg=case.name)
    else:
        np.testing.assert_allclose(got, want, rtol=max(case.rtol, 1e-4), atol=max(case.atol, 1e-5), err_msg=case.name)


@pytest.mark.gpu
def test_weights_go_up_once_and_each_run_copies_only_its_feeds_and_outputs(monkeypatch) -> None:
    model = mlp()
    loaded = load(flow_writer.to_bytes(model), device="gpu")
    device = loaded.device_backend
    weights = [w for w in loaded.plan.template if w is not None]
    assert weights and all(isinstance(w, device.array_type) for w in weights), "the weights live on the device"
    copies = {"up": 0, "down": 0}
    upload, download = device.upload, device.download

    def counted_upload(array):
        copies["up"] += 1
        return upload(array)

    def counted_download(array):
        copies["down"] += 1
        return download(array)

    monkeypatch.setattr(device, "upload", counted_upload)
    monkeypatch.setattr(device, "download", counted_download)
    x = np.random.default_rng(4).standard_normal((8, 4)).astype(np.float32)
    for _ in range(3):
        out = loaded.run({"x": x})["y"]
    assert copies == {"up": 3, "down": 3}, "one copy up (x) and one down (y) per run, no weight and no intermediate"
    np.testing.assert_allclose(out, mlp_reference(model, x), rtol=1e-4, atol=1e-6)
