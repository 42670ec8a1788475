"""Explicit model control (Triton's model repository extension), the rest of Triton's protocol
(statistics, config, system and CUDA shared memory, log and trace settings, streaming) through
tritonclient.http and tritonclient.grpc unchanged, and TensorFlow Serving version labels."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest

from serving.backends import EdgeRuntimeBackend
from tests.serving.conftest import add_version, client_report, running_server, write_pair_model

X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
GOOD = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": X.ravel().tolist()}]}


@pytest.fixture(scope="module")
def explicit_server(tmp_path_factory, mlp):
    root = tmp_path_factory.mktemp("explicit") / "models"
    add_version(root, "mlp", 1, mlp, {"max_batch_size": 8})
    write_pair_model(root / "pair" / "1" / "model.flow")
    with running_server(root, model_control_mode="explicit", startup_models=("mlp",)) as server:
        yield server


def rows(index: list) -> dict:
    return {(row["name"], row.get("version", "")): (row.get("state", ""), row.get("reason", "")) for row in index}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_tritonclient_drives_every_extension(explicit_server, mlp, protocol):
    address = explicit_server.http_address if protocol == "http" else explicit_server.grpc_address
    report = client_report("triton_extensions_client.py", protocol, address)
    before = rows(report["index_before"])
    assert before[("mlp", "1")][0] == "READY" and before[("pair", "")] == ("UNAVAILABLE", "not loaded")
    assert not report["pair_ready_before"] and report["pair_ready_after_load"]
    config = report["mlp_config"].get("config", report["mlp_config"])
    assert config["max_batch_size"] == 4  # the load's config override
    assert "failed to load model 'ghost'" in report["load_ghost_error"]
    assert "max_batch_size must be an integer" in report["load_bad_config_error"] and report["mlp_ready_after_bad_load"]
    # System shared memory: in and out through regions, each misuse refused naming the region.
    np.testing.assert_allclose(np.array(report["shm_probs"]), mlp(np.array(report["shm_x"], np.float32)), rtol=1e-5)
    assert report["shm_output_parameters"]["shared_memory_region"] in ("out", {"string_param": "out"})
    assert {r["name"] for r in report["shm_status"]} == {"in", "out"} and not report["shm_status_after"]
    assert "'in' is already registered" in report["register_twice_error"]
    assert "runs past the end of shared-memory key" in report["register_too_big_error"]
    assert "more than the 8 bytes given in shared-memory region 'out'" in report["small_output_region_error"]
    assert "shared-memory region 'in' is not registered" in report["unregistered_input_error"]
    assert "CUDA shared memory" in report["cuda_register_error"] and "runs on the CPU" in report["cuda_register_error"]
    stats = report["stats"][0]
    assert stats["name"] == "mlp" and int(stats["inference_count"]) >= 2
    log_settings = report["log_settings_verbose"].get("settings", report["log_settings_verbose"])
    assert log_settings["log_verbose_level"] in (1, {"uint32_param": 1})
    assert "no request tracing" in report["trace_on_error"]
    if protocol == "grpc":
        assert [kind for kind, _ in report["stream"]] == ["ok", "error", "ok"]
        assert "input 'x': dimension 1 must be 4, got 5" in report["stream"][1][1]
    assert not report["pair_ready_after_unload"] and rows(report["index_after"])[("pair", "")][1] == "not loaded"
    assert report["unknown_model_error"].startswith("Request for unknown model: 'ghost' is not found")


def test_load_and_unload_over_plain_http(explicit_server):
    url = explicit_server.http_url
    assert httpx.post(f"{url}/v2/models/pair/infer", json=GOOD).status_code == 404
    r = httpx.post(f"{url}/v2/repository/models/pair/load", timeout=30)
    assert r.status_code == 200, r.text
    ready = httpx.post(f"{url}/v2/repository/index", json={"ready": True}).json()
    assert {row["name"] for row in ready} == {"mlp", "pair"}
    r = httpx.post(f"{url}/v2/repository/models/pair/load", json={"parameters": {"config": "{not json"}})
    assert r.status_code == 400 and "parameter 'config' is not valid JSON" in r.json()["error"]
    r = httpx.post(f"{url}/v2/repository/models/pair/load", json={"parameters": {"file:1/model.flow": "x"}})
    assert r.status_code == 400 and "unsupported parameter(s)" in r.json()["error"]
    r = httpx.post(f"{url}/v2/repository/models/bad%20name/load")
    assert r.status_code == 400 and "invalid model name" in r.json()["error"]
    assert httpx.post(f"{url}/v2/repository/models/pair/unload").status_code == 200
    assert httpx.post(f"{url}/v2/repository/models/pair/unload").status_code == 200  # not loaded: no error
    assert httpx.get(f"{url}/v2/models/pair/ready").status_code == 400
    assert httpx.get(f"{url}/v2/health/ready").status_code == 200  # every loaded model is ready


def test_polled_repository_refuses_explicit_control(server):
    r = httpx.post(f"{server.http_url}/v2/repository/models/mlp/load")
    assert r.status_code == 400 and "--model-control-mode explicit" in r.json()["error"]
    r = httpx.post(f"{server.http_url}/v2/repository/models/mlp/unload")
    assert r.status_code == 400 and "while the repository is polled" in r.json()["error"]


class SlowBackend(EdgeRuntimeBackend):
    def infer_batch(self, requests):
        time.sleep(0.2)
        return super().infer_batch(requests)


def test_unloading_a_model_in_use_finishes_its_requests(tmp_path, mlp):
    add_version(tmp_path, "mlp", 1, mlp, {"max_batch_size": 2, "warmup": []})
    with running_server(tmp_path, model_control_mode="explicit", startup_models=("*",), backend_factory=SlowBackend) as server:
        results: list = []

        def call() -> None:
            results.append(httpx.post(f"{server.http_url}/v2/models/mlp/infer", json=GOOD, timeout=30))

        threads = [threading.Thread(target=call) for _ in range(6)]
        for thread in threads:
            thread.start()
        time.sleep(0.1)  # the requests are queued or running
        assert httpx.post(f"{server.http_url}/v2/repository/models/mlp/unload", timeout=30).status_code == 200
        for thread in threads:
            thread.join(30)
        codes = sorted(r.status_code for r in results)
        assert len(codes) == 6 and set(codes) <= {200, 404}, [r.text for r in results]
        assert codes.count(200) >= 2  # those accepted before the unload were answered
        for r in results:
            if r.status_code == 200:
                np.testing.assert_allclose(np.array(r.json()["outputs"][0]["data"]).reshape(2, 3), mlp(X), rtol=1e-5)
        assert httpx.post(f"{server.http_url}/v2/models/mlp/infer", json=GOOD).status_code == 404


def test_tf_serving_version_labels(tmp_path, mlp, mlp_v2):
    add_version(tmp_path, "mlp", 1, mlp, {"version_policy": {"all": {}}, "version_labels": {"stable": 1, "canary": 2}})
    add_version(tmp_path, "mlp", 2, mlp_v2)
    with running_server(tmp_path) as server:
        for label, reference in (("stable", mlp), ("canary", mlp_v2)):
            r = httpx.post(f"{server.http_url}/v1/models/mlp/labels/{label}:predict", json={"instances": X.tolist()})
            assert r.status_code == 200, r.text
            np.testing.assert_allclose(np.array(r.json()["predictions"]), reference(X), rtol=1e-5)
        status = httpx.get(f"{server.http_url}/v1/models/mlp/labels/canary").json()
        assert [s["version"] for s in status["model_version_status"]] == ["2"]
        meta = httpx.get(f"{server.http_url}/v1/models/mlp/labels/stable/metadata")
        assert meta.status_code == 200 and meta.json()["model_spec"]["name"] == "mlp"
        r = httpx.post(f"{server.http_url}/v1/models/mlp/labels/beta:predict", json={"instances": X.tolist()})
        assert r.status_code == 404 and "no version label 'beta'" in r.json()["error"] and "canary" in r.json()["error"]


def test_version_labels_are_validated(tmp_path, mlp):
    from serving.config import ConfigError, ModelConfig

    with pytest.raises(ConfigError, match="version_labels.stable must be a positive version number"):
        ModelConfig.from_dict({"version_labels": {"stable": "1"}})
    with pytest.raises(ConfigError, match="version label 'a b' must be"):
        ModelConfig.from_dict({"version_labels": {"a b": 1}})


def test_cli_model_control_flags(tmp_path, monkeypatch, capsys):
    from flowstack_cli import serve

    seen = {}
    monkeypatch.setattr("serving.server.serve", lambda options: seen.setdefault("options", options) and 0)
    monkeypatch.setattr("serving.server.configure_logging", lambda level: None)
    serve.main(["--model-repository", str(tmp_path), "--model-control-mode", "explicit", "--load-model", "a",
                "--load-model", "b", "--lame-duck", "2"])
    options = seen["options"]
    assert (options.model_control_mode, options.startup_models, options.lame_duck_s) == ("explicit", ("a", "b"), 2)
    assert serve.main(["--model-repository", str(tmp_path), "--load-model", "a"]) == 2
    assert "--load-model needs --model-control-mode explicit" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_tritonclient_aio_clients(explicit_server, mlp, protocol):
    address = explicit_server.http_address if protocol == "http" else explicit_server.grpc_address
    report = client_report("triton_aio_client.py", protocol, address)
    assert report["live"] and report["ready"] and report["pair_ready"] and not report["pair_ready_after_unload"]
    assert {row["name"] for row in report["index"]} == {"mlp", "pair"}
    expected = mlp(np.array(report["x"], np.float32))
    for probs in report["probs"] + [report["shm_probs"]]:
        np.testing.assert_allclose(np.array(probs), expected, rtol=1e-5)
    assert report["shm_regions"] == 1 and report["inference_count"] >= 18 and report["max_batch_size"] in (4, 8)
