"""tf.estimator's heads (BinaryClassHead, MultiClassHead, MultiLabelHead, RegressionHead,
PoissonRegressionHead), the estimators over a head (DNN/Linear/DNNLinearCombined/Baseline) and the
parse-spec helpers, checked against NumPy formulas of TF 1.15's losses and metrics."""

from __future__ import annotations

import math

import numpy as np
import pytest

import trainer as tf

fc = tf.feature_column


def sigmoid_ce(z, x):
    return np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))


def run(*fetches, feed=None):
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.local_variables_initializer(), tf.tables_initializer()])
        return sess.run(list(fetches), feed)


def test_binary_head_loss_predictions_and_eval_metrics():
    logits = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    labels = np.array([1, 0, 0, 1], np.int64)
    w = np.array([1.0, 2.0, 0.5, 1.0], np.float32)
    head = tf.estimator.BinaryClassHead(weight_column="w")
    features = {"w": tf.constant(w)}
    loss = head.loss(tf.constant(labels), tf.constant(logits), features)
    spec = head.create_estimator_spec(features, tf.estimator.ModeKeys.EVAL, tf.constant(logits), tf.constant(labels))
    assert {"accuracy", "precision", "recall", "auc", "auc_precision_recall", "average_loss", "label/mean",
            "prediction/mean", "accuracy_baseline"} <= set(spec.eval_metric_ops)
    assert {"logits", "logistic", "probabilities", "class_ids", "classes"} <= set(spec.predictions)
    names = ["average_loss", "accuracy", "label/mean", "accuracy_baseline"]
    updates = [spec.eval_metric_ops[k][1] for k in names]
    got_loss, spec_loss, *got = run(loss, spec.loss, *updates)
    per = sigmoid_ce(labels, logits[:, 0])
    assert got_loss == pytest.approx(np.sum(per * w) / 4, rel=1e-5)  # sum over batch size
    assert spec_loss == pytest.approx(got_loss, rel=1e-6)
    assert got[0] == pytest.approx(np.sum(per * w) / np.sum(w), rel=1e-5)
    right = ((logits[:, 0] > 0) == labels).astype(np.float32)
    assert got[1] == pytest.approx(np.sum(right * w) / np.sum(w), rel=1e-5)
    label_mean = np.sum(labels * w) / np.sum(w)
    assert got[2] == pytest.approx(label_mean, rel=1e-5)
    assert got[3] == pytest.approx(max(label_mean, 1 - label_mean), rel=1e-5)
    with pytest.raises(ValueError, match="thresholds not in"):
        tf.estimator.BinaryClassHead(thresholds=[1.5])
    with pytest.raises(ValueError, match="Invalid loss_reduction"):
        tf.estimator.BinaryClassHead(loss_reduction="mean")


def test_multi_class_and_multi_label_losses():
    logits = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]], np.float32)
    labels = np.array([[1], [2]], np.int64)
    multi = tf.estimator.MultiClassHead(3, loss_reduction="sum")
    ml = tf.estimator.MultiLabelHead(3)
    hot = np.array([[1, 0, 1], [0, 0, 1]], np.int64)
    got_multi, got_ml, probs = run(multi.loss(tf.constant(labels), tf.constant(logits)),
                                   ml.loss(tf.constant(hot), tf.constant(logits)),
                                   ml.predictions(tf.constant(logits))["probabilities"])
    log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert got_multi == pytest.approx(-(log_softmax[0, 1] + log_softmax[1, 2]), rel=1e-5)
    assert got_ml == pytest.approx(np.mean(np.mean(sigmoid_ce(hot, logits), axis=1)), rel=1e-5)
    np.testing.assert_allclose(probs, 1 / (1 + np.exp(-logits)), rtol=1e-5)
    assert multi.logits_dimension == 3 and ml.logits_dimension == 3
    with pytest.raises(ValueError, match="n_classes must be > 2"):
        tf.estimator.MultiClassHead(2)
    with pytest.raises(ValueError, match="n_classes must be > 1"):
        tf.estimator.MultiLabelHead(1)


