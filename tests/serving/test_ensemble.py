"""Model pipelines (Triton's ensemble scheduling): preprocessing, a network and postprocessing
served as one model over KServe v2 (HTTP, gRPC), TensorFlow Serving REST and tritonclient, each
step batching in its own model's batcher; bad pipelines reported naming the step."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from serving.config import ModelConfig
from serving.errors import ConfigError
from tests.serving.conftest import add_version, client_report, running_server, write_pair_model

X = (np.arange(12, dtype=np.float32).reshape(3, 4) - 5) / 4

# Listed out of order: the steps run in the order their tensors need, not the list's.
PIPE = {
    "name": "pipe",
    "platform": "ensemble",
    "max_batch_size": 8,
    "input": [{"name": "IMAGE", "data_type": "TYPE_FP32", "dims": [4]}],
    "output": [{"name": "PROBS", "data_type": "TYPE_FP32", "dims": [3]},
               {"name": "LABEL", "data_type": "TYPE_INT64", "dims": []}],
    "ensemble_scheduling": {"step": [
        {"model_name": "top", "model_version": -1, "input_map": {"probs": "PROBS"}, "output_map": {"label": "LABEL"}},
        {"model_name": "scale", "model_version": -1, "input_map": {"raw": "IMAGE"}, "output_map": {"scaled": "SCALED"}},
        {"model_name": "mlp", "model_version": 1, "input_map": {"x": "SCALED"}, "output_map": {"probs": "PROBS"}},
    ]},
}


def step(model: str, inputs: dict, outputs: dict) -> dict:
    return {"model_name": model, "input_map": inputs, "output_map": outputs}


def ensemble(*steps: dict, **fields) -> dict:
    return {"platform": "ensemble", "ensemble_scheduling": {"step": list(steps)}, **fields}


def write_scale_model(path: Path) -> Path:
    """raw FP32 [n, 4] -> scaled = 2 * raw."""
    from onnx import TensorProto, helper, numpy_helper

    from exporter.onnx_import import convert_onnx

    info = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Mul", ["raw", "two"], ["scaled"])], "scale",
                              [info("raw", TensorProto.FLOAT, ["n", 4])], [info("scaled", TensorProto.FLOAT, ["n", 4])],
                              [numpy_helper.from_array(np.full(4, 2, np.float32), "two")])
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def write_top_model(path: Path) -> Path:
    """probs FP32 [n, 3] -> label INT64 [n], the index of the largest."""
    from onnx import TensorProto, helper

    from exporter.onnx_import import convert_onnx

    info = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("ArgMax", ["probs"], ["label"], axis=1, keepdims=0)], "top",
                              [info("probs", TensorProto.FLOAT, ["n", 3])], [info("label", TensorProto.INT64, ["n"])])
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def write_config(root: Path, name: str, config: dict, version_folder: bool = False) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "config.json").write_text(json.dumps(config))
    if version_folder:
        (root / name / "1").mkdir(exist_ok=True)


def write_steps(root: Path, mlp) -> None:
    # A 20 ms window for each step's batch, so that concurrent pipeline requests meet in it.
    window = {"max_batch_size": 8, "max_queue_delay_us": 20_000}
    write_scale_model(root / "scale" / "1" / "model.flow")
    (root / "scale" / "config.json").write_text(json.dumps(window))
    add_version(root, "mlp", 1, mlp, window)
    write_top_model(root / "top" / "1" / "model.flow")


@pytest.fixture(scope="module")
def pipe_server(tmp_path_factory, mlp):
    root = tmp_path_factory.mktemp("ensemble") / "models"
    write_steps(root, mlp)
    write_pair_model(root / "pair" / "1" / "model.flow")
    write_config(root, "pipe", PIPE, version_folder=True)
    # Two independent steps (one wave), inputs and outputs inferred from the maps.
    write_config(root, "fanout", ensemble(step("scale", {"raw": "IN"}, {"scaled": "DOUBLED"}),
                                          step("mlp", {"x": "IN"}, {"probs": "P"})))
    write_config(root, "ghost", ensemble(step("scale", {"raw": "IN"}, {"scaled": "S"}), step("nosuch", {"x": "S"}, {"y": "OUT"})))
    write_config(root, "unmapped", ensemble(step("pair", {"a": "IN"}, {"sum": "OUT"})))
    write_config(root, "wrongname", ensemble(step("mlp", {"x": "IN"}, {"logits": "OUT"})))
    write_config(root, "mistyped", ensemble(step("mlp", {"x": "IN"}, {"probs": "OUT"}),
                                            input=[{"name": "IN", "data_type": "TYPE_INT32", "dims": [4]}],
                                            output=[{"name": "OUT", "data_type": "TYPE_FP32", "dims": [3]}]))
    write_config(root, "loop", ensemble(step("scale", {"raw": "B"}, {"scaled": "A"}), step("mlp", {"x": "A"}, {"probs": "B"}),
                                        step("top", {"probs": "B"}, {"label": "OUT"})))
    with running_server(root) as server:
        yield server


def expected(mlp, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    probs = mlp(2 * x)
    return probs, probs.argmax(axis=1)


def test_pipeline_over_kserve_http_and_tf_serving(pipe_server, mlp):
    probs, label = expected(mlp, X)
    with httpx.Client(base_url=pipe_server.http_url, timeout=10) as http:
        reply = http.post("/v2/models/pipe/infer", json={
            "id": "r1", "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [3, 4], "data": X.ravel().tolist()}]})
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["model_name"] == "pipe" and body["model_version"] == "1" and body["id"] == "r1"
        outputs = {o["name"]: o for o in body["outputs"]}
        assert outputs["LABEL"]["datatype"] == "INT64" and outputs["LABEL"]["shape"] == [3]
        assert outputs["LABEL"]["data"] == label.tolist()
        np.testing.assert_allclose(np.reshape(outputs["PROBS"]["data"], (3, 3)), probs, rtol=1e-5, atol=1e-6)

        one = http.post("/v2/models/pipe/versions/1/infer", json={
            "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [3, 4], "data": X.ravel().tolist()}],
            "outputs": [{"name": "LABEL"}]})
        assert [o["name"] for o in one.json()["outputs"]] == ["LABEL"]

        tf = http.post("/v1/models/pipe:predict", json={"inputs": {"IMAGE": X.tolist()}})
        assert tf.status_code == 200, tf.text
        assert tf.json()["outputs"]["LABEL"] == label.tolist()
        rows = http.post("/v1/models/pipe:predict", json={"instances": [{"IMAGE": row} for row in X.tolist()]})
        assert [p["LABEL"] for p in rows.json()["predictions"]] == label.tolist()

        wave = http.post("/v2/models/fanout/infer", json={
            "inputs": [{"name": "IN", "datatype": "FP32", "shape": [3, 4], "data": X.ravel().tolist()}]}).json()
        fanned = {o["name"]: np.reshape(o["data"], o["shape"]) for o in wave["outputs"]}
        np.testing.assert_allclose(fanned["DOUBLED"], 2 * X)
        np.testing.assert_allclose(fanned["P"], mlp(X), rtol=1e-5, atol=1e-6)

        bad = http.post("/v2/models/pipe/infer", json={
            "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [3, 5], "data": [0.0] * 15}]})
        assert bad.status_code == 400 and "dimension 1 must be 4" in bad.json()["error"]
        too_many = http.post("/v2/models/pipe/infer", json={
            "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [9, 4], "data": [0.0] * 36}]})
        assert too_many.status_code == 400 and "max_batch_size of 'pipe'" in too_many.json()["error"]


def test_metadata_config_and_statistics_as_triton_answers_them(pipe_server):
    with httpx.Client(base_url=pipe_server.http_url, timeout=10) as http:
        http.post("/v2/models/pipe/infer", json={
            "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [1, 4], "data": [0.0] * 4}]}).raise_for_status()
        meta = http.get("/v2/models/pipe").json()
        assert meta["platform"] == "ensemble" and meta["versions"] == ["1"]
        assert meta["inputs"] == [{"name": "IMAGE", "datatype": "FP32", "shape": [-1, 4]}]
        assert meta["outputs"] == [{"name": "PROBS", "datatype": "FP32", "shape": [-1, 3]},
                                   {"name": "LABEL", "datatype": "INT64", "shape": [-1]}]
        config = http.get("/v2/models/pipe/config").json()
        assert config["platform"] == "ensemble" and config["max_batch_size"] == 8
        assert [s["model_name"] for s in config["ensemble_scheduling"]["step"]] == ["top", "scale", "mlp"]
        assert config["ensemble_scheduling"]["step"][2] == {"model_name": "mlp", "model_version": 1,
                                                            "input_map": {"x": "SCALED"}, "output_map": {"probs": "PROBS"}}
        assert config["input"] == [{"name": "IMAGE", "data_type": "TYPE_FP32", "dims": [4]}]
        assert "instance_group" not in config and "dynamic_batching" not in config
        assert http.get("/v2/models/fanout/config").json()["max_batch_size"] == 8  # the steps' smallest
        stats = {s["name"]: s for s in http.get("/v2/models/stats").json()["model_stats"]}
        assert stats["pipe"]["inference_stats"]["success"]["count"] >= 1
        # Each step counts in its own model's statistics, as Triton counts composing models.
        for model in ("scale", "mlp", "top"):
            assert stats[model]["inference_stats"]["success"]["count"] >= 1 and stats[model]["execution_count"] >= 1
        assert http.get("/v2/models/pipe/ready").json()["ready"] is True


def test_pipeline_over_grpc(pipe_server, mlp):
    probs, label = expected(mlp, X)
    with grpc.insecure_channel(pipe_server.grpc_address) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="pipe")
        request.inputs.add(name="IMAGE", datatype="FP32", shape=[3, 4])
        request.raw_input_contents.append(X.tobytes())
        reply = stub.ModelInfer(request, timeout=10)
        outputs = {o.name: raw for o, raw in zip(reply.outputs, reply.raw_output_contents)}
        assert np.frombuffer(outputs["LABEL"], np.int64).tolist() == label.tolist()
        np.testing.assert_allclose(np.frombuffer(outputs["PROBS"], np.float32).reshape(3, 3), probs, rtol=1e-5, atol=1e-6)
        config = stub.ModelConfig(pb.ModelConfigRequest(name="pipe"), timeout=5).config
        assert config.platform == "ensemble"
        assert [(s.model_name, dict(s.input_map)) for s in config.ensemble_scheduling.step][1] == ("scale", {"raw": "IMAGE"})
        assert stub.ModelMetadata(pb.ModelMetadataRequest(name="pipe"), timeout=5).platform == "ensemble"
        assert stub.ModelReady(pb.ModelReadyRequest(name="pipe"), timeout=5).ready
        stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name="pipe"), timeout=5)
        assert stats.model_stats[0].inference_stats.success.count >= 1


def test_each_step_batches_in_its_own_models_batcher(pipe_server):
    """Concurrent pipeline requests meet in each step's batch: fewer model calls than requests."""
    def stats() -> dict:
        return {s["name"]: s for s in httpx.get(f"{pipe_server.http_url}/v2/models/stats", timeout=10).json()["model_stats"]}

    before = stats()
    clients, barrier, failures = 8, threading.Barrier(8), []

    def call() -> None:
        with httpx.Client(base_url=pipe_server.http_url, timeout=20) as http:
            barrier.wait(10)
            reply = http.post("/v2/models/pipe/infer", json={
                "inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [1, 4], "data": X[0].tolist()}]})
            if reply.status_code != 200:
                failures.append(reply.text)

    threads = [threading.Thread(target=call) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not failures
    after = stats()
    for model in ("scale", "mlp"):
        rows = after[model]["inference_count"] - before[model]["inference_count"]
        calls = after[model]["execution_count"] - before[model]["execution_count"]
        assert rows == clients and calls < clients, (model, rows, calls)


def test_bad_pipelines_are_reported_naming_the_step_and_the_rest_serve(pipe_server):
    index = {row["name"]: row for row in httpx.post(f"{pipe_server.http_url}/v2/repository/index", timeout=10).json()}
    reasons = {name: index[name]["reason"] for name in ("ghost", "unmapped", "wrongname", "mistyped", "loop")}
    assert "step 1 (model 'nosuch')" in reasons["ghost"] and "Request for unknown model" in reasons["ghost"]
    assert "step 0 (model 'pair'): input 'b' of model 'pair' is not mapped" in reasons["unmapped"]
    assert "step 0 (model 'mlp'): output_map names 'logits'" in reasons["wrongname"]
    assert "declared INT32" in reasons["mistyped"] and "step 0 (model 'mlp')" in reasons["mistyped"]
    assert "cycle: step 0 (model 'scale') -> step 1 (model 'mlp') -> step 0 (model 'scale')" in reasons["loop"]
    for name in reasons:
        assert index[name]["state"] == "UNAVAILABLE"
        reply = httpx.post(f"{pipe_server.http_url}/v2/models/{name}/infer", timeout=10, json={
            "inputs": [{"name": "IN", "datatype": "FP32", "shape": [1, 4], "data": [0.0] * 4}]})
        assert reply.status_code == 404 and name in reply.json()["error"]
    assert index["pipe"]["state"] == "READY" and index["fanout"]["state"] == "READY"


@pytest.mark.parametrize("config, words", [
    (ensemble(step("a", {"x": "IN"}, {"y": "T"}), step("b", {"x": "T"}, {"y": "T"})),
     "tensor 'T' is written by both step 0 (model 'a') and step 1 (model 'b')"),
    (ensemble(step("a", {"x": "IN"}, {"y": "OUT"}), input=[{"name": "X", "data_type": "TYPE_FP32", "dims": [4]}],
              output=[{"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]}]),
     "step 0 (model 'a'): input 'x' is mapped from tensor 'IN', which is neither an ensemble input (['X'])"),
    (ensemble(step("a", {"x": "IN"}, {"y": "T"}), input=[{"name": "IN", "data_type": "TYPE_FP32", "dims": [4]}],
              output=[{"name": "OUT", "data_type": "TYPE_FP32", "dims": [4]}]),
     "ensemble output 'OUT' is written by no step"),
    (ensemble(step("a", {"x": "T"}, {"y": "T"})), "cycle: step 0 (model 'a') -> step 0 (model 'a')"),
    (ensemble(step("a", {"x": "IN"}, {"y": "T"}), step("b", {"x": "T"}, {"y": "IN2"}), step("c", {"x": "IN2"}, {"y": "T2"}),
              step("d", {"x": "T2"}, {"y": "T3"}), step("e", {"x": "T3"}, {"y": "T2b"}), step("f", {"x": "T2b", "z": "T3b"}, {"y": "T3b"})),
     "cycle: step 5 (model 'f') -> step 5 (model 'f')"),
    (ensemble(), "needs ensemble_scheduling.step, a non-empty list"),
    (ensemble({"model_name": "a", "input_map": {"x": "IN"}}), "step[0] (model 'a'): output_map must be a non-empty object"),
    (ensemble(step("a", {"x": "IN"}, {"y": "OUT"}) | {"model_version": 0}), "model_version must be -1 (the newest) or a version"),
    (ensemble(step("a", {"x": "IN"}, {"y": "OUT"}), max_queue_delay_us=100), "unknown field(s) ['max_queue_delay_us']; an ensemble's"),
    ({"platform": "tensorflow_savedmodel"}, "unknown platform 'tensorflow_savedmodel'"),
    (ensemble(step("a", {"x": "IN"}, {"y": "OUT"}), name="other"), "name 'other' is not the model's directory name 'pipe'"),
])
def test_pipeline_config_errors_name_the_step(config, words):
    with pytest.raises(ConfigError) as caught:
        ModelConfig.from_dict(config, "pipe/config.json", "pipe")
    assert words in str(caught.value)


def test_explicit_load_brings_the_steps_and_an_unloaded_step_is_named(tmp_path, mlp):
    root = tmp_path / "models"
    write_steps(root, mlp)
    write_config(root, "pipe", PIPE)
    body = {"inputs": [{"name": "IMAGE", "datatype": "FP32", "shape": [3, 4], "data": X.ravel().tolist()}]}
    with running_server(root, model_control_mode="explicit") as server, httpx.Client(base_url=server.http_url, timeout=20) as http:
        assert http.post("/v2/repository/models/pipe/load").status_code == 200
        loaded = {row["name"] for row in http.post("/v2/repository/index", json={"ready": True}).json()}
        assert loaded == {"pipe", "scale", "mlp", "top"}
        assert http.post("/v2/models/pipe/infer", json=body).status_code == 200

        assert http.post("/v2/repository/models/mlp/unload").status_code == 200
        assert http.get("/v2/models/pipe/ready").json()["ready"] is False
        reply = http.post("/v2/models/pipe/infer", json=body)
        assert reply.status_code == 404
        assert reply.json()["error"].startswith("ensemble 'pipe' step 2 (model 'mlp'): Request for unknown model")
        assert http.post("/v2/models/scale/infer", json={
            "inputs": [{"name": "raw", "datatype": "FP32", "shape": [1, 4], "data": [1.0] * 4}]}).status_code == 200

        assert http.post("/v2/repository/models/mlp/load").status_code == 200
        assert http.post("/v2/models/pipe/infer", json=body).status_code == 200

        write_config(root, "broken", ensemble(step("nosuch", {"x": "IN"}, {"y": "OUT"})))
        refused = http.post("/v2/repository/models/broken/load")
        assert refused.status_code == 400 and "step 0 (model 'nosuch')" in refused.json()["error"]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_tritonclient_runs_the_pipeline_unchanged(pipe_server, mlp, protocol):
    address = pipe_server.http_address if protocol == "http" else pipe_server.grpc_address
    report = client_report("triton_ensemble_client.py", protocol, address)
    probs, label = expected(mlp, X)
    assert report["label"] == label.tolist()
    np.testing.assert_allclose(report["probs"], probs, rtol=1e-5, atol=1e-6)
    assert report["platform"] == "ensemble" and report["ready"] is True
    assert report["steps"] == ["top", "scale", "mlp"]
    assert report["success"] >= 1
    assert "'ghost' has no version ready" in report["missing_step_error"]
    top = np.argsort(-probs, axis=1, kind="stable")[:, :2]
    assert [[int(c.split(":")[1]) for c in row] for row in report["top2"]] == top.tolist()
    np.testing.assert_allclose([[float(c.split(":")[0]) for c in row] for row in report["top2"]],
                               np.take_along_axis(probs, top, 1), atol=1e-6)
