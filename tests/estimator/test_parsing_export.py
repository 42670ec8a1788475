"""TF 1.x's usual Estimator export for TensorFlow Serving: a parsing receiver fed serialized
tf.train.Example records, frozen into a .flow the edge runtime runs (ParseExample included)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import edge_runtime
from edge_runtime.example_records import example_inputs
import trainer as tf
from exporter.freeze_source import FreezeError
from trainer.example_proto import BytesList, Example, Feature, Features, FloatList, Int64List

fc = tf.feature_column
ROWS = 48
COLORS, CITIES = [b"red", b"green", b"blue"], [b"paris", b"rome", b"oslo", b"lima"]


def dataset(seed: int = 0) -> tuple[dict, np.ndarray]:
    rng = np.random.RandomState(seed)
    features = {"x": rng.randn(ROWS, 3).astype(np.float32), "age": rng.uniform(10, 80, ROWS).astype(np.float32),
                "color": rng.choice(COLORS, ROWS), "city": rng.choice(CITIES, ROWS),
                "slot": rng.randint(0, 5, ROWS).astype(np.int64)}
    label = ((features["x"][:, 0] > 0).astype(np.int64) + (features["color"] == b"red")).astype(np.int64)
    return features, label


def serialized(features: dict, rows) -> np.ndarray:
    """The rows as records built by the protobuf package (the reference encoder)."""
    def feature(value):
        value = np.atleast_1d(value)
        if value.dtype.kind in "SO":
            return Feature(bytes_list=BytesList(value=list(value)))
        if value.dtype.kind == "f":
            return Feature(float_list=FloatList(value=value.tolist()))
        return Feature(int64_list=Int64List(value=value.tolist()))

    records = [Example(features=Features(feature={k: feature(v[i]) for k, v in features.items()})).SerializeToString()
               for i in rows]
    out = np.empty(len(records), dtype=object)
    out[:] = records
    return out


def columns(linear: bool) -> list:
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    city = fc.categorical_column_with_hash_bucket("city", 7)
    slot = fc.categorical_column_with_identity("slot", 5)
    age = fc.bucketized_column(fc.numeric_column("age"), [20.0, 40.0, 60.0])
    if linear:
        return [fc.numeric_column("x", shape=(3,)), color, city, slot, age]
    return [fc.numeric_column("x", shape=(3,)), fc.indicator_column(color), fc.embedding_column(city, 2),
            fc.indicator_column(slot), age]


def trained(estimator, features: dict, label: np.ndarray):
    estimator.train(lambda: tf.data.Dataset.from_tensor_slices((features, label)).batch(16).repeat(), steps=6)
    return estimator


def exported_model(estimator, cols, tmp_path) -> edge_runtime.Model:
    receiver_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(fc.make_parse_example_spec(cols))
    path = estimator.export_saved_model(str(tmp_path / "export"), receiver_fn).decode()
    return edge_runtime.load(os.path.join(path, "model.flow"))


def predictions(estimator, features: dict, rows) -> list[dict]:
    picked = {k: v[rows] for k, v in features.items()}
    return list(estimator.predict(lambda: tf.data.Dataset.from_tensor_slices(picked).batch(len(rows))))


def test_the_receiver_is_tf_1_15s():
    spec = {"x": tf.FixedLenFeature([2], tf.float32), "tag": tf.VarLenFeature(tf.string),
            "n": tf.FixedLenFeature([], tf.int64, default_value=7)}
    with tf.Graph().as_default():
        receiver = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec)()
        fixed = tf.estimator.export.build_parsing_serving_input_receiver_fn(spec, default_batch_size=3)()
        examples = receiver.receiver_tensors["examples"]
        assert list(receiver.receiver_tensors) == ["examples"] and examples.name == "input_example_tensor:0"
        assert examples.dtype == tf.string and tuple(examples.shape) == (None,)
        assert tuple(fixed.receiver_tensors["examples"].shape) == (3,)
        records = serialized({"x": np.float32([[1, 2], [3, 4]]), "tag": np.array([b"a", b"\xc3\xa9"], object)}, [0, 1])
        with tf.Session() as sess:
            x, n, tag = sess.run([receiver.features["x"], receiver.features["n"], receiver.features["tag"]],
                                 {examples: records})
    assert x.tolist() == [[1, 2], [3, 4]] and n.tolist() == [7, 7]
    assert tag.indices.tolist() == [[0, 0], [1, 0]] and tag.values.tolist() == [b"a", b"\xc3\xa9"]


def test_receivers_wrap_lone_tensors_and_check_alternatives():
    with tf.Graph().as_default():
        raw = tf.placeholder(tf.float32, [None, 2])
        receiver = tf.estimator.export.ServingInputReceiver(raw, raw, {"other": raw})
        assert receiver.features == {"feature": raw} and receiver.receiver_tensors == {"input": raw}
        assert receiver.receiver_tensors_alternatives == {"other": {"input": raw}}
        tensor_receiver = tf.estimator.export.TensorServingInputReceiver(raw, {"x": raw})
        assert tensor_receiver.features is raw
        with pytest.raises(ValueError, match="receiver_tensors_alternatives must be a dict"):
            tf.estimator.export.ServingInputReceiver(raw, raw, [raw])
        with pytest.raises(ValueError, match=r"receiver_tensors\['x'\] is int"):
            tf.estimator.export.ServingInputReceiver(raw, {"x": 3})
        with pytest.raises(ValueError, match="features must be a Tensor or SparseTensor, got dict"):
            tf.estimator.export.TensorServingInputReceiver({"x": raw}, raw)
    with pytest.raises(ValueError, match="feature_spec must be a non-empty dict"):
        tf.estimator.export.build_parsing_serving_input_receiver_fn({})


def test_a_tensor_receiver_hands_the_model_fn_one_tensor(tmp_path):
    def model_fn(features, labels, mode):
        assert isinstance(features, tf.Tensor)  # not a dict
        w = tf.get_variable("w", [2, 1], initializer=tf.constant_initializer([[2.0], [-1.0]]))
        y = tf.matmul(features, w)
        step = tf.train.get_or_create_global_step()
        loss = tf.reduce_mean(y)
        return tf.estimator.EstimatorSpec(mode, predictions={"y": y}, loss=loss, train_op=tf.assign_add(step, 1))

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "model"))
    est.train(lambda: (tf.constant(np.ones((2, 2), np.float32)), None), steps=1)

    def receiver_fn():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        return tf.estimator.export.TensorServingInputReceiver(x, {"x": x})

    path = est.export_saved_model(str(tmp_path / "export"), receiver_fn).decode()
    out = edge_runtime.load(os.path.join(path, "model.flow")).run({"x": np.float32([[1, 1], [3, 0]])})
    assert out["y"].tolist() == [[1.0], [6.0]]


def test_a_dnn_classifier_served_on_examples_matches_predict(tmp_path):
    features, label = dataset()
    cols = columns(linear=False)
    est = trained(tf.estimator.DNNClassifier([8], cols, n_classes=3, model_dir=str(tmp_path / "model"),
                                             config=tf.estimator.RunConfig(tf_random_seed=3)), features, label)
    model = exported_model(est, cols, tmp_path)
    assert [(i.name, i.dtype, tuple(i.shape)) for i in model.inputs] == [("examples", np.dtype(object), (-1,))]
    rows = np.arange(0, ROWS, 3)
    scores = model.run({"examples": serialized(features, rows)})["scores"]
    want = np.stack([p["probabilities"] for p in predictions(est, features, rows)])
    np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-6)
    assert np.allclose(scores.sum(axis=1), 1.0, atol=1e-5)
    warmup = example_inputs(model.metadata)  # what a server feeds it first, and knows it by
    assert list(warmup) == ["examples"]
    assert model.run({"examples": np.array([warmup["examples"]], dtype=object)})["scores"].shape == (1, 3)


def test_a_linear_regressor_served_on_examples_matches_predict(tmp_path):
    features, label = dataset(1)
    cols = columns(linear=True)
    est = trained(tf.estimator.LinearRegressor(cols, model_dir=str(tmp_path / "model"),
                                               config=tf.estimator.RunConfig(tf_random_seed=3)),
                  features, label.astype(np.float32))
    model = exported_model(est, cols, tmp_path)
    rows = np.arange(ROWS)
    out = model.run({"examples": serialized(features, rows)})
    assert list(out) == ["outputs"]
    want = np.stack([p["predictions"] for p in predictions(est, features, rows)])
    np.testing.assert_allclose(out["outputs"], want, rtol=1e-5, atol=1e-6)
    assert np.ptp(want) > 0.05  # trained: the categorical weights moved the predictions apart
    without_age = serialized({k: v for k, v in features.items() if k != "age"}, [1])
    with pytest.raises(Exception, match=r"Feature: age \(data type: float32\) is required.*\(example 1\)"):
        model.run({"examples": np.concatenate([serialized(features, [0]), without_age])})
    with pytest.raises(Exception, match="value 1: not a serialized tf.train.Example"):
        model.run({"examples": np.array([serialized(features, [0])[0], b"\x0a\x09\x0a"], dtype=object)})


def test_an_op_the_edge_lacks_is_named_with_its_column(tmp_path):
    features, label = dataset()
    doubled = fc.numeric_column("age", normalizer_fn=lambda t: tf.py_func(lambda a: a * 2, [t], tf.float32))
    est = trained(tf.estimator.LinearRegressor([doubled], model_dir=str(tmp_path / "model")), {"age": features["age"]},
                  label.astype(np.float32))
    with pytest.raises(FreezeError, match=r"PyFunc \(node '[^']*age/PyFunc'\) has no edge runtime kernel"):
        exported_model(est, [doubled], tmp_path)