def test_regression_and_poisson_heads():
    logits = np.array([[0.5, 1.0], [2.0, -1.0]], np.float32)
    labels = np.array([[1.0, 0.0], [2.5, -1.0]], np.float32)
    reg = tf.estimator.RegressionHead(label_dimension=2)
    poisson = tf.estimator.PoissonRegressionHead()
    counts = np.array([[0.0], [1.0], [4.0]], np.float32)
    rates = np.array([[0.2], [-0.3], [1.1]], np.float32)
    got_reg, got_p, pred = run(reg.loss(tf.constant(labels), tf.constant(logits)),
                               poisson.loss(tf.constant(counts), tf.constant(rates)),
                               poisson.predictions(tf.constant(rates))["predictions"])
    assert got_reg == pytest.approx(np.mean((logits - labels) ** 2), rel=1e-5)
    # log_poisson_loss with compute_full_loss: Stirling's term for targets > 1
    z, c = counts[:, 0], rates[:, 0]
    stirling = np.where(z > 1, z * np.log(np.maximum(z, 1)) - z + 0.5 * np.log(2 * math.pi * np.maximum(z, 1)), 0)
    assert got_p == pytest.approx(np.mean(np.exp(c) - z * c + stirling), rel=1e-5)
    np.testing.assert_allclose(pred, np.exp(rates), rtol=1e-6)
    with pytest.raises(ValueError, match="Invalid label_dimension"):
        tf.estimator.RegressionHead(label_dimension=0)


def test_create_estimator_spec_needs_exactly_one_way_to_train():
    head = tf.estimator.RegressionHead()
    logits, labels = tf.constant([[1.0]]), tf.constant([[2.0]])
    with pytest.raises(ValueError, match="cannot both be None"):
        head.create_estimator_spec({}, tf.estimator.ModeKeys.TRAIN, logits, labels)
    with pytest.raises(ValueError, match="cannot both be set"):
        head.create_estimator_spec({}, tf.estimator.ModeKeys.TRAIN, logits, labels,
                                   optimizer=tf.train.GradientDescentOptimizer(0.1), train_op_fn=lambda loss: loss)


def test_custom_model_fn_with_a_multi_class_head(tmp_path):
    """A TF1 custom Estimator: the model_fn builds logits and lets the head make the spec."""
    rng = np.random.default_rng(5)
    centers = np.array([[2, 0], [-2, 2], [0, -2]], np.float32)
    y = rng.integers(0, 3, 600)
    x = (centers[y] + 0.5 * rng.standard_normal((600, 2))).astype(np.float32)

    def model_fn(features, labels, mode):
        head = tf.estimator.MultiClassHead(n_classes=3)
        logits = tf.layers.dense(features["x"], head.logits_dimension)
        return head.create_estimator_spec(features=features, mode=mode, logits=logits, labels=labels,
                                          optimizer=tf.train.AdamOptimizer(0.05))

    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path))
    est.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=60, num_epochs=None, shuffle=True), steps=150)
    result = est.evaluate(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=600, shuffle=False))
    assert result["accuracy"] > 0.9, result  # measured 0.99 (well separated blobs)
    predictions = list(est.predict(tf.estimator.inputs.numpy_input_fn({"x": x[:3]}, shuffle=False)))
    assert {"logits", "probabilities", "class_ids", "classes"} <= set(predictions[0])


def test_baselines_learn_the_label_prior(tmp_path):
    x = np.zeros((400, 1), np.float32)
    y = (np.arange(400) % 4 != 0).astype(np.int64)  # 75% ones
    target = np.linspace(1.0, 3.0, 400).astype(np.float32)  # mean 2
    train = tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=100, num_epochs=None, shuffle=True)
    classifier = tf.estimator.BaselineClassifier(model_dir=str(tmp_path / "c"))
    classifier.train(train, steps=200)
    (first,) = classifier.predict(tf.estimator.inputs.numpy_input_fn({"x": x[:1]}, shuffle=False))
    assert first["probabilities"][1] == pytest.approx(0.75, abs=0.05)  # measured 0.750
    regressor = tf.estimator.BaselineRegressor(model_dir=str(tmp_path / "r"))
    regressor.train(tf.estimator.inputs.numpy_input_fn({"x": x}, target, batch_size=100, num_epochs=None,
                                                       shuffle=True), steps=200)
    assert classifier.get_variable_names().count("baseline/bias") == 1
    (guess,) = regressor.predict(tf.estimator.inputs.numpy_input_fn({"x": x[:1]}, shuffle=False))
    assert guess["predictions"][0] == pytest.approx(2.0, abs=0.15)  # measured 2.0


