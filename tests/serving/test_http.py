"""The HTTP front end with real clients: tritonclient.http (JSON and binary tensors), plain httpx
for TensorFlow Serving REST, metrics, limits, auth and error messages."""

from __future__ import annotations

import gzip
import json

import httpx
import numpy as np
import pytest
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from onnx import TensorProto

from tests.serving.conftest import add_version, running_server, write_pair_model, write_passthrough_model


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, mlp):
    root = tmp_path_factory.mktemp("http") / "models"
    root.mkdir()
    add_version(root, "mlp", 1, mlp, {"max_batch_size": 16, "max_queue_delay_us": 200})
    write_pair_model(root / "pair" / "1" / "model.flow")
    write_passthrough_model(root / "text" / "1" / "model.flow", {"i": (TensorProto.STRING, ["n", 2])}, {"o": "i"})
    with running_server(root, max_request_bytes=1 << 20) as server:
        yield server


@pytest.fixture(scope="module")
def triton(two_models):
    client = triton_http.InferenceServerClient(two_models.http_address, connection_timeout=10, network_timeout=10)
    yield client
    client.close()


def test_health_and_server_metadata(triton, two_models):
    assert triton.is_server_live()
    assert triton.is_server_ready()
    assert triton.is_model_ready("mlp") and triton.is_model_ready("mlp", "1")
    assert not triton.is_model_ready("mlp", "7")
    meta = triton.get_server_metadata()
    assert meta["name"] == "flowstack" and "binary_tensor_data" in meta["extensions"]


def test_model_metadata_config_and_stats(triton):
    meta = triton.get_model_metadata("mlp")
    assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
    assert meta["outputs"] == [{"name": "probs", "datatype": "FP32", "shape": [-1, 3]}]
    config = triton.get_model_config("mlp")
    assert config["max_batch_size"] == 16
    assert config["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}]
    assert config["dynamic_batching"]["max_queue_delay_microseconds"] == 200
    stats = triton.get_inference_statistics("mlp")["model_stats"][0]
    assert stats["name"] == "mlp" and stats["version"] == "1" and "success" in stats["inference_stats"]


@pytest.mark.parametrize("binary_in", [True, False])
@pytest.mark.parametrize("binary_out", [True, False, None])
def test_triton_infer_json_and_binary(triton, mlp, binary_in, binary_out):
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    tensor = triton_http.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=binary_in)
    outputs = None if binary_out is None else [triton_http.InferRequestedOutput("probs", binary_data=binary_out)]
    result = triton.infer("mlp", [tensor], outputs=outputs, request_id="req-7")
    np.testing.assert_allclose(result.as_numpy("probs"), mlp(x), rtol=1e-5, atol=1e-6)
    response = result.get_response()
    assert response["model_version"] == "1" and response["id"] == "req-7"
    assert ("data" in response["outputs"][0]) == (binary_out is False)


def test_triton_infer_compressed_and_versioned(triton, mlp):
    x = np.ones((2, 4), np.float32)
    tensor = triton_http.InferInput("x", [2, 4], "FP32")
    tensor.set_data_from_numpy(x)
    for algorithm in ("gzip", "deflate"):
        result = triton.infer("mlp", [tensor], model_version="1", request_compression_algorithm=algorithm)
        np.testing.assert_allclose(result.as_numpy("probs"), mlp(x), rtol=1e-5)


def test_triton_errors_name_the_problem(triton):
    bad = triton_http.InferInput("x", [2, 4], "INT32")
    bad.set_data_from_numpy(np.zeros((2, 4), np.int32))
    with pytest.raises(InferenceServerException, match=r"input 'x': expected datatype FP32, got INT32"):
        triton.infer("mlp", [bad])
    wrong = triton_http.InferInput("x", [2, 5], "FP32")
    wrong.set_data_from_numpy(np.zeros((2, 5), np.float32))
    with pytest.raises(InferenceServerException, match=r"input 'x': dimension 1 must be 4, got 5"):
        triton.infer("mlp", [wrong])
    with pytest.raises(InferenceServerException, match="Request for unknown model: 'nope' is not found"):
        triton.infer("nope", [wrong])


