"""Keras metrics: functions by name, and metric objects whose running values match NumPy and
scikit-learn over a whole evaluation (not a mean of per-batch values)."""

from __future__ import annotations

import numpy as np

import trainer as tf

layers = tf.keras.layers
metrics = tf.keras.metrics


def test_metric_objects_in_compile_report_running_values(digits):
    from sklearn.metrics import precision_score, recall_score, roc_auc_score

    tf.set_random_seed(0)
    parity = (digits["y_train"] % 2).astype(np.float32)
    model = tf.keras.Sequential([layers.Dense(1, activation="sigmoid", input_shape=(64,))])
    model.compile("adam", "binary_crossentropy", [metrics.AUC(), metrics.Precision(), metrics.Recall(), "accuracy"])
    history = model.fit(digits["x_train"], parity, epochs=3, batch_size=50, verbose=0)
    assert model.metrics_names == ["loss", "auc", "precision", "recall", "acc"]
    assert set(history.history) == {"loss", "auc", "precision", "recall", "acc"}
    test_parity = digits["y_test"] % 2
    _, auc, precision, recall, _ = model.evaluate(digits["x_test"], test_parity, batch_size=50, verbose=0)
    scores = model.predict(digits["x_test"])[:, 0]
    assert abs(auc - roc_auc_score(test_parity, scores)) < 5e-3
    assert np.isclose(precision, precision_score(test_parity, scores > 0.5), rtol=1e-5)
    assert np.isclose(recall, recall_score(test_parity, scores > 0.5), rtol=1e-5)


def test_a_metric_object_and_its_function_agree(digits):
    tf.set_random_seed(0)
    model = tf.keras.Sequential([layers.Dense(10, activation="softmax", input_shape=(64,))])
    model.compile("adam", "sparse_categorical_crossentropy", [metrics.SparseCategoricalAccuracy(), "accuracy"])
    model.fit(digits["x_train"], digits["y_train"], epochs=2, batch_size=64, verbose=0)
    _, running, averaged = model.evaluate(digits["x_test"], digits["y_test"], batch_size=64, verbose=0)
    assert np.isclose(running, averaged, rtol=1e-6)


def test_metric_objects_in_graph_code():
    mean = metrics.Mean()
    update = mean.update_state(tf.constant([1.0, 2.0, 3.0]))
    iou = metrics.MeanIoU(num_classes=2)
    iou_update = iou.update_state(tf.constant([0, 0, 1, 1]), tf.constant([0, 1, 0, 1]))
    tp = metrics.TruePositives(thresholds=[0.3, 0.7])
    tp_update = tp.update_state(tf.constant([1.0, 1.0, 0.0]), tf.constant([0.5, 0.9, 0.8]))
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        sess.run([update, update, iou_update, tp_update])
        assert sess.run(mean.result()) == 2.0
        assert np.isclose(sess.run(iou.result()), 1.0 / 3.0)  # each class: 1 of 3 in the union
        assert sess.run(tp.result()).tolist() == [2.0, 1.0]
    assert metrics.sparse_categorical_accuracy is tf.keras.metrics.get("sparse_categorical_accuracy")


def test_mean_tensor_and_operating_point_metrics():
    from sklearn.metrics import roc_curve

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 400)
    scores = np.clip(labels * 0.3 + rng.random(400) * 0.7, 0, 1).astype(np.float32)
    at_specificity = metrics.SensitivityAtSpecificity(0.8)
    at_sensitivity = metrics.SpecificityAtSensitivity(0.8)
    mean_tensor = metrics.MeanTensor()
    updates = [at_specificity.update_state(tf.constant(labels), tf.constant(scores)),
               at_sensitivity.update_state(tf.constant(labels), tf.constant(scores)),
               mean_tensor.update_state(tf.constant([1.0, 2.0])), mean_tensor.update_state(tf.constant([3.0, 6.0]))]
    with tf.Session() as sess:
        sess.run(tf.local_variables_initializer())
        sess.run(updates)
        sensitivity, specificity, means = sess.run([at_specificity.result(), at_sensitivity.result(),
                                                    mean_tensor.result()])
    false_positive_rate, true_positive_rate, _ = roc_curve(labels, scores)
    assert abs(sensitivity - np.interp(0.2, false_positive_rate, true_positive_rate)) < 0.05
    assert abs(specificity - (1 - np.interp(0.8, true_positive_rate, false_positive_rate))) < 0.05
    assert means.tolist() == [2.0, 4.0]


def test_image_utilities_round_trip(tmp_path):
    pixels = (np.random.default_rng(0).random((4, 5, 3)) * 255).astype(np.float32)
    path = str(tmp_path / "image.png")
    tf.keras.utils.save_img(path, pixels, scale=False)
    loaded = tf.keras.utils.img_to_array(tf.keras.utils.load_img(path))
    np.testing.assert_array_equal(loaded, pixels.astype(np.uint8))
    assert tf.keras.utils.img_to_array(tf.keras.utils.load_img(path, target_size=(8, 10))).shape == (8, 10, 3)
    assert tf.keras.utils.img_to_array(tf.keras.utils.load_img(path, color_mode="grayscale")).shape == (4, 5, 1)