def test_head_estimators_train(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.standard_normal(300).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    y = (2 * a - b + 0.5).astype(np.float32)
    columns = [fc.numeric_column("a"), fc.numeric_column("b")]
    train = tf.estimator.inputs.numpy_input_fn({"a": a, "b": b}, y, batch_size=50, num_epochs=None, shuffle=True)
    evaluate = tf.estimator.inputs.numpy_input_fn({"a": a, "b": b}, y, batch_size=300, shuffle=False)
    head = tf.estimator.RegressionHead()
    models = [tf.estimator.LinearEstimator(head, columns, model_dir=str(tmp_path / "l"), optimizer="SGD",
                                           learning_rate=0.1),
              tf.estimator.DNNEstimator(head, [8], columns, model_dir=str(tmp_path / "d"), optimizer="Adam",
                                        learning_rate=0.05),
              tf.estimator.DNNLinearCombinedEstimator(head, model_dir=str(tmp_path / "w"),
                                                      linear_feature_columns=columns, linear_optimizer="SGD",
                                                      dnn_feature_columns=columns, dnn_hidden_units=[4])]
    variance = float(np.var(y))
    for model in models:
        model.train(train, steps=150)
        result = model.evaluate(evaluate)
        assert result["average_loss"] < 0.2 * variance, (type(model).__name__, result)  # measured < 0.05
        assert {"label/mean", "prediction/mean", "loss"} <= set(result)
    with pytest.raises(TypeError, match="head must be a tf.estimator head"):
        tf.estimator.DNNEstimator("regression", [4], columns)


def test_parse_example_specs_add_the_label():
    columns = [fc.numeric_column("age"), fc.categorical_column_with_identity("n", 3)]
    spec = tf.estimator.classifier_parse_example_spec(columns, label_key="y", weight_column="w")
    assert spec["y"] == tf.FixedLenFeature((1,), np.dtype(np.int64), None)
    assert spec["w"] == tf.FixedLenFeature((1,), np.dtype(np.float32), None)
    assert spec["n"] == tf.VarLenFeature(np.dtype(np.int64))
    spec = tf.estimator.regressor_parse_example_spec(columns, "price", label_dimension=2, label_default=[0.0, 0.0])
    assert spec["price"] == tf.FixedLenFeature((2,), np.dtype(np.float32), [0.0, 0.0])
    with pytest.raises(ValueError, match="label should not be used as feature"):
        tf.estimator.classifier_parse_example_spec(columns, "age")


def test_multi_head_weights_losses_and_keys_metrics_per_head(tmp_path):
    binary = tf.estimator.BinaryClassHead(name="clicked")
    regression = tf.estimator.RegressionHead(name="price")
    multi = tf.estimator.MultiHead([binary, regression], head_weights=[1.0, 0.5])
    assert multi.logits_dimension == 2 and multi.name == "clicked_price"
    logits = np.array([[0.5, 2.0], [-1.0, 1.0]], np.float32)
    labels = {"clicked": np.array([[1], [0]], np.int64), "price": np.array([[1.5], [0.0]], np.float32)}
    loss = multi.loss({k: tf.constant(v) for k, v in labels.items()}, tf.constant(logits))
    (got,) = run(loss)
    expected = np.mean(sigmoid_ce(labels["clicked"][:, 0], logits[:, 0])) + 0.5 * np.mean(
        (logits[:, 1] - labels["price"][:, 0]) ** 2)
    assert got == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="same size"):
        tf.estimator.MultiHead([binary, regression], head_weights=[1.0])
    with pytest.raises(ValueError, match="must have name specified"):
        tf.estimator.MultiHead([tf.estimator.RegressionHead()])
    with pytest.raises(ValueError, match="labels must be a dict"):
        multi.loss(tf.constant(labels["price"]), tf.constant(logits))

    # a DNNEstimator over the MultiHead: two objectives from one network
    rng = np.random.default_rng(9)
    x = rng.standard_normal((300, 2)).astype(np.float32)
    clicked = (x[:, 0] > 0).astype(np.int64)
    price = (2 * x[:, 1]).astype(np.float32)

    def input_fn():
        return ({"x": tf.constant(x)}, {"clicked": tf.constant(clicked), "price": tf.constant(price)})

    est = tf.estimator.DNNEstimator(multi, [8], [fc.numeric_column("x", shape=(2,))], model_dir=str(tmp_path),
                                    optimizer="Adam", learning_rate=0.05)
    est.train(input_fn, steps=150)
    result = est.evaluate(input_fn, steps=1)
    assert result["accuracy/clicked"] > 0.9 and result["average_loss/price"] < 0.5, result  # measured 1.0, 0.006
    assert {"loss/clicked", "loss/price", "auc/clicked", "label/mean/price"} <= set(result)
    (first,) = est.predict(tf.estimator.inputs.numpy_input_fn({"x": x[:1]}, shuffle=False))
    assert ("clicked", "probabilities") in first and ("price", "predictions") in first
