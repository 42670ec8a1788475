"""tf.contrib.predictor: an Estimator's export and a SavedModel folder called like functions, giving
what the model computed in training."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

X = np.random.default_rng(0).random((40, 4)).astype(np.float32)
Y = (X.sum(axis=1) > 2).astype(np.int64)


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _model_fn(features, labels, mode):
    logits = tf.layers.dense(features["x"], 2)
    classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"classes": classes, "logits": logits})
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.train.AdamOptimizer(0.05).minimize(
        loss, tf.train.get_global_step()))


@pytest.fixture
def estimator(tmp_path):
    est = tf.estimator.Estimator(_model_fn, str(tmp_path / "model"), config=tf.estimator.RunConfig(tf_random_seed=3))
    est.train(tf.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=None, shuffle=True), steps=30)
    return est


def _receiver():
    return tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.placeholder(tf.float32, [None, 4])})


def _estimator_predictions(est):
    return list(est.predict(tf.estimator.inputs.numpy_input_fn({"x": X}, shuffle=False)))


def test_an_estimator_export_predicts_what_the_estimator_does(estimator, tmp_path) -> None:
    export_dir = estimator.export_saved_model(str(tmp_path / "export"), _receiver())
    predict = tf.contrib.predictor.from_saved_model(export_dir)  # bytes, as export_saved_model returns it
    assert sorted(predict.feed_tensors) == ["x"] and sorted(predict.fetch_tensors) == ["classes", "logits"]
    got = predict({"x": X})
    want = _estimator_predictions(estimator)
    np.testing.assert_array_equal(got["classes"], [p["classes"] for p in want])
    np.testing.assert_allclose(got["logits"], [p["logits"] for p in want], rtol=1e-5, atol=1e-6)


def test_from_estimator_exports_the_newest_checkpoint(estimator) -> None:
    got = tf.contrib.predictor.from_estimator(estimator, _receiver())({"x": X[:5]})
    np.testing.assert_array_equal(got["classes"], [p["classes"] for p in _estimator_predictions(estimator)[:5]])


def test_a_saved_model_folder_runs_in_a_session_of_its_own(tmp_path) -> None:
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    w = tf.Variable(np.arange(8, dtype=np.float32).reshape(4, 2))
    y = tf.matmul(x, w, name="y")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        tf.saved_model.simple_save(sess, str(tmp_path / "sm"), inputs={"features": x}, outputs={"scores": y})
    tf.reset_default_graph()
    predict = tf.contrib.predictor.from_saved_model(str(tmp_path / "sm"))
    np.testing.assert_allclose(predict({"features": X[:3]})["scores"], X[:3] @ np.arange(8).reshape(4, 2), rtol=1e-6)
    assert tf.get_default_graph().get_operations() == []  # the predictor's graph is its own
    predict.close()


def test_wrong_keys_and_signatures_are_named(estimator, tmp_path) -> None:
    export_dir = estimator.export_saved_model(str(tmp_path / "export"), _receiver())
    predict = tf.contrib.predictor.from_saved_model(export_dir)
    with pytest.raises(ValueError, match=r"the inputs are \['x'\]; got unknown \['y'\], missing \['x'\]"):
        predict({"y": X})
    with pytest.raises(ValueError, match="no signature 'nope'"):
        tf.contrib.predictor.from_saved_model(export_dir, signature_def_key="nope")
    with pytest.raises(ValueError, match=r"output_names \['probabilities'\] are not in"):
        tf.contrib.predictor.from_saved_model(export_dir, output_names=["probabilities"])


def test_the_session_loader_points_an_estimator_export_at_the_predictor(estimator, tmp_path) -> None:
    export_dir = estimator.export_saved_model(str(tmp_path / "export"), _receiver())
    with tf.Session() as sess, pytest.raises(tf.saved_model.SavedModelError, match="is an Estimator export .* tf.contrib.predictor"):
        tf.saved_model.loader.load(sess, ["serve"], export_dir)
