"""Categorical feature columns as the TF1 "wide and deep" tutorials use them: vocabulary, hash,
identity and bucketized columns through indicator and embedding columns, in input_layer and in
canned estimators, and the parse spec they make."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

fc = tf.feature_column


def test_input_layer_of_indicator_embedding_and_bucketized_columns():
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"], num_oov_buckets=1)
    city = fc.categorical_column_with_hash_bucket("city", 7)
    age = fc.numeric_column("age")
    ident = fc.categorical_column_with_identity("n", 4)
    columns = [fc.indicator_column(color), fc.embedding_column(city, 3, combiner="sum"),
               fc.bucketized_column(age, [18, 30, 60]), age, fc.indicator_column(ident)]
    features = {"color": tf.constant(["red", "blue", "pink"]), "city": tf.constant([["a", "b"], ["a", ""], ["", ""]]),
                "age": tf.constant([10.0, 40.0, 70.0]), "n": tf.constant([[1, 3], [0, -1], [9, 2]])}
    out = fc.input_layer(features, columns)
    assert out.shape[1] == 4 + 3 + 4 + 1 + 4
    (weights,) = tf.global_variables()
    assert weights.name == "input_layer/city_embedding/embedding_weights:0" and weights.shape == (7, 3)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, table = sess.run([out, weights])
    np.testing.assert_array_equal(got[:, :4], [[1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])  # pink: the OOV bucket
    np.testing.assert_array_equal(got[:, 7:12], [[1, 0, 0, 0, 10], [0, 0, 1, 0, 40], [0, 0, 0, 1, 70]])
    np.testing.assert_array_equal(got[:, 12:], [[0, 1, 0, 1], [1, 0, 0, 0], [0, 0, 1, 0]])  # 9 and -1: no id
    assert np.allclose(got[2, 4:7], 0)  # no city: zeros
    def is_row(v):
        return any(np.allclose(v, row, atol=1e-6) for row in table)

    assert is_row(got[1, 4:7]) and is_row(got[0, 4:7] - got[1, 4:7])  # "a" alone; "a" + "b": sums of table rows
    with pytest.raises(TypeError, match="wrap it with indicator_column or embedding_column"):
        fc.input_layer(features, [color])


def test_canned_estimators_learn_from_categorical_features(tmp_path):
    rng = np.random.default_rng(0)
    colors = np.array(["red", "green", "blue"], dtype=object)[rng.integers(0, 3, 600)]
    labels = (colors == "blue").astype(np.int64)
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    input_fn = tf.estimator.inputs.numpy_input_fn({"color": colors}, labels, batch_size=50, num_epochs=None, shuffle=True)
    eval_fn = tf.estimator.inputs.numpy_input_fn({"color": colors}, labels, batch_size=600, num_epochs=1, shuffle=False)
    linear = tf.estimator.LinearClassifier([color], model_dir=str(tmp_path / "linear"))
    dnn = tf.estimator.DNNClassifier([8], [fc.embedding_column(color, 2)], model_dir=str(tmp_path / "dnn"))
    for estimator in (linear, dnn):
        estimator.train(input_fn, steps=100)
        assert estimator.evaluate(eval_fn)["accuracy"] == 1.0


def test_parse_spec_for_the_columns():
    age = fc.numeric_column("age", default_value=0.0)
    spec = fc.make_parse_example_spec([fc.bucketized_column(age, [1.0]), fc.embedding_column(
        fc.categorical_column_with_hash_bucket("city", 5), 2), fc.indicator_column(fc.categorical_column_with_identity("n", 3))])
    assert spec["age"] == tf.FixedLenFeature((1,), np.dtype(np.float32), 0.0)
    assert isinstance(spec["city"], tf.VarLenFeature) and spec["n"] == tf.VarLenFeature(np.dtype(np.int64))


def test_wide_and_deep_learns_a_crossing_the_wide_part_alone_cannot(tmp_path):
    rng = np.random.default_rng(1)
    colors = np.array(["red", "green", "blue"], dtype=object)[rng.integers(0, 3, 900)]
    sizes = rng.standard_normal(900).astype(np.float32)
    labels = ((colors == "blue") ^ (sizes > 0)).astype(np.int64)  # an interaction: no linear model fits it
    color = fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"])
    size = fc.numeric_column("size")
    features = {"color": colors, "size": sizes}
    input_fn = tf.estimator.inputs.numpy_input_fn(features, labels, batch_size=64, num_epochs=None, shuffle=True)
    eval_fn = tf.estimator.inputs.numpy_input_fn(features, labels, batch_size=900, num_epochs=1, shuffle=False)
    model = tf.estimator.DNNLinearCombinedClassifier(
        model_dir=str(tmp_path / "wd"), linear_feature_columns=[color, size],
        dnn_feature_columns=[fc.embedding_column(color, 3), size], dnn_hidden_units=[16, 8], dnn_optimizer="Adam",
        dnn_learning_rate=0.02)
    model.train(input_fn, steps=300)
    accuracy = model.evaluate(eval_fn)["accuracy"]
    names = model.get_variable_names()
    assert any(n.startswith("linear/") for n in names) and any(n.startswith("dnn/") for n in names)
    assert model.get_variable_value("global_step") == 300 and accuracy >= 0.9, accuracy
    with pytest.raises(ValueError, match="dnn_hidden_units must be given"):
        tf.estimator.DNNLinearCombinedClassifier(dnn_feature_columns=[size])
