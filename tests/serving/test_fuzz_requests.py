"""Requests found by fuzzing the server, kept as regressions: each malformed one gets a 4xx (or an
INVALID_ARGUMENT-family gRPC code) whose message names the problem, never a 500, a dropped answer
or a traceback in the log; the good ones around them keep getting correct answers. Then the
connection level (pipelining, unparsable bytes, a client's EOF), and last seeded random fuzzing
of KServe and TF Serving bodies and gRPC requests, bounded in count (a few seconds in all)."""

from __future__ import annotations

import asyncio
import copy
import gzip
import json
import logging
import random
import socket
import struct
import time
import zlib

import grpc
import httpx
import numpy as np
import pytest

from schemas.proto import grpc_service_pb2 as pb
from schemas.proto import grpc_service_pb2_grpc as pb_grpc
from tests.serving.conftest import add_version, running_server, write_passthrough_model
from tests.serving.test_http_protocol import PROTOCOLS, connect, run

X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8
GOOD = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": X.ravel().tolist()}]}
GOOD_BODY = json.dumps(GOOD).encode()


@pytest.fixture(scope="module")
def server(tmp_path_factory, mlp):
    from onnx import TensorProto

    root = tmp_path_factory.mktemp("fuzz_models")
    add_version(root, "mlp", 1, mlp, {"max_batch_size": 16, "max_queue_delay_us": 500})
    for name, elem_type in (("text", TensorProto.STRING), ("u64", TensorProto.UINT64)):
        write_passthrough_model(root / name / "1" / "model.flow", {"i": (elem_type, ["n", 2])}, {"o": "i"})
    with running_server(root) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.http_url, timeout=10) as c:
        yield c


@pytest.fixture(scope="module")
def stub(server):
    channel = grpc.insecure_channel(server.grpc_address)
    yield pb_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def check_good(client: httpx.Client, mlp) -> None:
    r = client.post("/v2/models/mlp/infer", content=GOOD_BODY)
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["outputs"][0]["data"]).reshape(2, 3), mlp(X), rtol=1e-5)


def _input(**changes) -> bytes:
    tensor = {**GOOD["inputs"][0], **changes}
    return json.dumps({"inputs": [tensor]}).encode()


