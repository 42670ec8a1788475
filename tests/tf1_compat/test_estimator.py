"""A TF1 Estimator script, as tutorials write it, run with ``import trainer as tf`` on digits.

A custom model_fn (an MLP with tf.metrics in EVAL and export_outputs for serving), fed by
``tf.estimator.inputs.numpy_input_fn``: train, evaluate (95% or more; 97.8% when written), predict, train on from the
checkpoint, and export a ``.flow`` model repository entry that the edge runtime and the serving
model repository load and that predicts what ``Estimator.predict`` does.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import trainer as tf

sklearn_datasets = pytest.importorskip("sklearn.datasets")


def digits():
    d = sklearn_datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(d.target))
    x, y = (d.data[order] / 16.0).astype(np.float32), d.target[order].astype(np.int64)
    return (x[360:], y[360:]), (x[:360], y[:360])


def model_fn(features, labels, mode, params):
    hidden = tf.layers.dense(features["pixels"], params["hidden"], activation=tf.nn.relu, name="hidden")
    logits = tf.layers.dense(hidden, 10, name="logits")
    classes = tf.argmax(logits, 1)
    probabilities = tf.nn.softmax(logits, name="probabilities")
    predictions = {"classes": classes, "probabilities": probabilities}
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(
            mode, predictions=predictions,
            export_outputs={"serving_default": tf.estimator.export.PredictOutput({"probabilities": probabilities})})
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        metrics = {"accuracy": tf.metrics.accuracy(labels=labels, predictions=classes)}
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    optimizer = tf.train.AdamOptimizer(params["learning_rate"])
    train_op = optimizer.minimize(loss, global_step=tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.mark.slow
def test_estimator_with_numpy_input_fn_trains_evaluates_predicts_and_exports(tmp_path):
    import edge_runtime

    started = time.monotonic()
    (x_train, y_train), (x_test, y_test) = digits()
    model_dir = str(tmp_path / "model")

    # --- the script, as TF 1.x code spells it -----------------------------------------------
    classifier = tf.estimator.Estimator(
        model_fn=model_fn, model_dir=model_dir, params={"hidden": 64, "learning_rate": 0.01},
        config=tf.estimator.RunConfig(tf_random_seed=0, save_checkpoints_steps=100, save_summary_steps=50))
    train_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={"pixels": x_train}, y=y_train, batch_size=64, num_epochs=None, shuffle=True)
    classifier.train(input_fn=train_input_fn, steps=300)

    eval_input_fn = tf.estimator.inputs.numpy_input_fn(
        x={"pixels": x_test}, y=y_test, num_epochs=1, shuffle=False)
    results = classifier.evaluate(input_fn=eval_input_fn)

    predict_input_fn = tf.estimator.inputs.numpy_input_fn(x={"pixels": x_test[:50]}, num_epochs=1, shuffle=False)
    predictions = list(classifier.predict(input_fn=predict_input_fn))

    def serving_input_receiver_fn():
        pixels = tf.placeholder(np.float32, [None, 64], name="pixels")
        return tf.estimator.export.ServingInputReceiver({"pixels": pixels}, {"pixels": pixels})

    export_dir = classifier.export_saved_model(str(tmp_path / "models" / "digits"), serving_input_receiver_fn)
    # -----------------------------------------------------------------------------------------
    assert results["accuracy"] >= 0.95, results
    assert results["global_step"] == 300 and np.isfinite(results["loss"])
    assert len(predictions) == 50 and set(predictions[0]) == {"classes", "probabilities"}
    classes = np.array([p["classes"] for p in predictions])
    assert np.mean(classes == y_test[:50]) >= 0.9

    # Checkpoints and summaries in model_dir; training resumes from the newest checkpoint.
    files = os.listdir(model_dir)
    assert any(f.startswith("events.out.tfevents") for f in files) and "checkpoint" in files
    assert os.listdir(os.path.join(model_dir, "eval"))
    classifier.train(input_fn=train_input_fn, steps=20)
    assert classifier.evaluate(input_fn=eval_input_fn, steps=1)["global_step"] == 320
    classifier.train(input_fn=train_input_fn, max_steps=320)  # already there: no step taken
    assert classifier.get_variable_value("global_step") == 320

    # The export is a model repository entry (<base>/<version>/model.flow) the edge runtime runs.
    export_dir = export_dir.decode()
    assert os.path.basename(os.path.dirname(export_dir)) == "digits" and os.path.basename(export_dir).isdigit()
    model = edge_runtime.load(os.path.join(export_dir, "model.flow"))
    served = model.run({"pixels": x_test[:50]})["probabilities"]  # exported at step 300, as predicted then
    np.testing.assert_allclose(served, np.stack([p["probabilities"] for p in predictions]), rtol=1e-4, atol=1e-5)
    now = np.stack([p["probabilities"] for p in classifier.predict(input_fn=predict_input_fn)])  # step 320
    export_dir_2 = classifier.export_saved_model(str(tmp_path / "models" / "digits"), serving_input_receiver_fn)
    assert int(os.path.basename(export_dir_2.decode())) > int(os.path.basename(export_dir))
    served_2 = edge_runtime.load(os.path.join(export_dir_2.decode(), "model.flow")).run({"pixels": x_test[:50]})
    np.testing.assert_allclose(served_2["probabilities"], now, rtol=1e-4, atol=1e-5)

    # `flowstack serve --model-repository <tmp>/models` serves the newest version of "digits".
    from serving.repository import ModelRepository

    repository = ModelRepository(tmp_path / "models")
    try:
        repository.poll()
        assert repository.versions("digits") == [int(os.path.basename(export_dir_2.decode()))]
        version = repository.get("digits")
        out = version.batcher.submit({"pixels": x_test[:50]}, rows=50).result(10)["probabilities"]
    finally:
        repository.close()
    np.testing.assert_allclose(out, now, rtol=1e-4, atol=1e-5)
    assert time.monotonic() - started < 120


@pytest.mark.slow
def test_canned_dnn_and_linear_classifiers_with_numeric_columns(tmp_path):
    (x_train, y_train), (x_test, y_test) = digits()
    # --- the script ------------------------------------------------------------------------------
    feature_columns = [tf.feature_column.numeric_column("pixels", shape=[64])]
    dnn = tf.estimator.DNNClassifier(hidden_units=[64, 32], feature_columns=feature_columns, n_classes=10,
                                     model_dir=str(tmp_path / "dnn"), optimizer="Adam", learning_rate=0.01,
                                     config=tf.estimator.RunConfig(tf_random_seed=0))
    linear = tf.estimator.LinearClassifier(feature_columns=feature_columns, n_classes=10,
                                           model_dir=str(tmp_path / "linear"),
                                           config=tf.estimator.RunConfig(tf_random_seed=0))
    train_input_fn = tf.estimator.inputs.numpy_input_fn({"pixels": x_train}, y_train, batch_size=64,
                                                        num_epochs=None, shuffle=True)
    test_input_fn = tf.estimator.inputs.numpy_input_fn({"pixels": x_test}, y_test, num_epochs=1, shuffle=False)
    dnn.train(train_input_fn, steps=300)
    linear.train(train_input_fn, steps=300)
    dnn_metrics, linear_metrics = dnn.evaluate(test_input_fn), linear.evaluate(test_input_fn)
    predicted = [p["class_ids"][0] for p in dnn.predict(
        tf.estimator.inputs.numpy_input_fn({"pixels": x_test[:20]}, num_epochs=1, shuffle=False))]
    # -----------------------------------------------------------------------------------------------
    assert dnn_metrics["accuracy"] >= 0.93 and linear_metrics["accuracy"] >= 0.9, (dnn_metrics, linear_metrics)
    assert {"accuracy", "average_loss", "loss", "global_step"} <= set(dnn_metrics)
    assert np.mean(np.array(predicted) == y_test[:20]) >= 0.85


def test_binary_linear_classifier_reports_auc_precision_recall(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 2)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64)
    est = tf.estimator.LinearClassifier([tf.feature_column.numeric_column("x", shape=2)], model_dir=str(tmp_path))
    est.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=50, num_epochs=10, shuffle=True))
    m = est.evaluate(tf.estimator.inputs.numpy_input_fn({"x": x}, y, num_epochs=1, shuffle=False))
    assert m["accuracy"] > 0.95 and m["auc"] > 0.98 and m["precision"] > 0.9 and m["recall"] > 0.9, m
    assert m["global_step"] == 80  # 400 rows x 10 epochs / 50: the input's end ends training
