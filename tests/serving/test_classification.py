"""Triton's classification extension: a requested output's class_count answers its top classes
as "score:index:label" strings, labels from the model's metadata, over HTTP (JSON and binary)
and gRPC."""

from __future__ import annotations

from pathlib import Path

import grpc
import httpx
import numpy as np
import pytest

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from serving.classification import top_classes
from tests.serving.conftest import running_server

SCORES = np.array([[0.1, 0.7, 0.2], [3.0, 1.0, 2.0]], np.float32)


def write_labelled_scores(path: Path, labels: list[str]) -> Path:
    """scores FP32 [n, 3] passed through, with ``labels`` in the model's metadata."""
    from onnx import TensorProto, helper

    from exporter.onnx_import import convert_onnx

    info = helper.make_tensor_value_info
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["scores"])], "scores",
                              [info("x", TensorProto.FLOAT, ["n", 3])], [info("scores", TensorProto.FLOAT, ["n", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    helper.set_model_props(model, {"labels": "\n".join(labels)})
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(model, path)
    return path


@pytest.fixture(scope="module")
def labelled_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("classes") / "models"
    write_labelled_scores(root / "scores" / "1" / "model.flow", ["cat", "dog", "bird"])
    with running_server(root) as server:
        yield server


def infer_body(outputs: list[dict]) -> dict:
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3], "data": SCORES.ravel().tolist()}], "outputs": outputs}


def test_class_count_over_http_json_and_binary(labelled_server):
    with httpx.Client(base_url=labelled_server.http_url, timeout=10) as http:
        reply = http.post("/v2/models/scores/infer", json=infer_body([{"name": "scores", "parameters": {"classification": 2}}]))
        assert reply.status_code == 200, reply.text
        (out,) = reply.json()["outputs"]
        assert out["datatype"] == "BYTES" and out["shape"] == [2, 2]
        assert out["data"] == ["0.700000:1:dog", "0.200000:2:bird", "3.000000:0:cat", "2.000000:2:bird"]

        binary = http.post("/v2/models/scores/infer", json=infer_body(
            [{"name": "scores", "parameters": {"classification": 5, "binary_data": True}}]))
        header_length = int(binary.headers["inference-header-content-length"])
        raw = binary.content[header_length:]
        strings = []
        while raw:
            size = int.from_bytes(raw[:4], "little")
            strings.append(raw[4:4 + size].decode())
            raw = raw[4 + size:]
        assert strings[:3] == ["0.700000:1:dog", "0.200000:2:bird", "0.100000:0:cat"] and len(strings) == 6  # 3 classes at most

        plain = http.post("/v2/models/scores/infer", json=infer_body([{"name": "scores"}])).json()["outputs"][0]
        assert plain["datatype"] == "FP32"  # without class_count, the scores themselves

        for bad in (0, -1, "2", True):
            refused = http.post("/v2/models/scores/infer", json=infer_body([{"name": "scores", "parameters": {"classification": bad}}]))
            assert refused.status_code == 400 and "'classification' must be a positive number" in refused.json()["error"]


def test_class_count_over_grpc(labelled_server):
    with grpc.insecure_channel(labelled_server.grpc_address) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="scores")
        request.inputs.add(name="x", datatype="FP32", shape=[2, 3])
        request.raw_input_contents.append(SCORES.tobytes())
        output = request.outputs.add(name="scores")
        output.parameters["classification"].int64_param = 1
        reply = stub.ModelInfer(request, timeout=10)
        assert reply.outputs[0].datatype == "BYTES" and list(reply.outputs[0].shape) == [2, 1]
        raw = reply.raw_output_contents[0]
        assert raw == b"".join(len(s).to_bytes(4, "little") + s for s in (b"0.700000:1:dog", b"3.000000:0:cat"))


def test_top_classes_without_labels_unbatched_and_integer_scores():
    assert top_classes("s", np.array([1.0, 5.0, 5.0]), 2, [], batched=False).tolist() == ["5.000000:1", "5.000000:2"]
    assert top_classes("s", np.array([[4, 9]], np.int32), 1, ["a"], batched=True).tolist() == [["9:1"]]
