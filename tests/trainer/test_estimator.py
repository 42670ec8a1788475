"""tf.estimator: spec validation, input functions, hooks, resuming, and the errors users meet."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.estimator import EstimatorSpecError

XS = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
YS = (XS @ np.float32([[1.0], [-2.0], [0.5]]) + 0.25).astype(np.float32)


def linear_model_fn(features, labels, mode):
    pred = tf.layers.dense(features, 1, name="linear")
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=pred)
    loss = tf.reduce_mean(tf.square(pred - labels))
    train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
    return tf.estimator.EstimatorSpec(mode, predictions=pred, loss=loss, train_op=train_op,
                                      eval_metric_ops={"mse": tf.metrics.mean_squared_error(labels, pred)})


def dataset_input_fn():
    return tf.data.Dataset.from_tensor_slices((XS, YS)).repeat().batch(16)


def test_dataset_input_fn_trains_and_evaluates_and_resumes(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path))
    est.train(dataset_input_fn, steps=150)
    first = est.evaluate(dataset_input_fn, steps=4)
    assert first["global_step"] == 150 and first["mse"] < 1e-3 and np.isclose(first["loss"], first["mse"], rtol=1e-3)
    est.train(dataset_input_fn, steps=10)
    assert est.evaluate(dataset_input_fn, steps=1)["global_step"] == 160
    preds = list(tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path)).predict(
        lambda: tf.data.Dataset.from_tensor_slices(XS[:5]).batch(2)))
    assert len(preds) == 5 and np.allclose(np.stack(preds), YS[:5], atol=0.05)


def test_hooks_see_every_step_and_can_stop_training(tmp_path):
    class StopAfter(tf.estimator.SessionRunHook):
        def __init__(self):
            self.calls, self.losses = [], []

        def begin(self):
            self.calls.append("begin")

        def before_run(self, run_context):
            return tf.estimator.SessionRunArgs({"step": tf.train.get_or_create_global_step()})

        def after_run(self, run_context, run_values):
            self.losses.append(int(run_values.results["step"]))
            if len(self.losses) == 7:
                run_context.request_stop()

        def end(self, session):
            self.calls.append("end")

    hook = StopAfter()
    tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path)).train(dataset_input_fn, hooks=[hook], steps=100)
    assert hook.calls == ["begin", "end"] and hook.losses == list(range(1, 8))


def test_model_fn_returning_the_wrong_spec_names_the_field(tmp_path):
    def no_train_op(features, labels, mode):
        pred = tf.layers.dense(features, 1)
        return tf.estimator.EstimatorSpec(mode, loss=tf.reduce_mean(pred))

    est = tf.estimator.Estimator(no_train_op, model_dir=str(tmp_path))
    with pytest.raises(EstimatorSpecError, match="EstimatorSpec.train_op is required"):
        est.train(dataset_input_fn, steps=1)

    def vector_loss(features, labels, mode):
        pred = tf.layers.dense(features, 1)
        return tf.estimator.EstimatorSpec(mode, loss=pred, train_op=tf.no_op())

    with pytest.raises(EstimatorSpecError, match=r"EstimatorSpec.loss must be a scalar.*shape \(None, 1\)"):
        tf.estimator.Estimator(vector_loss, model_dir=str(tmp_path)).train(dataset_input_fn, steps=1)

    def returns_dict(features, labels, mode):
        return {"loss": tf.reduce_mean(tf.layers.dense(features, 1))}

    with pytest.raises(EstimatorSpecError, match="must return a tf.estimator.EstimatorSpec, got dict"):
        tf.estimator.Estimator(returns_dict, model_dir=str(tmp_path)).train(dataset_input_fn, steps=1)

    def bad_metrics(features, labels, mode):
        loss = tf.reduce_mean(tf.square(tf.layers.dense(features, 1) - labels))
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops={"mse": loss})

    tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path / "ok")).train(dataset_input_fn, steps=1)
    with pytest.raises(EstimatorSpecError, match=r"eval_metric_ops\['mse'\] must be a \(value, update_op\) pair"):
        tf.estimator.Estimator(bad_metrics, model_dir=str(tmp_path / "ok")).evaluate(dataset_input_fn, steps=1)
    with pytest.raises(EstimatorSpecError, match="mode must be one of"):
        tf.estimator.EstimatorSpec("training", loss=tf.constant(np.float32(0)))
    with pytest.raises(EstimatorSpecError, match="EstimatorSpec.predictions is required"):
        tf.estimator.EstimatorSpec(tf.estimator.ModeKeys.PREDICT)


def test_input_and_model_fn_errors(tmp_path):
    with pytest.raises(ValueError, match="shuffle must be given explicitly"):
        tf.estimator.inputs.numpy_input_fn({"x": XS}, YS)
    with pytest.raises(ValueError, match="same number of rows"):
        tf.estimator.inputs.numpy_input_fn({"x": XS}, YS[:3], shuffle=False)
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path))
    with pytest.raises(ValueError, match="could not find a trained model"):
        est.evaluate(dataset_input_fn)

    def odd_model_fn(features, labels, mode, hyperparameters):
        raise AssertionError("not called")

    with pytest.raises(TypeError, match=r"model_fn 'odd_model_fn' takes \['hyperparameters'\]"):
        tf.estimator.Estimator(odd_model_fn, model_dir=str(tmp_path)).train(dataset_input_fn, steps=1)


def test_nan_loss_stops_training(tmp_path):
    def diverging(features, labels, mode):
        pred = tf.layers.dense(features, 1)
        loss = tf.reduce_mean(tf.square(pred - labels)) + np.float32(np.nan)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    with pytest.raises(tf.estimator.NanLossDuringTrainingError, match="at global step 1"):
        tf.estimator.Estimator(diverging, model_dir=str(tmp_path)).train(dataset_input_fn, steps=5)


def test_numpy_input_fn_epochs_and_batches():
    fn = tf.estimator.inputs.numpy_input_fn({"x": XS[:10]}, YS[:10], batch_size=4, num_epochs=2, shuffle=False)
    g = tf.Graph()
    with g.as_default():
        features, labels = fn()
        with tf.Session(g) as sess:
            sizes = []
            while True:
                try:
                    sizes.append(len(sess.run(labels)))
                except tf.errors.OutOfRangeError:
                    break
    assert sizes == [4, 4, 4, 4, 4]  # 20 rows over two epochs, batched across the epoch boundary
    assert set(features) == {"x"}


def test_stop_at_step_nan_tensor_and_logging_hooks(tmp_path, caplog):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path))
    est.train(dataset_input_fn, hooks=[tf.estimator.StopAtStepHook(num_steps=5)])
    assert est.get_variable_value("global_step") == 5
    est.train(dataset_input_fn, hooks=[tf.estimator.StopAtStepHook(last_step=12)])
    assert est.get_variable_value("global_step") == 12

    def logged_model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode)
        hooks = [tf.estimator.LoggingTensorHook({"the_loss": spec.loss}, every_n_iter=2),
                 tf.estimator.NanTensorHook(spec.loss + np.float32(np.nan))]
        return spec._replace(training_hooks=hooks)

    import logging

    with caplog.at_level(logging.INFO, logger="trainer.hooks"), \
            pytest.raises(tf.estimator.NanLossDuringTrainingError, match="the loss is nan"):
        tf.estimator.Estimator(logged_model_fn, model_dir=str(tmp_path / "b")).train(dataset_input_fn, steps=3)
    assert "the_loss = " in caplog.text
    with pytest.raises(ValueError, match="exactly one"):
        tf.estimator.StopAtStepHook()


def test_train_and_evaluate_trains_evaluates_and_exports(tmp_path):
    import edge_runtime

    def receiver():
        x = tf.placeholder(np.float32, (None, 3), name="x")
        return tf.estimator.export.TensorServingInputReceiver(x, {"x": x})  # one tensor, as TF takes it

    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path))
    result, exports = tf.estimator.train_and_evaluate(
        est, tf.estimator.TrainSpec(dataset_input_fn, max_steps=100),
        tf.estimator.EvalSpec(dataset_input_fn, steps=2,
                              exporters=[tf.estimator.export.LatestExporter("linear", receiver, exports_to_keep=1)]))
    assert result["global_step"] == 100 and result["mse"] < 1e-2
    (path,) = exports
    model = edge_runtime.load(str(tmp_path / "export" / "linear" / path.decode().rsplit("/", 1)[-1] / "model.flow"))
    np.testing.assert_allclose(model.run({"x": XS[:4]})["output"], YS[:4], atol=0.1)


def test_add_metrics_final_ops_and_step_counter(tmp_path):
    est = tf.estimator.Estimator(linear_model_fn, model_dir=str(tmp_path))
    counter = tf.estimator.StepCounterHook(every_n_steps=5)
    est.train(dataset_input_fn, steps=20, hooks=[counter])
    assert counter.steps_per_sec is not None and counter.steps_per_sec > 0

    def metric_fn(labels, predictions):
        return {"mae": tf.metrics.mean_absolute_error(labels, predictions)}

    with_mae = tf.estimator.add_metrics(est, metric_fn)
    result = with_mae.evaluate(dataset_input_fn, steps=2)
    assert {"mae", "mse", "loss", "global_step"} <= set(result) and result["global_step"] == 20

    class Final(tf.estimator.SessionRunHook):
        def begin(self):
            self.hook = tf.estimator.FinalOpsHook(tf.train.get_or_create_global_step())

        def end(self, session):
            self.hook.end(session)

    with pytest.raises(TypeError, match=r"metric_fn 'needs_logits' takes \['logits'\]"):
        def needs_logits(logits):
            return {}

        tf.estimator.add_metrics(est, needs_logits).evaluate(dataset_input_fn, steps=1)

    final = Final()
    est.evaluate(dataset_input_fn, steps=1, hooks=[final])
    assert final.hook.final_ops_values == 20
