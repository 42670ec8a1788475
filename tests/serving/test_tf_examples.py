"""TF Serving's REST :classify, :regress and :predict, and its gRPC Classify and Regress, on
Estimators exported with the parsing receiver (their one input: serialized tf.train.Example
records), through a real server."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import httpx
import numpy as np
import pytest

import trainer as tf
from tests.serving.conftest import running_server
from trainer.example_proto import BytesList, Example, Feature, Features, FloatList, Int64List

fc = tf.feature_column
ROWS = 24  # within the default max_batch_size (32)
TIMEOUT = 30.0


def dataset() -> tuple[dict, np.ndarray]:
    rng = np.random.RandomState(5)
    features = {"x": rng.randn(ROWS, 2).astype(np.float32), "color": rng.choice([b"red", b"green", b"blue"], ROWS),
                "slot": rng.randint(0, 4, ROWS).astype(np.int64)}
    label = ((features["x"][:, 0] > 0) + (features["color"] == b"red")).astype(np.int64)
    return features, label


def columns() -> list:
    return [fc.numeric_column("x", shape=(2,)),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])),
            fc.indicator_column(fc.categorical_column_with_identity("slot", 4))]


def as_json(features: dict, i: int) -> dict:
    """Row ``i`` in TF Serving's JSON example form."""
    return {"x": features["x"][i].tolist(), "color": [features["color"][i].decode()], "slot": int(features["slot"][i])}


def as_record(features: dict, i: int) -> bytes:
    return Example(features=Features(feature={
        "x": Feature(float_list=FloatList(value=features["x"][i].tolist())),
        "color": Feature(bytes_list=BytesList(value=[features["color"][i]])),
        "slot": Feature(int64_list=Int64List(value=[int(features["slot"][i])])),
    })).SerializeToString()


def predictions(estimator, features: dict, key: str) -> np.ndarray:
    out = estimator.predict(lambda: tf.data.Dataset.from_tensor_slices(features).batch(ROWS))
    return np.stack([p[key] for p in out])


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> tuple[Path, dict, np.ndarray, np.ndarray]:
    """A model repository with a classifier and a regressor, and their predict() outputs."""
    root = tmp_path_factory.mktemp("tf_examples")
    features, label = dataset()
    cols = columns()
    receiver_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(fc.make_parse_example_spec(cols))
    config = tf.estimator.RunConfig(tf_random_seed=2)

    def train(estimator, labels):
        estimator.train(lambda: tf.data.Dataset.from_tensor_slices((features, labels)).batch(10).repeat(), steps=6)
        return estimator

    classifier = train(tf.estimator.DNNClassifier([6], cols, n_classes=3, model_dir=str(root / "clf_dir"),
                                                  config=config), label)
    regressor = train(tf.estimator.LinearRegressor(cols, model_dir=str(root / "reg_dir"), config=config),
                      label.astype(np.float32))
    classifier.export_saved_model(str(root / "models" / "clf"), receiver_fn)
    regressor.export_saved_model(str(root / "models" / "reg"), receiver_fn)
    return (root / "models", features, predictions(classifier, features, "probabilities"),
            predictions(regressor, features, "predictions"))


