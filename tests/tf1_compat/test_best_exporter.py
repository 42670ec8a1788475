"""tf.estimator.BestExporter: exports only a better evaluation, keeps the newest few, and starts
from the best evaluation already in the model's event files."""

from __future__ import annotations

import os

import numpy as np
import pytest

import trainer as tf


def _trained(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((100, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.0], np.float32)).astype(np.float32)
    model = tf.estimator.LinearRegressor([tf.feature_column.numeric_column("x", shape=(2,))],
                                         model_dir=str(tmp_path / "model"))
    model.train(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=50, num_epochs=None, shuffle=True),
                steps=5)
    receiver = tf.estimator.export.build_raw_serving_input_receiver_fn({"x": tf.placeholder(tf.float32, [None, 2])})
    return model, x, y, receiver


def test_best_exporter_exports_improvements_only_and_keeps_the_newest(tmp_path):
    model, _, _, receiver = _trained(tmp_path)
    exporter = tf.estimator.BestExporter(serving_input_receiver_fn=receiver, event_file_pattern=None,
                                         exports_to_keep=2)
    base = str(tmp_path / "exports")
    ckpt = model.latest_checkpoint()
    results = [exporter.export(model, base, ckpt, {"loss": loss}, False) for loss in (3.0, 4.0, 2.0, 2.5, 1.0)]
    assert [r is not None for r in results] == [True, False, True, False, True]
    kept = sorted(os.listdir(base), key=int)
    assert len(kept) == 2 and [os.path.join(base, k).encode() for k in kept] == [results[2], results[4]]
    assert exporter.best_eval_result == {"loss": 1.0}


def test_best_exporter_starts_from_the_evaluations_on_disk(tmp_path):
    model, x, y, receiver = _trained(tmp_path)
    written = model.evaluate(tf.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=100, shuffle=False))
    exporter = tf.estimator.BestExporter(serving_input_receiver_fn=receiver)
    base = str(tmp_path / "exports")
    worse = exporter.export(model, base, model.latest_checkpoint(), {"loss": written["loss"] + 1.0}, False)
    assert worse is None and exporter.best_eval_result["loss"] == pytest.approx(written["loss"], rel=1e-6)
    better = exporter.export(model, base, model.latest_checkpoint(), {"loss": written["loss"] / 2}, False)
    assert better is not None and os.path.isfile(os.path.join(better.decode(), "model.flow"))


def test_best_exporter_argument_errors():
    with pytest.raises(ValueError, match="must include current_eval_result"):
        tf.estimator.BestExporter(serving_input_receiver_fn=lambda: None, compare_fn=lambda best_eval_result: True)
    with pytest.raises(ValueError, match="must be a positive number"):
        tf.estimator.BestExporter(serving_input_receiver_fn=lambda: None, exports_to_keep=0)
    with pytest.raises(ValueError, match="no loss is found"):
        tf.estimator.BestExporter(serving_input_receiver_fn=lambda: None).compare_fn(
            best_eval_result={"accuracy": 1.0}, current_eval_result={"loss": 1.0})
