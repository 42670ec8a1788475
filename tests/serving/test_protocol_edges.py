"""Edges where clients met answers they could not use: non-finite outputs, a 413 followed by a
stray 431, invalid model names in readiness checks, and a binary request's undecodable header."""

from __future__ import annotations

import json
import socket

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.http as triton_http

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from tests.serving.conftest import running_server, write_pair_model


@pytest.fixture(scope="module")
def pair_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("edges") / "models"
    write_pair_model(root / "pair" / "1" / "model.flow")
    with running_server(root, max_request_bytes=4096) as server:
        yield server


def test_non_finite_outputs_read_back_with_tritonclient(pair_server):
    # NaN, Infinity and -Infinity are written as those literals, as Triton and TF Serving write
    # them; tritonclient (rapidjson) and Python's json read them back exactly.
    a = np.array([[np.nan, np.inf], [-np.inf, 1.0]], np.float32)
    b = np.array([[1.0, 1.0], [1.0, 2.0]], np.float32)
    client = triton_http.InferenceServerClient(pair_server.http_address, connection_timeout=10, network_timeout=10)
    try:
        inputs = [triton_http.InferInput("a", [2, 2], "FP32"), triton_http.InferInput("b", [2, 2], "FP32")]
        inputs[0].set_data_from_numpy(a, binary_data=False)
        inputs[1].set_data_from_numpy(b, binary_data=False)
        outputs = [triton_http.InferRequestedOutput("sum", binary_data=False)]
        result = client.infer("pair", inputs, outputs=outputs)
        np.testing.assert_array_equal(result.as_numpy("sum"), a + b)
    finally:
        client.close()
    body = {"inputs": [{"name": "a", "datatype": "FP32", "shape": [2, 2], "data": [0.0, 1.0, 2.0, 3.0]},
                       {"name": "b", "datatype": "FP32", "shape": [2, 2], "data": [1.0, 1.0, 1.0, 1.0]}]}
    text = httpx.post(f"{pair_server.http_url}/v2/models/pair/infer", json=body).text
    assert "NaN" not in text  # finite answers stay plain JSON


def test_413_closes_the_connection_without_a_stray_answer(pair_server):
    body = b'{"inputs": [' + b" " * 8192 + b"]}"
    head = (f"POST /v2/models/pair/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", pair_server.server.http_port), timeout=10) as sock:
        sock.sendall(head + body)
        received = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            received += chunk
    assert received.startswith(b"HTTP/1.1 413")
    assert received.count(b"HTTP/1.1") == 1, received  # no 431 or 400 for the body's bytes
    assert b"connection: close" in received.lower()


def test_model_ready_refuses_invalid_names_on_both_protocols(pair_server):
    r = httpx.get(f"{pair_server.http_url}/v2/models/bad%20name/ready")
    assert r.status_code == 400 and "invalid model name" in r.json()["error"]
    r = httpx.get(f"{pair_server.http_url}/v2/models/pair/versions/x/ready")
    assert r.status_code == 400 and "invalid model version" in r.json()["error"]
    assert httpx.get(f"{pair_server.http_url}/v2/models/ghost/ready").status_code == 400  # valid, not there: not ready
    with grpc.insecure_channel(pair_server.grpc_address) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        for request in (pb.ModelReadyRequest(name="../mlp"), pb.ModelReadyRequest(name="pair", version="x")):
            with pytest.raises(grpc.RpcError) as info:
                stub.ModelReady(request, timeout=5)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert not stub.ModelReady(pb.ModelReadyRequest(name="ghost"), timeout=5).ready
        assert stub.ModelReady(pb.ModelReadyRequest(name="pair"), timeout=5).ready


@pytest.mark.parametrize("header", [b"a\x00b\x00c", b"\x80\x81\x82\x83", b"\xff\xfe\xff"])
def test_an_undecodable_binary_header_is_named_as_such(pair_server, header):
    r = httpx.post(f"{pair_server.http_url}/v2/models/pair/infer", content=header + b"\x00" * 16,
                   headers={"Inference-Header-Content-Length": str(len(header))})
    error = r.json()["error"]
    assert r.status_code == 400 and "JSON header (the first" in error and "not valid JSON" in error
    assert "utf-16" not in error.lower() and "utf-32" not in error.lower(), error
    assert json.loads(r.text)  # the answer itself is JSON
