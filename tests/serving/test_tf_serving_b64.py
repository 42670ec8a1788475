"""TensorFlow Serving REST binary values on a real server: ``{"b64": "<base64>"}`` for string
inputs in both formats, base64 answers for ``*_bytes`` outputs and for values that are not UTF-8,
the refusals of malformed binary values, and ragged string data refused rather than flattened."""

from __future__ import annotations

import base64

import httpx
import pytest
from onnx import TensorProto

from tests.serving.conftest import running_server, write_passthrough_model

BINARY = [b"\xff\xfe\x00\x80", bytes(range(256)), b"", "h\u00e9llo".encode()]


def b64(raw: bytes) -> dict:
    return {"b64": base64.b64encode(raw).decode()}


def unb64(value: dict) -> bytes:
    assert set(value) == {"b64"}, value
    return base64.b64decode(value["b64"], validate=True)


def as_text_or_b64(raw: bytes):
    """How an output not named *_bytes carries ``raw``: text where it is UTF-8, else base64."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return b64(raw)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tf_b64") / "models"
    # texts: a string and a float input; the strings come back as "echo" and as "echo_bytes".
    write_passthrough_model(root / "texts" / "1" / "model.flow",
                            {"text": (TensorProto.STRING, ["n", 2]), "x": (TensorProto.FLOAT, ["n", 2])},
                            {"echo": "text", "echo_bytes": "text", "y": "x"})
    # blob: one string per row, one output.
    write_passthrough_model(root / "blob" / "1" / "model.flow", {"blob": (TensorProto.STRING, ["n"])}, {"blob_bytes": "blob"})
    with running_server(root, grpc_port=None, max_request_bytes=1 << 20) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.http_url, timeout=10) as c:
        yield c


def predict(client: httpx.Client, model: str, body: dict) -> httpx.Response:
    return client.post(f"/v1/models/{model}:predict", json=body)


def test_row_format_round_trips_binary_values(client):
    rows = [[BINARY[0], b"plain"], [BINARY[1], BINARY[3]]]
    instances = [
        {"text": [b64(rows[0][0]), "plain"], "x": [1.0, 2.0]},
        {"text": [b64(rows[1][0]), b64(rows[1][1])], "x": [3.0, 4.0]},
    ]
    r = predict(client, "texts", {"instances": instances})
    assert r.status_code == 200, r.text
    predictions = r.json()["predictions"]
    assert [[unb64(v) for v in p["echo_bytes"]] for p in predictions] == rows
    assert [p["echo"] for p in predictions] == [[b64(BINARY[0]), "plain"], [b64(BINARY[1]), "h\u00e9llo"]]
    assert [p["y"] for p in predictions] == [[1.0, 2.0], [3.0, 4.0]]


def test_columnar_format_round_trips_binary_values(client):
    text = [[BINARY[0], BINARY[2]], [BINARY[1], BINARY[3]]]
    r = predict(client, "texts", {"inputs": {"text": [[b64(v) for v in row] for row in text], "x": [[0.5, 1.5], [2.5, 3.5]]}})
    assert r.status_code == 200, r.text
    outputs = r.json()["outputs"]
    assert [[unb64(v) for v in row] for row in outputs["echo_bytes"]] == text
    assert outputs["echo"] == [[as_text_or_b64(v) for v in row] for row in text]
    assert outputs["echo"][1][1] == "h\u00e9llo" and outputs["echo"][0][1] == ""
    assert outputs["y"] == [[0.5, 1.5], [2.5, 3.5]]


def test_bare_lists_take_binary_values_as_values(client):
    # A {"b64": ...} instance, or a lone one as 'inputs', is a value, not an object keyed by input name.
    r = predict(client, "blob", {"instances": [b64(v) for v in BINARY] + ["text"]})
    assert r.status_code == 200, r.text
    assert [unb64(v) for v in r.json()["predictions"]] == BINARY + [b"text"]
    r = predict(client, "blob", {"inputs": [b64(BINARY[1]), "a"]})
    assert r.status_code == 200, r.text
    assert [unb64(v) for v in r.json()["outputs"]] == [BINARY[1], b"a"]
    # Padding may be left out and line breaks (the base64 tool's) are skipped, as TF Serving does.
    r = predict(client, "blob", {"instances": [{"b64": "/w"}, {"b64": "YWJj\nZGVm\n"}]})
    assert r.status_code == 200, r.text
    assert [unb64(v) for v in r.json()["predictions"]] == [b"\xff", b"abcdef"]


@pytest.mark.parametrize(
    "value, message",
    [
        ({"b64": "not base64!"}, "input 'blob': 'b64' value 'notbase64!' is not valid base64"),
        ({"b64": "YWJjZ"}, "input 'blob': 'b64' value 'YWJjZ' is not valid base64"),
        ({"b64": "\u00e9\u00e9\u00e9\u00e9"}, "is not valid base64"),
        ({"b64": "YQ==", "extra": 1}, "input 'blob': a binary value must be an object {\"b64\": \"<base64 string>\"} and nothing else"),
        ({"b64": 5}, "input 'blob': a binary value must be an object {\"b64\": \"<base64 string>\"} and nothing else, got {'b64': 5}"),
        ({"data": "YQ=="}, "input 'blob': a binary value must be an object"),
        (7, "input 'blob': BYTES data must be strings or {\"b64\": \"<base64>\"} objects, got int"),
    ],
    ids=["bad-character", "bad-length", "non-ascii", "extra-key", "non-string", "other-object", "number"],
)
def test_malformed_binary_values_are_refused(client, value, message):
    for body in ({"instances": ["a", value]}, {"inputs": ["a", value]}, {"inputs": {"blob": ["a", value]}}):
        r = predict(client, "blob", body)
        assert r.status_code == 400 and message in r.json()["error"], (body, r.text)
    nested = predict(client, "texts", {"inputs": {"text": [["a", value]], "x": [[0.0, 0.0]]}})
    assert nested.status_code == 400 and message.replace("'blob'", "'text'") in nested.json()["error"], nested.text


@pytest.mark.parametrize(
    "model, body",
    [
        # Each was flattened into a tensor of another shape and answered 200.
        ("blob", {"instances": ["a", ["b"]]}),
        ("blob", {"inputs": [["a"], "b"]}),
        ("texts", {"instances": [{"text": ["a", "b"], "x": [1.0, 2.0]}, {"text": [["c"], "d"], "x": [3.0, 4.0]}]}),
        ("texts", {"inputs": {"text": [["a", "b"], [["c"], "d"]], "x": [[1.0, 2.0], [3.0, 4.0]]}}),
        ("texts", {"inputs": {"text": [["a", "b"], ["c"]], "x": [[1.0, 2.0], [3.0, 4.0]]}}),
    ],
    ids=["row-bare", "columnar-bare", "row-named", "columnar-named-depth", "columnar-named-length"],
)
def test_ragged_string_data_is_refused(client, model, body):
    r = predict(client, model, body)
    tensor = "blob" if model == "blob" else "text"
    assert r.status_code == 400 and f"input '{tensor}': data is not a regular array" in r.json()["error"], r.text
    # Numbers nested the same way were refused already, with the same words.
    ragged_numbers = predict(client, "texts", {"inputs": {"text": [["a", "b"], ["c", "d"]], "x": [[1.0, 2.0], [3.0]]}})
    assert ragged_numbers.status_code == 400 and "input 'x': not a regular array" in ragged_numbers.json()["error"]


def test_error_messages_clip_echoed_values(client):
    long_name = "n" * 100_000
    r = predict(client, "texts", {"inputs": {long_name: [["a", "b"]], "x": [[0.0, 0.0]]}})
    assert r.status_code == 400 and "unknown input 'nnnn" in r.json()["error"]
    assert len(r.content) < 1000 and "..." in r.json()["error"]
    r = predict(client, "blob", {"instances": ["a"], "signature_name": "s" * 100_000})
    assert r.status_code == 400 and "unknown signature_name 'ssss" in r.json()["error"] and len(r.content) < 1000
    r = predict(client, "blob", {"instances": [{"b64": "!" * 100_000}]})
    assert r.status_code == 400 and "is not valid base64" in r.json()["error"] and len(r.content) < 1000