def test_two_inputs_two_outputs_subset(two_models):
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    b = np.full((2, 2), 3, np.float32)
    body = {
        "inputs": [
            {"name": "a", "datatype": "FP32", "shape": [2, 2], "data": a.tolist()},
            {"name": "b", "datatype": "FP32", "shape": [2, 2], "data": b.ravel().tolist()},
        ],
        "outputs": [{"name": "prod"}],
    }
    r = httpx.post(f"{two_models.http_url}/v2/models/pair/infer", json=body)
    assert r.status_code == 200, r.text
    (out,) = r.json()["outputs"]
    assert out["name"] == "prod" and out["shape"] == [2, 2] and out["data"] == (a * b).ravel().tolist()


@pytest.mark.parametrize("encode", [str.encode, lambda text: b"\xef\xbb\xbf" + text.encode(), lambda text: text.encode("utf-16")])
def test_json_bodies_read_as_the_standard_library_reads_them(two_models, encode):
    # The fast parser refuses NaN/Infinity literals, out-of-range numbers, a BOM and UTF-16;
    # the server must still read such bodies exactly as json.loads does.
    text = ('{"inputs": [{"name": "a", "datatype": "FP32", "shape": [1, 2], "data": [NaN, 1e400]},'
            ' {"name": "b", "datatype": "FP32", "shape": [1, 2], "data": [2, 3]}], "outputs": [{"name": "prod"}]}')
    r = httpx.post(f"{two_models.http_url}/v2/models/pair/infer", content=encode(text))
    assert r.status_code == 200, r.text
    (out,) = r.json()["outputs"]
    assert np.isnan(out["data"][0]) and out["data"][1] == float("inf")
    rows = httpx.post(f"{two_models.http_url}/v1/models/pair:predict",
                      content=b'{"instances": [{"a": [NaN, 1.0], "b": [1.0, Infinity]}]}')
    assert rows.status_code == 200, rows.text
    assert "NaN" in rows.text and "Infinity" in rows.text  # the literals, not null: the answer reads back the same
    bad = httpx.post(f"{two_models.http_url}/v2/models/pair/infer", content=b'{"inputs": [1,')
    assert bad.status_code == 400 and "not valid JSON: Expecting value: line 1 column 15" in bad.json()["error"]


def test_tf_serving_row_and_columnar(two_models, mlp):
    url = two_models.http_url
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    r = httpx.post(f"{url}/v1/models/mlp:predict", json={"instances": x.tolist()})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["predictions"]), mlp(x), rtol=1e-5)
    r = httpx.post(f"{url}/v1/models/mlp/versions/1:predict", json={"inputs": x.tolist()})
    np.testing.assert_allclose(np.array(r.json()["outputs"]), mlp(x), rtol=1e-5)
    a, b = [[1.0, 2.0], [3.0, 4.0]], [[10.0, 20.0], [30.0, 40.0]]
    rows = httpx.post(f"{url}/v1/models/pair:predict", json={"instances": [{"a": a[0], "b": b[0]}, {"a": a[1], "b": b[1]}]})
    assert rows.json() == {"predictions": [{"sum": [11.0, 22.0], "prod": [10.0, 40.0]}, {"sum": [33.0, 44.0], "prod": [90.0, 160.0]}]}
    cols = httpx.post(f"{url}/v1/models/pair:predict", json={"inputs": {"a": a, "b": b}})
    assert cols.json() == {"outputs": {"sum": [[11.0, 22.0], [33.0, 44.0]], "prod": [[10.0, 40.0], [90.0, 160.0]]}}
    status = httpx.get(f"{url}/v1/models/mlp").json()
    assert status == {"model_version_status": [{"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    meta = httpx.get(f"{url}/v1/models/mlp/metadata").json()
    assert "x" in meta["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]
    bad = httpx.post(f"{url}/v1/models/pair:predict", json={"instances": [{"a": a[0]}]})
    assert bad.status_code == 400 and "instances[0]" in bad.json()["error"]


def test_metrics_page(two_models):
    x = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}]}
    httpx.post(f"{two_models.http_url}/v2/models/mlp/infer", json=x)
    httpx.post(f"{two_models.http_url}/v2/models/mlp/infer", json={"inputs": []})
    r = httpx.get(f"{two_models.http_url}/metrics")
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = r.text
    assert 'flowstack_inference_requests_total{model="mlp",protocol="http",status="success",version="1"}' in text
    for family in ("flowstack_queue_duration_seconds_bucket", "flowstack_compute_duration_seconds_sum",
                   "flowstack_batch_size_count", "flowstack_queue_depth", "flowstack_model_ready"):
        assert family in text


def test_request_size_limit_is_413(two_models):
    body = b'{"inputs": [' + b" " * (1 << 20) + b"]}"
    r = httpx.post(f"{two_models.http_url}/v2/models/mlp/infer", content=body)
    assert r.status_code == 413 and "limit" in r.json()["error"]
    bomb = gzip.compress(b" " * (4 << 20))
    r = httpx.post(f"{two_models.http_url}/v2/models/mlp/infer", content=bomb, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 413


def test_unknown_route_and_bad_names_are_json_errors(two_models):
    r = httpx.get(f"{two_models.http_url}/v2/nothing/here")
    assert r.status_code == 404 and "error" in r.json()
    r = httpx.get(f"{two_models.http_url}/v2/models/..%2F..%2Fetc")
    assert r.status_code in (400, 404) and "error" in r.json()
    r = httpx.get(f"{two_models.http_url}/v2/models/mlp/versions/abc")
    assert r.status_code == 400 and "invalid model version" in r.json()["error"]


def test_inference_route_methods_and_names(two_models):
    # Inference requests bypass Starlette's router (InferFirst); the rest of the route's behaviour stays.
    url = two_models.http_url
    r = httpx.get(f"{url}/v2/models/mlp/infer")
    assert r.status_code == 405 and "error" in r.json()
    x = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}]}
    r = httpx.post(f"{url}/v2/models/..%2F..%2Fetc/infer", json=x)
    assert r.status_code in (400, 404) and "error" in r.json()
    r = httpx.post(f"{url}/v2/models/mlp/versions/abc/infer", json=x)
    assert r.status_code == 400 and "invalid model version" in r.json()["error"]
    assert httpx.post(f"{url}/v2/models/mlp/versions/1/infer", json=x).status_code == 200
    assert httpx.post(f"{url}/v2/models/mlp/infer/extra", json=x).status_code == 404


