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
    assert model.metrics_names == ["loss", "auc", "precision", "recall", "accuracy"]
    assert set(history.history) == {"loss", "auc", "precision", "recall", "accuracy"}
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
