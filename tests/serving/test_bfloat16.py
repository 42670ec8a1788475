"""A bfloat16 model served as Triton and TF Serving serve one: BF16 in, BF16 out, over HTTP and gRPC,
through the real clients (tritonclient sends BF16 as ml_dtypes.bfloat16 arrays, binary over HTTP)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
th = pytest.importorskip("tritonclient.http")
httpx = pytest.importorskip("httpx")

from tests.serving.conftest import running_server  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
W = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)


def _bf16_matmul_repo(root: Path) -> Path:
    from onnx import TensorProto, helper, numpy_helper

    from exporter.onnx_import import convert_onnx

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "bf16",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, ["n", 3])],
        [numpy_helper.from_array(W.astype(BF16), "w")])
    path = root / "bf" / "1" / "model.flow"
    path.parent.mkdir(parents=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)  # parity on a generated BF16 sample
    return root


def _expected(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32) @ W.astype(BF16).astype(np.float32)).astype(BF16)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with running_server(_bf16_matmul_repo(tmp_path_factory.mktemp("repo"))) as running:
        yield running


X = np.array([[1, 2, 3, 4], [0.5, -1, 0, 2]], np.float32).astype(BF16)


def test_metadata_and_config_name_bf16(server) -> None:
    client = th.InferenceServerClient(server.http_address)
    meta = client.get_model_metadata("bf")
    assert [t["datatype"] for t in meta["inputs"] + meta["outputs"]] == ["BF16", "BF16"]
    config = client.get_model_config("bf")
    assert config["input"][0]["data_type"] == "TYPE_BF16"
    tf_meta = httpx.get(f"{server.http_url}/v1/models/bf/metadata", timeout=10).json()
    signature = tf_meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert signature["inputs"]["x"]["dtype"] == "DT_BFLOAT16"


@pytest.mark.parametrize("binary_output", [True, False])
def test_triton_http_client_round_trips_bf16(server, binary_output: bool) -> None:
    client = th.InferenceServerClient(server.http_address)
    tensor = th.InferInput("x", list(X.shape), "BF16")
    tensor.set_data_from_numpy(X, binary_data=True)
    result = client.infer("bf", [tensor], outputs=[th.InferRequestedOutput("y", binary_data=binary_output)])
    assert result.get_output("y")["datatype"] == "BF16"
    np.testing.assert_array_equal(result.as_numpy("y").astype(np.float32), _expected(X).astype(np.float32))


# tritonclient.grpc registers KServe's protos under the names ours use: it runs in its own process
GRPC_CLIENT = """
import json, sys
import ml_dtypes, numpy as np
import tritonclient.grpc as tg
x = np.asarray(json.loads(sys.argv[2]), np.float32).astype(ml_dtypes.bfloat16)
tensor = tg.InferInput("x", list(x.shape), "BF16")
tensor.set_data_from_numpy(x)
y = tg.InferenceServerClient(sys.argv[1]).infer("bf", [tensor]).as_numpy("y")
print(json.dumps({"dtype": str(y.dtype), "y": y.astype(np.float32).tolist()}))
"""


def test_triton_grpc_client_round_trips_bf16(server) -> None:
    run = subprocess.run([sys.executable, "-c", GRPC_CLIENT, server.grpc_address, json.dumps(X.astype(np.float32).tolist())],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout)
    assert report["dtype"] == "bfloat16" and report["y"] == _expected(X).astype(np.float32).tolist()


def test_json_numbers_round_to_bf16(server) -> None:
    """KServe JSON data and TF Serving instances are numbers, rounded to bfloat16 on the way in."""
    data = [[1.001, 2, 3, 4]]
    body = {"inputs": [{"name": "x", "datatype": "BF16", "shape": [1, 4], "data": data}]}
    answer = httpx.post(f"{server.http_url}/v2/models/bf/infer", json=body, timeout=10).json()
    want = _expected(np.asarray(data, np.float32).astype(BF16)).astype(np.float32).tolist()
    assert answer["outputs"][0]["datatype"] == "BF16" and [answer["outputs"][0]["data"]] == want
    tf_answer = httpx.post(f"{server.http_url}/v1/models/bf:predict", json={"instances": data}, timeout=10).json()
    assert tf_answer["predictions"] == want


def test_bf16_binary_data_of_the_wrong_size_is_refused(server) -> None:
    body = b'{"inputs":[{"name":"x","datatype":"BF16","shape":[1,4],"parameters":{"binary_data_size":6}}]}'
    answer = httpx.post(f"{server.http_url}/v2/models/bf/infer", content=body + b"\x00" * 6, timeout=10,
                        headers={"Inference-Header-Content-Length": str(len(body))})
    assert answer.status_code == 400 and "needs 8 bytes, got 6" in answer.json()["error"]