def test_bearer_token(repo):
    with running_server(repo, auth_token="s3cret", grpc_port=None) as server:
        url = f"{server.http_url}/v2/models/mlp"
        assert httpx.get(f"{server.http_url}/v2/health/ready").status_code == 200
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        x = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}]}
        assert httpx.post(url + "/infer", json=x).status_code == 401
        assert httpx.post(url + "/infer", json=x, headers={"Authorization": "Bearer s3cret"}).status_code == 200
        client = triton_http.InferenceServerClient(server.http_address)
        assert client.get_model_metadata("mlp", headers={"Authorization": "Bearer s3cret"})["name"] == "mlp"
        client.close()


def test_readiness_codes(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with running_server(empty, grpc_port=None) as server:
        r = httpx.get(f"{server.http_url}/v2/health/ready")
        assert r.status_code == 503 and r.json() == {"ready": False}
        assert httpx.get(f"{server.http_url}/v2/health/live").json() == {"live": True}


def test_json_error_shape(two_models):
    r = httpx.post(f"{two_models.http_url}/v2/models/mlp/infer", content=b"{not json")
    assert r.status_code == 400
    assert set(r.json()) == {"error"} and "not valid JSON" in r.json()["error"]
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3]}]}
    r = httpx.post(f"{two_models.http_url}/v2/models/mlp/infer", content=json.dumps(body))
    assert r.status_code == 400 and "input 'x': shape [1, 4] needs 4 elements, data has 3" in r.json()["error"]


@pytest.mark.parametrize("data", [[["a", "b"], []], [["a"], "b"], ["a", ["b"]], [[["a"]], [["b"], ["c"]]]])
def test_ragged_bytes_data_is_refused(two_models, data):
    # Each was flattened into the declared element count and answered 200.
    body = {"inputs": [{"name": "i", "datatype": "BYTES", "shape": [1, 2], "data": data}]}
    r = httpx.post(f"{two_models.http_url}/v2/models/text/infer", json=body)
    assert r.status_code == 400 and "input 'i': data is not a regular array" in r.json()["error"], r.text
    # Nested the same way as regular data, strings are taken as numbers are: by element count.
    body["inputs"][0]["data"] = [["a"], ["b"]]
    r = httpx.post(f"{two_models.http_url}/v2/models/text/infer", json=body)
    assert r.status_code == 200 and r.json()["outputs"][0]["data"] == ["a", "b"], r.text
    numbers = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [[0.0, 1.0, 2.0], [3.0]]}]}
    r = httpx.post(f"{two_models.http_url}/v2/models/mlp/infer", json=numbers)
    assert r.status_code == 400 and "input 'x': data is not a regular array" in r.json()["error"], r.text