def _u64(data) -> bytes:
    return json.dumps({"inputs": [{"name": "i", "datatype": "UINT64", "shape": [len(data) // 2, 2], "data": data}]}).encode()


def _binary_text(*items: bytes, shape=(1, 2)) -> tuple[bytes, dict]:
    blob = b"".join(struct.pack("<I", len(item)) + item for item in items)
    header = json.dumps({"inputs": [{"name": "i", "datatype": "BYTES", "shape": list(shape),
                                     "parameters": {"binary_data_size": len(blob)}}]}).encode()
    return header + blob, {"Inference-Header-Content-Length": str(len(header))}


# (method, path, body, headers, status, text the error must contain); each was a 500 or a wrong answer.
MALFORMED = [
    # outputs[].parameters not an object: AttributeError
    ("POST", "/v2/models/mlp/infer", json.dumps({**GOOD, "outputs": [{"name": "probs", "parameters": "x"}]}).encode(), {},
     400, "output 'probs': 'parameters' must be an object"),
    # a JSON string escaping a lone surrogate, as BYTES data: UnicodeEncodeError
    ("POST", "/v2/models/text/infer", b'{"inputs":[{"name":"i","datatype":"BYTES","shape":[1,2],"data":["\\ud800","b"]}]}', {},
     400, "input 'i': BYTES data holds a string that is not valid Unicode"),
    ("POST", "/v1/models/text:predict", b'{"instances":[["\\ud800","b"]]}', {},
     400, "input 'i': BYTES data holds a string that is not valid Unicode"),
    # Inference-Header-Content-Length that str.isdigit takes and int() refuses
    ("POST", "/v2/models/mlp/infer", GOOD_BODY, {"Inference-Header-Content-Length": b"\xb2"},
     400, "Inference-Header-Content-Length '\u00b2' is not a length within the"),
    ("POST", "/v2/models/mlp/infer", GOOD_BODY, {"Inference-Header-Content-Length": "9" * 5000},
     400, "Inference-Header-Content-Length '9999"),
    ("POST", "/v2/models/mlp/infer", GOOD_BODY, {"Inference-Header-Content-Length": "0" * 5000 + "2"},
     400, "JSON header (the first 2 bytes of the body, per Inference-Header-Content-Length) is not valid JSON"),
    # a version that str.isdigit takes and int() refuses ('²', URL-encoded)
    ("POST", "/v2/models/mlp/versions/%C2%B2/infer", GOOD_BODY, {}, 400, "invalid model version '\u00b2'"),
    ("GET", "/v2/models/mlp/versions/%C2%B2", b"", {}, 400, "invalid model version '\u00b2'"),
    ("POST", "/v1/models/mlp/versions/%C2%B2:predict", b'{"instances":[[1,2,3,4]]}', {}, 400, "invalid model version '\u00b2'"),
    # a scalar input to a batched model: IndexError counting its rows hid the rank error
    ("POST", "/v2/models/mlp/infer", _input(shape=[], data=[1.0]), {}, 400, "input 'x': expected rank 2"),
    ("POST", "/v1/models/mlp:predict", b'{"inputs": 5}', {}, 400, "input 'x': expected rank 2"),
    # empty, with dimensions NumPy cannot shape: "array is too big"
    ("POST", "/v2/models/mlp/infer", _input(shape=[2**62, 0], data=[]), {}, 400, "input 'x': shape [4611686018427387904, 0] is empty, but its other"),
    # a truncated gzip stream was read as a shorter body ("not valid JSON", or silently shorter binary data)
    ("POST", "/v2/models/mlp/infer", gzip.compress(GOOD_BODY)[:-12], {"Content-Encoding": "gzip"},
     400, "request body is not valid gzip data: it ends inside the compressed stream"),
    ("POST", "/v2/models/mlp/infer", zlib.compress(GOOD_BODY) + b"?", {"Content-Encoding": "deflate"},
     400, "request body has 1 bytes after the end of its deflate data"),
    # NaN timeout was taken as no timeout
    ("POST", "/v2/models/mlp/infer", GOOD_BODY[:-1] + b', "parameters": {"timeout": NaN}}', {},
     400, "parameter 'timeout' must be a non-negative number of microseconds, got nan"),
    # booleans as numbers were taken as 0/1
    ("POST", "/v2/models/mlp/infer", _input(data=[True, False] * 4), {}, 400, "input 'x': data for datatype FP32 must be numbers, got true/false"),
    ("POST", "/v1/models/mlp:predict", b'{"instances":[[true, false, true, false]]}', {}, 400, "input 'x': data for datatype FP32 must be numbers"),
    # integers past 64 bits were "floats"
    ("POST", "/v2/models/u64/infer", _u64([2**64, 0]), {}, 400, "input 'i': a value is out of range for UINT64"),
    ("POST", "/v2/models/u64/infer", _u64([-1, 2**63]), {}, 400, "input 'i': a value is out of range for UINT64"),
    # 1,000 BYTES elements for 2 were reported as "got 3"
    ("POST", "/v2/models/text/infer", *_binary_text(*[b""] * 1000), 400, "input 'i': shape [1, 2] needs 2 BYTES elements, got 3 or more"),
]


@pytest.mark.parametrize("method, path, body, headers, status, message", MALFORMED, ids=[f"{i}" for i in range(len(MALFORMED))])
def test_malformed_http_requests_get_named_4xx(client, mlp, method, path, body, headers, status, message):
    r = client.request(method, path, content=body or None, headers=headers)
    assert r.status_code == status, (path, body[:100], r.text)
    assert message in r.json()["error"], r.json()["error"]
    check_good(client, mlp)


def test_uint64_json_data_is_read_exactly(client, stub):
    values = [2**64 - 1, 0, 2**63, 12345678901234567891]
    r = client.post("/v2/models/u64/infer", content=_u64(values))
    assert r.status_code == 200, r.text
    assert r.json()["outputs"][0]["data"] == values  # not refused as floats, nor rounded through float64
    request = pb.ModelInferRequest(model_name="u64")
    request.inputs.add(name="i", datatype="UINT64", shape=[2, 2]).contents.uint64_contents.extend(values)
    reply = stub.ModelInfer(request, timeout=10)
    assert np.frombuffer(reply.raw_output_contents[0], "<u8").tolist() == values


def test_float_data_past_the_datatype_range_reads_as_infinity(client):
    # NumPy's overflow warning on the cast to FP32 failed the request where warnings are errors.
    r = client.post("/v2/models/mlp/infer", content=_input(shape=[1, 4], data=[0.5, 0.5, 0.5, 1e308]))
    assert r.status_code == 200, r.text
    assert np.isnan(r.json()["outputs"][0]["data"]).all()  # softmax of an infinite logit


def test_gzip_body_of_several_members_is_read_whole(client, mlp):
    # RFC 1952 allows a gzip file of several members; only the first was read ("not valid JSON").
    body = gzip.compress(GOOD_BODY[:30]) + gzip.compress(GOOD_BODY[30:])
    r = client.post("/v2/models/mlp/infer", content=body, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    np.testing.assert_allclose(np.array(r.json()["outputs"][0]["data"]).reshape(2, 3), mlp(X), rtol=1e-5)


def test_empty_outputs_list_means_every_output(client):
    r = client.post("/v2/models/mlp/infer", content=json.dumps({**GOOD, "outputs": []}).encode())
    assert r.status_code == 200 and [o["name"] for o in r.json()["outputs"]] == ["probs"]  # as over gRPC


def _grpc_infer(**fields) -> pb.ModelInferRequest:
    request = pb.ModelInferRequest(model_name="mlp", **fields)
    request.inputs.add(name="x", datatype="FP32", shape=[2, 4])
    request.raw_input_contents.append(X.tobytes())
    return request


def _scalar(request: pb.ModelInferRequest) -> None:
    del request.inputs[0].shape[:]
    request.raw_input_contents[0] = b"\x00" * 4


def _nan_timeout(request: pb.ModelInferRequest) -> None:
    request.parameters["timeout"].double_param = float("nan")


def _empty_but_huge(request: pb.ModelInferRequest) -> None:
    request.inputs[0].shape[:] = [0, 2**63 - 1]
    request.raw_input_contents[0] = b""


@pytest.mark.parametrize("mutate, message", [
    (lambda r: setattr(r, "model_version", "\u00b2"), "invalid model version '\u00b2'"),
    (_scalar, "input 'x': expected rank 2"),
    (_nan_timeout, "parameter 'timeout' must be a non-negative number"),
    (_empty_but_huge, "input 'x': shape [0, 9223372036854775807] is empty, but its other dimensions are too large"),
], ids=["version", "scalar", "nan-timeout", "empty-but-huge"])
def test_malformed_grpc_infer_is_invalid_argument(stub, mlp, mutate, message):
    request = _grpc_infer()
    mutate(request)
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelInfer(request, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in info.value.details()
    reply = stub.ModelInfer(_grpc_infer(), timeout=10)
    np.testing.assert_allclose(np.frombuffer(reply.raw_output_contents[0], "<f4").reshape(2, 3), mlp(X), rtol=1e-5)


def test_grpc_version_that_is_no_integer_on_metadata_and_ready(stub):
    with pytest.raises(grpc.RpcError) as info:
        stub.ModelMetadata(pb.ModelMetadataRequest(name="mlp", version="\u00b2"), timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid model version" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:  # as HTTP's 400: an invalid version is refused, not "not ready"
        stub.ModelReady(pb.ModelReadyRequest(name="mlp", version="\u00b2"), timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "invalid model version" in info.value.details()


@pytest.mark.parametrize("method, data, message", [
    ("/inference.GRPCInferenceService/ModelInfer", b"\xff\xff\xff", "not a valid inference.ModelInferRequest message"),
    ("/inference.GRPCInferenceService/ModelMetadata", b"\x0a\x05ml", "not a valid inference.ModelMetadataRequest message"),
    ("/grpc.health.v1.Health/Check", b"\xff\xff\xff", "not a valid grpc.health.v1.HealthCheckRequest message"),
    ("/grpc.health.v1.Health/Check", b"\x0a\x10ab", "not a valid grpc.health.v1.HealthCheckRequest message"),
], ids=["infer", "metadata", "health-varint", "health-field"])
def test_undecodable_grpc_messages_are_invalid_argument(server, caplog, method, data, message):
    with grpc.insecure_channel(server.grpc_address) as channel:
        call = channel.unary_unary(method, request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with caplog.at_level(logging.ERROR), pytest.raises(grpc.RpcError) as info:
            call(data, timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert message in info.value.details()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a traceback was logged"


def _exchange(address: str, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on one connection and read until the server closes it."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def _responses(raw: bytes) -> list[tuple[int, bytes]]:
    """(status, body) of each HTTP/1.1 response in ``raw`` (all with Content-Length)."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        length = next(int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:"))
        out.append((int(lines[0].split()[1]), rest[:length]))
        raw = rest[length:]
    return out


def _post(path: bytes, body: bytes, *extra: bytes) -> bytes:
    return b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n%s\r\n" % (path, len(body), b"".join(extra)) + body


@pytest.mark.parametrize("garbage, message", [
    (b"BREW /pot HTTP/1.1\r\n\r\n", "invalid HTTP request: Invalid method encountered"),
    (b"POST /v2/models/mlp/infer HTTP/1.1\r\nContent-Length: -5\r\n\r\n", "invalid HTTP request: Invalid character in Content-Length"),
    (b"POST /v2/models/mlp/infer HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "invalid HTTP request: Invalid character in chunk size"),
    (b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n", "url is too long"),
], ids=["method", "content-length", "chunk-size", "long-url"])
def test_pipelined_requests_before_unparsable_bytes_are_all_answered(server, mlp, garbage, message):
    # uvicorn answered the unparsable bytes at once, in text/plain, and closed the connection under
    # the complete requests before them: their answers were lost.
    good = _post(b"/v2/models/mlp/infer", GOOD_BODY)
    bad = _post(b"/v2/models/mlp/infer", b"{bad}")
    responses = _responses(_exchange(server.http_address, good + bad + good + garbage))
    assert [status for status, _ in responses] == [200, 400, 200, 400], responses
    for status, body in responses:
        if status == 200:
            np.testing.assert_allclose(np.array(json.loads(body)["outputs"][0]["data"]).reshape(2, 3), mlp(X), rtol=1e-5)
    assert "not valid JSON" in json.loads(responses[1][1])["error"]
    assert message in json.loads(responses[3][1])["error"]


def test_client_leaving_mid_body_logs_no_error(server, client, mlp, caplog):
    with caplog.at_level(logging.ERROR, logger="flowstack.serving"):
        for path in (b"/v2/models/mlp/infer", b"/v1/models/mlp:predict"):
            host, port = server.http_address.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{" % path)
                time.sleep(0.05)
        time.sleep(0.3)
        check_good(client, mlp)
    assert not [r for r in caplog.records if r.name == "flowstack.serving"], [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("protocol_class", PROTOCOLS)
def test_refusal_waits_for_pipelined_answers_on_either_parser(protocol_class):
    # The same on a recording transport, with uvicorn's h11 protocol too (httptools is optional).
    t = run(protocol_class, b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
                            b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nyou"
                            b"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    sent = b"".join(t.writes)
    assert sent.count(b"HTTP/1.1 200 OK") == 2 and b"echo:hi" in sent and b"echo:you" in sent, sent
    refusal = sent[sent.index(b"HTTP/1.1 400"):]
    assert sent.index(b"echo:you") < sent.index(b"HTTP/1.1 400") and b"content-type: application/json" in refusal
    assert json.loads(refusal.partition(b"\r\n\r\n")[2])["error"].startswith("invalid HTTP request: ")
    assert t.closed_by_server


def test_requests_before_the_clients_eof_are_answered(server, mlp):
    # A client may shut down its sending side once its requests are sent; asyncio then closed
    # the connection (uvicorn's eof_received returns None) and the answers were lost.
    host, port = server.http_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(_post(b"/v2/models/mlp/infer", GOOD_BODY) * 3 + _post(b"/v2/models/mlp/infer", b"{bad}"))
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    responses = _responses(received)
    assert [status for status, _ in responses] == [200, 200, 200, 400], responses
    np.testing.assert_allclose(np.array(json.loads(responses[2][1])["outputs"][0]["data"]).reshape(2, 3), mlp(X), rtol=1e-5)


@pytest.mark.parametrize("protocol_class", PROTOCOLS)
def test_eof_after_pipelined_requests_on_either_parser(protocol_class):
    async def scenario():
        protocol, transport = connect(protocol_class)
        protocol.data_received(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
                               b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nyou")
        if not protocol.eof_received():
            protocol.connection_lost(None)  # what asyncio does when eof_received returns a false value
        for _ in range(40):
            await asyncio.sleep(0)
        closed_by_server = transport.closed
        protocol.connection_lost(None)
        return transport, closed_by_server

    transport, closed_by_server = asyncio.run(scenario())
    sent = b"".join(transport.writes)
    assert b"echo:hi" in sent and b"echo:you" in sent, sent
    assert closed_by_server  # once both are answered


# -- seeded random fuzzing: KServe and TF Serving bodies, gRPC requests -------------------------------
ATOMS = [None, True, False, 0, -1, 2, 4, 2**63, 2**64 - 1, 2**64, 10**30, 0.5, -0.0, 1e308, float("nan"), float("inf"),
         "", "x", "i", "FP32", "BYTES", "BOOL", "UINT64", "\ud800", "\x00", "\u00b2", "probs", [], {}, [[]], [1, 2], ["a"]]
KEYS = ["name", "datatype", "shape", "data", "parameters", "binary_data_size", "binary_data", "binary_data_output", "timeout", "id", "outputs"]
# model: (input, datatype, shape, data, output)
TARGETS = {"mlp": ("x", "FP32", [1, 4], [0.5] * 4, "probs"), "text": ("i", "BYTES", [1, 2], ["a", "b"], "o"),
           "u64": ("i", "UINT64", [1, 2], [1, 2], "o")}


def _random_value(rng: random.Random, depth: int = 0):
    roll = rng.random()
    if roll < 0.6 or depth > 2:
        return copy.deepcopy(rng.choice(ATOMS))
    if roll < 0.8:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(KEYS): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def _paths(doc, prefix=()):
    yield prefix
    children = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in children:
        yield from _paths(value, prefix + (key,))


def _mutated(rng: random.Random, doc):
    """``doc`` with one to three of its values replaced by random ones, or dropped."""
    for _ in range(rng.randint(1, 3)):
        paths = list(_paths(doc))[1:]
        if not paths:
            break
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if rng.random() < 0.8:
            parent[path[-1]] = _random_value(rng)
        else:
            del parent[path[-1]]
    return doc


def _random_body(rng: random.Random) -> tuple[str, dict]:
    """A good body for one of the models, sometimes with parameters or outputs of the right form
    and random values, then with one to three of its values replaced or dropped, and sometimes
    with random top-level parameters, outputs or id."""
    model = rng.choice(sorted(TARGETS))
    name, datatype, shape, data, output = copy.deepcopy(TARGETS[model])
    doc = {"inputs": [{"name": name, "datatype": datatype, "shape": shape, "data": data}]}
    if rng.random() < 0.3:
        doc["parameters"] = {"binary_data_output": _random_value(rng), "timeout": _random_value(rng)}
    if rng.random() < 0.3:
        doc["outputs"] = [{"name": output, "parameters": _random_value(rng)}]
    _mutated(rng, doc)
    for key in ("parameters", "outputs", "id"):
        if rng.random() < 0.2:
            doc[key] = _random_value(rng)
    return model, doc


def test_seeded_random_kserve_bodies(client, mlp):
    rng = random.Random(20261125)
    for i in range(2000):
        model, doc = _random_body(rng)
        body = json.dumps(doc).encode()
        r = client.post(f"/v2/models/{model}/infer", content=body)
        assert r.status_code in (200, 400, 404) or (r.status_code == 503 and "timed out" in r.text), (i, model, body[:300], r.text)
        if r.status_code != 200:
            error = r.json()["error"]
            assert isinstance(error, str) and error, (i, model, body[:300], r.text)
        if i % 10 == 0:
            check_good(client, mlp)


def test_seeded_random_tf_serving_bodies(client, mlp):
    rng = random.Random(7)
    for i in range(1000):
        model = rng.choice(sorted(TARGETS))
        name, _, _, row, _ = copy.deepcopy(TARGETS[model])
        form = rng.choice(["rows", "named rows", "columns", "named columns"])
        doc = {
            "rows": {"instances": [row]}, "named rows": {"instances": [{name: row}]},
            "columns": {"inputs": [row]}, "named columns": {"inputs": {name: [row]}},
        }[form]
        if rng.random() < 0.2:
            doc["signature_name"] = _random_value(rng)
        body = json.dumps(_mutated(rng, doc)).encode()
        r = client.post(f"/v1/models/{model}:predict", content=body)
        assert r.status_code in (200, 400, 404), (i, model, body[:300], r.text)
        if r.status_code != 200:
            assert isinstance(r.json()["error"], str) and r.json()["error"], (i, model, body[:300], r.text)
        if i % 10 == 0:
            check_good(client, mlp)


DATATYPES = ["FP32", "FP16", "FP64", "BYTES", "BOOL", "UINT64", "INT8", "INT64", "", "fp32"]
DIMS = [0, 1, 2, 4, 2**62, 2**63 - 1]
CONTENTS = {
    "fp32_contents": lambda rng: rng.random(), "fp64_contents": lambda rng: rng.choice([1e308, float("nan"), 0.5]),
    "int_contents": lambda rng: rng.randint(-2**31, 2**31 - 1), "int64_contents": lambda rng: rng.randint(-2**63, 2**63 - 1),
    "uint_contents": lambda rng: rng.randint(0, 2**32 - 1), "uint64_contents": lambda rng: rng.randint(0, 2**64 - 1),
    "bool_contents": lambda rng: rng.random() < 0.5, "bytes_contents": lambda rng: bytes([rng.randrange(256)]),
}
PARAMETERS = {"bool_param": True, "int64_param": -1, "string_param": "soon", "double_param": float("nan"), "uint64_param": 2**64 - 1}


def _random_infer_request(rng: random.Random) -> pb.ModelInferRequest:
    model = rng.choice(sorted(TARGETS))
    name, datatype, shape, _, output = TARGETS[model]
    request = pb.ModelInferRequest(model_name=model, model_version=rng.choice(["", "", "1", "0", "x", "\u00b2"]))
    for _ in range(rng.choice([0, 1, 1, 2])):
        dims = [rng.choice([d, d, *DIMS]) for d in shape] if rng.random() < 0.5 else shape[: rng.randint(0, len(shape))]
        tensor = request.inputs.add(name=rng.choice([name, name, ""]), datatype=rng.choice([datatype, datatype, *DATATYPES]), shape=dims)
        if rng.random() < 0.3:
            field = rng.choice(sorted(CONTENTS))
            getattr(tensor.contents, field).extend(CONTENTS[field](rng) for _ in range(rng.randint(0, 8)))
    for _ in range(rng.choice([0, len(request.inputs), len(request.inputs) + 1])):
        request.raw_input_contents.append(bytes(rng.randrange(256) for _ in range(rng.choice([0, 4, 7, 8, 16, 32]))))
    if rng.random() < 0.3:
        field = rng.choice(sorted(PARAMETERS))
        setattr(request.parameters[rng.choice(["timeout", "binary_data_output"])], field, PARAMETERS[field])
    if rng.random() < 0.2:
        request.outputs.add(name=rng.choice([output, "", "zz"]))
    return request


def test_seeded_random_grpc_infer_requests(stub, mlp):
    rng = random.Random(11)
    for i in range(1000):
        request = _random_infer_request(rng)
        try:
            stub.ModelInfer(request, timeout=10)
        except grpc.RpcError as exc:
            assert exc.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), (i, exc.details(), request)
            assert exc.details(), (i, request)
        if i % 10 == 0:
            reply = stub.ModelInfer(_grpc_infer(), timeout=10)
            np.testing.assert_allclose(np.frombuffer(reply.raw_output_contents[0], "<f4").reshape(2, 3), mlp(X), rtol=1e-5)
