"""``tf.estimator`` as TensorFlow 1.x spells it: a model_fn driven through train, evaluate, predict
and export, with checkpoints and summaries in ``model_dir``.

    def model_fn(features, labels, mode, params):
        logits = trainer.layers.dense(features["x"], 10)
        ...
        return trainer.estimator.EstimatorSpec(mode, predictions=..., loss=..., train_op=...)

    est = trainer.estimator.Estimator(model_fn, model_dir="/tmp/model")
    est.train(trainer.estimator.inputs.numpy_input_fn({"x": xs}, ys, shuffle=True, num_epochs=None), steps=500)
"""

from trainer.estimator import export, inputs
from trainer.estimator.canned import (DNNClassifier, DNNLinearCombinedClassifier, DNNLinearCombinedRegressor,
                                      DNNRegressor, LinearClassifier, LinearRegressor)
from trainer.estimator.estimator import Estimator, add_metrics
from trainer.estimator.head_estimators import (BaselineClassifier, BaselineEstimator, BaselineRegressor, DNNEstimator,
                                               DNNLinearCombinedEstimator, LinearEstimator)
from trainer.estimator.head_v2 import (BinaryClassHead, Head, MultiClassHead, MultiLabelHead, PoissonRegressionHead,
                                       RegressionHead)
from trainer.estimator.hooks import (CheckpointSaverHook, CheckpointSaverListener, FeedFnHook, FinalOpsHook,
                                     GlobalStepWaiterHook, LoggingTensorHook, NanLossDuringTrainingError, NanTensorHook,
                                     SecondOrStepTimer, SessionRunArgs, SessionRunContext, SessionRunHook,
                                     SessionRunValues, StepCounterHook, StopAtStepHook, SummarySaverHook)
from trainer.estimator.run_config import RunConfig
from trainer.estimator.spec import EstimatorSpec, EstimatorSpecError, ModeKeys
from trainer.estimator.best_exporter import BestExporter
from trainer.estimator.export import Exporter, FinalExporter, LatestExporter
from trainer.warm_starting import VocabInfo, WarmStartSettings
from trainer.estimator.multi_head import MultiHead
from trainer.estimator.parsing_specs import classifier_parse_example_spec, regressor_parse_example_spec
from trainer.estimator.training import EvalSpec, TrainSpec, train_and_evaluate

__all__ = [
    "BaselineClassifier", "BaselineEstimator", "BestExporter", "BaselineRegressor", "BinaryClassHead", "DNNEstimator",
    "DNNLinearCombinedEstimator", "Head", "LinearEstimator", "MultiClassHead", "MultiHead", "MultiLabelHead",
    "PoissonRegressionHead", "RegressionHead", "VocabInfo", "WarmStartSettings", "classifier_parse_example_spec",
    "regressor_parse_example_spec",
    "CheckpointSaverHook", "CheckpointSaverListener", "DNNClassifier", "FeedFnHook", "GlobalStepWaiterHook",
    "SecondOrStepTimer", "SummarySaverHook", "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor", "DNNRegressor", "Estimator", "EstimatorSpec", "EstimatorSpecError", "EvalSpec", "Exporter",
    "FinalExporter", "FinalOpsHook", "LatestExporter", "LinearClassifier", "LinearRegressor", "LoggingTensorHook",
    "ModeKeys", "NanLossDuringTrainingError", "NanTensorHook", "RunConfig", "SessionRunArgs", "SessionRunContext",
    "SessionRunHook", "SessionRunValues", "StepCounterHook", "StopAtStepHook", "TrainSpec", "add_metrics", "export",
    "inputs", "train_and_evaluate",
]
