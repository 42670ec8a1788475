"""Canned classifiers as TF 1.15 scripts use them: string labels through ``label_vocabulary`` and
the predictions TF's heads give (classes as bytes, all_class_ids, all_classes, logistic)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

fc = tf.feature_column


def _points(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)).astype(np.float32)
    return x, (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)  # classes 0, 1, 2


def _input(x, y=None, epochs=1, shuffle=False, batch_size=50):
    return tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=batch_size, num_epochs=epochs, shuffle=shuffle)


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_dnn_classifier_with_a_label_vocabulary_predicts_its_strings(tmp_path):
    x, ids = _points()
    vocabulary = ["low", "mid", "high"]
    labels = np.array(vocabulary, dtype=object)[ids]
    est = tf.estimator.DNNClassifier([8], [fc.numeric_column("x", shape=2)], model_dir=str(tmp_path), n_classes=3,
                                     label_vocabulary=vocabulary, optimizer="Adam", learning_rate=0.05,
                                     config=tf.estimator.RunConfig(tf_random_seed=0))
    est.train(_input(x, labels, epochs=None, shuffle=True), steps=150)
    assert est.evaluate(_input(x, labels))["accuracy"] > 0.85
    predictions = list(est.predict(_input(x[:20])))
    for p in predictions:
        assert p["logits"].shape == (3,) and p["class_ids"].shape == (1,)
        np.testing.assert_allclose(p["probabilities"], _softmax(p["logits"]), rtol=1e-5)
        assert p["class_ids"][0] == np.argmax(p["logits"])
        assert p["classes"].tolist() == [vocabulary[p["class_ids"][0]].encode()]
        assert p["all_class_ids"].tolist() == [0, 1, 2] and p["all_class_ids"].dtype == np.int32
        assert p["all_classes"].tolist() == [b"low", b"mid", b"high"]
    assert np.mean([p["class_ids"][0] for p in predictions] == ids[:20]) > 0.8


def test_binary_linear_classifier_has_one_logit_and_a_logistic(tmp_path):
    x, _ = _points(seed=1)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    est = tf.estimator.LinearClassifier([fc.numeric_column("x", shape=2)], model_dir=str(tmp_path))
    est.train(_input(x, y, epochs=5, shuffle=True))
    assert est.get_variable_value("logits/kernel").shape == (2, 1)
    m = est.evaluate(_input(x, y))
    assert m["accuracy"] > 0.9 and {"auc", "precision", "recall", "label/mean", "prediction/mean"} <= set(m)
    np.testing.assert_allclose(m["label/mean"], y.mean(), rtol=1e-6)
    for p in est.predict(_input(x[:10])):
        logit = p["logits"][0]
        assert p["logits"].shape == (1,) and p["logistic"].shape == (1,)
        np.testing.assert_allclose(p["logistic"][0], 1 / (1 + np.exp(-logit)), rtol=1e-5)
        np.testing.assert_allclose(p["probabilities"], [1 - p["logistic"][0], p["logistic"][0]], rtol=1e-5, atol=1e-7)
        assert p["class_ids"].tolist() == [int(logit > 0)] and p["classes"].tolist() == [str(int(logit > 0)).encode()]
        assert p["all_classes"].tolist() == [b"0", b"1"] and p["all_class_ids"].tolist() == [0, 1]


def test_wide_and_deep_with_a_binary_vocabulary(tmp_path):
    x, _ = _points(seed=2)
    labels = np.where(x[:, 0] - x[:, 1] > 0, "spam", "ham").astype(object)
    est = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=str(tmp_path), linear_feature_columns=[fc.numeric_column("x", shape=2)],
        dnn_feature_columns=[fc.numeric_column("x", shape=2)], dnn_hidden_units=[4], label_vocabulary=("ham", "spam"),
        config=tf.estimator.RunConfig(tf_random_seed=0))
    est.train(_input(x, labels, epochs=5, shuffle=True))
    assert est.evaluate(_input(x, labels))["accuracy"] > 0.85
    p = next(iter(est.predict(_input(x[:1]))))
    assert p["classes"].tolist() == [[b"ham", b"spam"][p["class_ids"][0]]]
    assert p["all_classes"].tolist() == [b"ham", b"spam"] and "logistic" in p


def test_a_label_outside_the_vocabulary_or_the_classes_fails_the_step(tmp_path):
    x, _ = _points(n=4)
    column = [fc.numeric_column("x", shape=2)]
    est = tf.estimator.LinearClassifier(column, model_dir=str(tmp_path / "vocab"), label_vocabulary=["a", "b"])
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Labels must be in label_vocabulary \['a', 'b'\].*c"):
        est.train(_input(x, np.array(["a", "b", "c", "a"], dtype=object)), steps=1)
    est = tf.estimator.DNNClassifier([2], column, model_dir=str(tmp_path / "ids"), n_classes=3)
    with pytest.raises(tf.errors.InvalidArgumentError, match="Labels must <= n_classes - 1"):
        est.train(_input(x, np.array([0, 1, 3, 2])), steps=1)


def test_bad_vocabularies_and_labels_are_refused():
    column = [fc.numeric_column("x", shape=2)]
    with pytest.raises(ValueError, match="label_vocabulary should be a list or a tuple"):
        tf.estimator.LinearClassifier(column, label_vocabulary="ab")
    with pytest.raises(ValueError, match="DNNClassifier: label_vocabulary has 2 entries, but n_classes is 3"):
        tf.estimator.DNNClassifier([2], column, n_classes=3, label_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="n_classes must be at least 2"):
        tf.estimator.LinearClassifier(column, n_classes=1)
    x, ids = _points(n=4)
    est = tf.estimator.LinearClassifier(column, label_vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="Labels dtype should be string if there is a vocabulary"):
        est.train(_input(x, ids), steps=1)
    est = tf.estimator.LinearClassifier(column)
    with pytest.raises(ValueError, match="Labels dtype should be integer"):
        est.train(_input(x, ids.astype(np.float32)), steps=1)