def test_duplicate_requested_outputs_are_refused(two_models):
    a = [[1.0, 2.0], [3.0, 4.0]]
    body = {
        "inputs": [{"name": n, "datatype": "FP32", "shape": [2, 2], "data": a} for n in ("a", "b")],
        "outputs": [{"name": "prod"}, {"name": "sum"}, {"name": "prod", "parameters": {"binary_data": True}}],
    }
    r = httpx.post(f"{two_models.http_url}/v2/models/pair/infer", json=body)
    assert r.status_code == 400 and r.json()["error"] == "output(s) ['prod'] requested more than once"


def _x(**changes) -> dict:
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0.0] * 4, **changes}]}


@pytest.mark.parametrize(
    "method, path, body, message",
    [
        ("POST", "/v2/models/mlp/infer", _x(name="n" * 100_000), "unknown input 'nnn"),
        ("POST", "/v2/models/mlp/infer", _x(datatype="D" * 100_000), "input 'x': unknown datatype 'DDD"),
        # More dimensions than NumPy has: a 500 before.
        ("POST", "/v2/models/mlp/infer", _x(shape=[1] * 100_000, data=[0.0]), "input 'x': shape [1, 1, 1,"),
        ("POST", "/v2/models/mlp/infer", _x(shape="s" * 100_000), "input 'x': shape must be a list of integers, got 'sss"),
        ("POST", "/v2/models/mlp/infer", _x(shape=[1 << 62] * 32), "input 'x': shape [4611686018427387904, 4611686018427387904,"),
        ("POST", "/v2/models/mlp/infer", {**_x(), "parameters": {"timeout": "t" * 100_000}}, "parameter 'timeout' must be"),
        ("POST", "/v2/models/mlp/infer", {**_x(), "outputs": [{"name": "o" * 100_000}]}, "unknown output(s) ['ooo"),
        ("POST", "/v2/models/mlp/versions/" + "9" * 5000 + "/infer", _x(), "invalid model version '999"),
        ("POST", "/v2/models/" + "m" * 5000 + "/infer", _x(), "invalid model name 'mmm"),
        ("GET", "/v2/" + "p" * 5000, None, "GET /v2/ppp"),
        ("GET", "/v1/models/mlp/versions/" + "7" * 5000, None, "model 'mlp' has no version '777"),
    ],
    ids=["input-name", "datatype", "rank", "shape", "element-count", "timeout", "output-name", "version", "model-name",
         "unknown-route", "tf-version"],
)
def test_error_messages_clip_echoed_values(two_models, method, path, body, message):
    r = httpx.request(method, two_models.http_url + path, json=body)
    assert 400 <= r.status_code < 500 and message in r.json()["error"], r.text[:2000]
    assert len(r.json()["error"]) < 500 and "..." in r.json()["error"]


def write_sum_model(path) -> None:
    """x (FP32 [n, 2]) -> y = x and total = the sum of every element, a 0-d output."""
    from onnx import helper

    from exporter.onnx_import import convert_onnx

    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0)],
        "sum", [info("x", TensorProto.FLOAT, ["n", 2])],
        [info("y", TensorProto.FLOAT, ["n", 2]), info("total", TensorProto.FLOAT, [])],
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    convert_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_tf_serving_row_answer_needs_batched_outputs(tmp_path):
    # Each prediction of the row format is one row of every output: a 0-d output has none, and the
    # answer is a 400 pointing at the columnar format (it was a 500 from len() of a scalar).
    write_sum_model(tmp_path / "repo" / "sum" / "1" / "model.flow")
    (tmp_path / "repo" / "sum" / "config.json").write_text(json.dumps({"max_batch_size": 0}))
    with running_server(tmp_path / "repo") as server:
        url = f"{server.http_url}/v1/models/sum:predict"
        rows = httpx.post(url, json={"instances": [[1.0, 2.0], [3.0, 4.0]]})
        assert rows.status_code == 400, rows.text
        assert "same first dimension" in rows.json()["error"] and "'total': []" in rows.json()["error"]
        cols = httpx.post(url, json={"inputs": [[1.0, 2.0], [3.0, 4.0]]})
        assert cols.status_code == 200, cols.text
        assert cols.json() == {"outputs": {"y": [[1.0, 2.0], [3.0, 4.0]], "total": 10.0}}
        one = httpx.post(url, json={"instances": [[1.0, 2.0]]})  # the server keeps serving
        assert one.status_code == 400 and httpx.get(f"{server.http_url}/v2/health/ready").status_code == 200