def test_classify_and_regress_build_records_from_json_examples(served):
    repo, features, probabilities, values = served
    rows = list(range(ROWS))
    with running_server(repo) as server:
        url = server.http_url
        r = httpx.post(f"{url}/v1/models/clf:classify", json={"examples": [as_json(features, i) for i in rows]},
                       timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert [[label for label, _ in row] for row in results] == [["0", "1", "2"]] * ROWS
        np.testing.assert_allclose([[s for _, s in row] for row in results], probabilities, rtol=1e-5, atol=1e-6)

        # A feature shared by every example may come once, in the context.
        context = {"slot": 1}
        body = {"context": context, "examples": [{k: v for k, v in as_json(features, i).items() if k != "slot"}
                                                 for i in rows]}
        r = httpx.post(f"{url}/v1/models/reg:regress", json=body, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        shared = {**features, "slot": np.ones(ROWS, np.int64)}
        r_each = httpx.post(f"{url}/v1/models/reg:regress",
                            json={"examples": [as_json(shared, i) for i in rows]}, timeout=TIMEOUT)
        assert r.json()["results"] == r_each.json()["results"]
        r = httpx.post(f"{url}/v1/models/reg:regress", json={"examples": [as_json(features, i) for i in rows]},
                       timeout=TIMEOUT)
        np.testing.assert_allclose(r.json()["results"], values[:, 0], rtol=1e-5, atol=1e-6)


def test_predict_takes_base64_records(served):
    repo, features, probabilities, _ = served
    instances = [{"b64": base64.b64encode(as_record(features, i)).decode()} for i in range(3)]
    with running_server(repo) as server:
        r = httpx.post(f"{server.http_url}/v1/models/clf:predict", json={"instances": instances}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(r.json()["predictions"], probabilities[:3], rtol=1e-5, atol=1e-6)
        r = httpx.post(f"{server.http_url}/v1/models/clf:predict",
                       json={"inputs": {"examples": instances}}, timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(r.json()["outputs"], probabilities[:3], rtol=1e-5, atol=1e-6)
        garbage = {"b64": base64.b64encode(b"\x0a\x09\x0a").decode()}
        r = httpx.post(f"{server.http_url}/v1/models/clf:predict", json={"instances": [instances[0], garbage]},
                       timeout=TIMEOUT)
        assert r.status_code == 400 and "value 1: not a serialized tf.train.Example" in r.json()["error"], r.text


BAD_BODIES = [
    ({"examples": [{"x": [1, 2.5], "color": ["red"], "slot": 0}]}, "feature 'x' mixes int64 and float values"),
    ({"examples": [{"x": [0.5, 1.5], "color": [None], "slot": 0}]}, r"examples\[0\]: feature 'color' has an element"),
    ({"examples": [{"x": [0.5, 1.5], "color": ["red"], "slot": 0}, 3]}, "a non-empty list of objects"),
    ({"examples": [{"x": [0.5, 1.5], "color": {"b64": "%%"}, "slot": 0}]}, "not valid base64"),
    ({"examples": [{"x": [0.5, 1.5], "slot": 2 ** 63}]}, "outside int64"),
    ({"context": {"x": [[1.0]]}, "examples": [{"slot": 0}]}, "context: feature 'x' has an element"),
    ({"examples": [{"color": ["red"], "slot": 0}]}, r"Feature: x \(data type: float32\) is required"),
    ({"examples": [{"x": [1, 2], "color": ["red"], "slot": 0}]}, "Key: x. Data types don't match"),
    ({"examples": [{"x": [0.5, 1.5], "color": ["red"], "slot": 0}], "signature_name": "other"},
     "unknown signature_name"),
]


def test_bad_examples_get_400_naming_the_feature(served):
    repo = served[0]
    with running_server(repo) as server:
        for body, message in BAD_BODIES:
            r = httpx.post(f"{server.http_url}/v1/models/clf:classify", json=body, timeout=TIMEOUT)
            assert r.status_code == 400, (body, r.text)
            assert re.search(message, r.json()["error"]), (message, r.json()["error"])


def test_grpc_classify_and_regress_take_example_lists(served):
    import grpc

    from serving.tf_serving_grpc import messages

    repo, features, probabilities, values = served
    records = [as_record(features, i) for i in range(ROWS)]
    with running_server(repo) as server, grpc.insecure_channel(server.grpc_address) as channel:
        def call(method: str, request, response: str):
            rpc = channel.unary_unary(f"/tensorflow.serving.PredictionService/{method}",
                                      request_serializer=type(request).SerializeToString,
                                      response_deserializer=messages(response).FromString)
            return rpc(request, timeout=TIMEOUT)

        request = messages("ClassificationRequest")()
        request.model_spec.name = "clf"
        request.input.example_list.examples.extend(records)
        answer = call("Classify", request, "ClassificationResponse")
        scores = [[c.score for c in row.classes] for row in answer.result.classifications]
        assert [[c.label for c in row.classes] for row in answer.result.classifications] == [["0", "1", "2"]] * ROWS
        np.testing.assert_allclose(scores, probabilities, rtol=1e-5, atol=1e-6)
        assert answer.model_spec.name == "clf" and answer.model_spec.version.value > 0

        # The context's features go into every example (its "slot" here).
        shared = {**features, "slot": np.full(ROWS, 3, np.int64)}
        context = Example(features=Features(feature={"slot": Feature(int64_list=Int64List(value=[3]))}))
        without_slot = [Example(features=Features(feature={
            k: f for k, f in Example.FromString(r).features.feature.items() if k != "slot"})).SerializeToString()
            for r in records]
        request = messages("RegressionRequest")()
        request.model_spec.name = "reg"
        request.model_spec.signature_name = "serving_default"
        request.input.example_list_with_context.examples.extend(without_slot)
        request.input.example_list_with_context.context = context.SerializeToString()
        with_context = [r.value for r in call("Regress", request, "RegressionResponse").result.regressions]
        request = messages("RegressionRequest")()
        request.model_spec.name = "reg"
        request.input.example_list.examples.extend(as_record(shared, i) for i in range(ROWS))
        each = [r.value for r in call("Regress", request, "RegressionResponse").result.regressions]
        assert with_context == each
        request = messages("RegressionRequest")()
        request.model_spec.name = "reg"
        request.input.example_list.examples.extend(records)
        plain = [r.value for r in call("Regress", request, "RegressionResponse").result.regressions]
        np.testing.assert_allclose(plain, values[:, 0], rtol=1e-5, atol=1e-6)

        bad = messages("ClassificationRequest")()
        bad.model_spec.name = "clf"
        bad.input.example_list.examples.extend([records[0], b"\x0a\x09\x0a"])
        with pytest.raises(grpc.RpcError) as caught:
            call("Classify", bad, "ClassificationResponse")
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "value 1: not a serialized tf.train.Example" in caught.value.details()
        empty = messages("ClassificationRequest")()
        empty.model_spec.name = "clf"
        with pytest.raises(grpc.RpcError, match="neither example_list nor example_list_with_context"):
            call("Classify", empty, "ClassificationResponse")
