"""Keras' metric objects (``tf.keras.metrics.Mean``, ``SparseCategoricalAccuracy``, ``AUC``, ...): state
in variables, ``update_state`` returns the update op, ``result`` the value, ``reset_states`` zeroes it.
Calling one updates then returns the result. Passed to ``compile(metrics=[...])`` they are reset at
each epoch and each evaluation, and report their running value, as in TF 1.15."""

from __future__ import annotations

import numpy as np

import trainer as tf
from trainer.keras import backend as K
from trainer.keras import losses as loss_functions
from trainer.keras import metrics as metric_functions
from trainer.keras.serialization import snake_case

__all__ = ["AUC", "Accuracy", "BinaryAccuracy", "BinaryCrossentropy", "CategoricalAccuracy",
           "CategoricalCrossentropy", "CategoricalHinge", "CosineProximity", "FalseNegatives", "FalsePositives",
           "Hinge", "KLDivergence", "LogCoshError", "Mean", "MeanAbsoluteError", "MeanAbsolutePercentageError",
           "MeanIoU", "MeanRelativeError", "MeanSquaredError", "MeanSquaredLogarithmicError", "MeanTensor", "Metric",
           "Poisson", "Precision", "Recall", "RootMeanSquaredError", "SensitivityAtSpecificity",
           "SpecificityAtSensitivity", "SparseCategoricalAccuracy",
           "SparseCategoricalCrossentropy", "SparseTopKCategoricalAccuracy", "SquaredHinge", "Sum",
           "TopKCategoricalAccuracy", "TrueNegatives", "TruePositives"]


class Metric:
    """Subclasses name their state in ``state_shapes`` and define ``update(y_true, y_pred, weights)`` (a
    list of (variable, increment)) and ``compute()``."""

    state_shapes: dict = {}

    def __init__(self, name: str | None = None, dtype=None):
        self.name = name or snake_case(type(self).__name__)
        self.dtype = dtype or K.floatx()
        self.state: dict = {}  # graph -> {state name: variable}

    @property
    def variables(self) -> list:
        return list(self.state.get(tf.get_default_graph(), {}).values())

    weights = variables

    def var(self, name: str):
        graph = tf.get_default_graph()
        if graph not in self.state:
            with graph.as_default(), tf.control_dependencies(None), tf.name_scope(self.name):
                self.state[graph] = {key: tf.Variable(np.zeros(self.shape_of(key), self.dtype), trainable=False,
                                                      name=key, collections=[tf.GraphKeys.LOCAL_VARIABLES])
                                     for key in self.state_shapes}
        return self.state[graph][name]

    def shape_of(self, key: str) -> tuple:
        return self.state_shapes[key]

    def update_state(self, y_true, y_pred=None, sample_weight=None):
        increments = self.update(y_true, y_pred, sample_weight)
        return tf.group(*[tf.assign_add(self.var(k), v) for k, v in increments])

    def result(self):
        return self.compute()

    def reset_states(self) -> None:
        K.batch_set_value([(v, np.zeros(tuple(v.shape), np.dtype(v.dtype))) for v in self.variables])

    def __call__(self, *args, **kwargs):
        update = self.update_state(*args, **kwargs)
        with tf.control_dependencies([update]):
            return tf.identity(self.result())

    def get_config(self) -> dict:
        return {"name": self.name, "dtype": np.dtype(self.dtype).name}

    @classmethod
    def from_config(cls, config: dict):
        return cls(**config)

    def update(self, y_true, y_pred, sample_weight) -> list:
        raise NotImplementedError

    def compute(self):
        raise NotImplementedError


def _weights_like(values, sample_weight):
    if sample_weight is None:
        return tf.ones_like(values)
    weights = tf.cast(sample_weight, values.dtype)
    return weights * tf.ones_like(values)


class Sum(Metric):
    state_shapes = {"total": ()}

    def update(self, values, _=None, sample_weight=None):
        values = tf.cast(values, self.dtype)
        return [("total", tf.reduce_sum(values * _weights_like(values, sample_weight)))]

    def compute(self):
        return tf.identity(self.var("total"))


class Mean(Metric):
    """The (weighted) mean of every value seen since the last reset."""

    state_shapes = {"total": (), "count": ()}

    def update(self, values, _=None, sample_weight=None):
        values = tf.cast(values, self.dtype)
        weights = _weights_like(values, sample_weight)
        return [("total", tf.reduce_sum(values * weights)), ("count", tf.reduce_sum(weights))]

    def compute(self):
        return self.var("total") / tf.maximum(self.var("count"), 1e-12)


class MeanMetricWrapper(Mean):
    """The running mean of a per-sample function ``fn(y_true, y_pred, **kwargs)``."""

    fn = None

    def __init__(self, fn=None, name: str | None = None, dtype=None, **kwargs):
        super().__init__(name, dtype)
        self.fn = fn or type(self).fn
        self.fn_kwargs = kwargs

    def batch_fn(self, y_true, y_pred):
        return self.fn(y_true, y_pred, **self.fn_kwargs)

    def update(self, y_true, y_pred, sample_weight=None):
        return super().update(self.batch_fn(y_true, y_pred), None, sample_weight)

    def get_config(self) -> dict:
        return {**super().get_config(), **self.fn_kwargs}


def _wrapper(class_name: str, fn, default_name: str, **defaults) -> type:
    def __init__(self, name=None, dtype=None, **kwargs):
        MeanMetricWrapper.__init__(self, fn, name or default_name, dtype, **{**defaults, **kwargs})
    return type(class_name, (MeanMetricWrapper,), {"__init__": __init__, "fn": staticmethod(fn),
                                                   "__module__": __name__,
                                                   "__doc__": f"The running mean of ``{fn.__name__}``."})


def _accuracy(y_true, y_pred):
    return tf.cast(tf.equal(tf.cast(y_true, y_pred.dtype), y_pred), K.floatx())


Accuracy = _wrapper("Accuracy", _accuracy, "accuracy")
BinaryAccuracy = _wrapper("BinaryAccuracy", metric_functions.binary_accuracy, "binary_accuracy", threshold=0.5)
CategoricalAccuracy = _wrapper("CategoricalAccuracy", metric_functions.categorical_accuracy, "categorical_accuracy")
SparseCategoricalAccuracy = _wrapper("SparseCategoricalAccuracy", metric_functions.sparse_categorical_accuracy,
                                     "sparse_categorical_accuracy")
TopKCategoricalAccuracy = _wrapper("TopKCategoricalAccuracy", metric_functions.top_k_categorical_accuracy,
                                   "top_k_categorical_accuracy", k=5)
SparseTopKCategoricalAccuracy = _wrapper("SparseTopKCategoricalAccuracy",
                                         metric_functions.sparse_top_k_categorical_accuracy,
                                         "sparse_top_k_categorical_accuracy", k=5)
MeanSquaredError = _wrapper("MeanSquaredError", loss_functions.mean_squared_error, "mean_squared_error")
MeanAbsoluteError = _wrapper("MeanAbsoluteError", loss_functions.mean_absolute_error, "mean_absolute_error")
MeanAbsolutePercentageError = _wrapper("MeanAbsolutePercentageError", loss_functions.mean_absolute_percentage_error,
                                       "mean_absolute_percentage_error")
MeanSquaredLogarithmicError = _wrapper("MeanSquaredLogarithmicError", loss_functions.mean_squared_logarithmic_error,
                                       "mean_squared_logarithmic_error")
Hinge = _wrapper("Hinge", loss_functions.hinge, "hinge")
SquaredHinge = _wrapper("SquaredHinge", loss_functions.squared_hinge, "squared_hinge")
CategoricalHinge = _wrapper("CategoricalHinge", loss_functions.categorical_hinge, "categorical_hinge")
KLDivergence = _wrapper("KLDivergence", loss_functions.kullback_leibler_divergence, "kullback_leibler_divergence")
Poisson = _wrapper("Poisson", loss_functions.poisson, "poisson")
LogCoshError = _wrapper("LogCoshError", loss_functions.logcosh, "logcosh")
CosineProximity = _wrapper("CosineProximity", loss_functions.cosine_proximity, "cosine_proximity")
BinaryCrossentropy = _wrapper("BinaryCrossentropy", loss_functions.binary_crossentropy, "binary_crossentropy",
                              from_logits=False)
CategoricalCrossentropy = _wrapper("CategoricalCrossentropy", loss_functions.categorical_crossentropy,
                                   "categorical_crossentropy", from_logits=False)
SparseCategoricalCrossentropy = _wrapper("SparseCategoricalCrossentropy",
                                         loss_functions.sparse_categorical_crossentropy,
                                         "sparse_categorical_crossentropy", from_logits=False)


class RootMeanSquaredError(Mean):
    def __init__(self, name: str = "root_mean_squared_error", dtype=None):
        super().__init__(name, dtype)

    def update(self, y_true, y_pred, sample_weight=None):
        return super().update(tf.square(tf.cast(y_pred, self.dtype) - tf.cast(y_true, self.dtype)), None,
                              sample_weight)

    def compute(self):
        return tf.sqrt(super().compute())


class MeanRelativeError(Mean):
    def __init__(self, normalizer, name: str | None = None, dtype=None):
        super().__init__(name, dtype)
        self.normalizer = normalizer

    def update(self, y_true, y_pred, sample_weight=None):
        error = tf.abs(tf.cast(y_pred, self.dtype) - tf.cast(y_true, self.dtype)) / tf.cast(self.normalizer,
                                                                                           self.dtype)
        return super().update(error, None, sample_weight)


class ConfusionCounts(Metric):
    """Counts at each of ``thresholds`` (a prediction counts as positive above it)."""

    counted = ("true_positives",)

    def __init__(self, thresholds=None, name: str | None = None, dtype=None):
        super().__init__(name, dtype)
        self.thresholds = thresholds
        self.threshold_values = np.atleast_1d(np.asarray(0.5 if thresholds is None else thresholds, np.float32))
        self.state_shapes = {k: (len(self.threshold_values),) for k in self.counted}

    def update(self, y_true, y_pred, sample_weight=None):
        labels = tf.reshape(tf.cast(y_true, tf.bool), [1, -1])
        predicted = tf.greater(tf.reshape(tf.cast(y_pred, tf.float32), [1, -1]),
                               tf.constant(self.threshold_values.reshape(-1, 1)))
        weights = tf.reshape(_weights_like(tf.cast(y_pred, self.dtype), sample_weight), [1, -1])
        cases = {"true_positives": tf.logical_and(predicted, labels),
                 "false_positives": tf.logical_and(predicted, tf.logical_not(labels)),
                 "true_negatives": tf.logical_and(tf.logical_not(predicted), tf.logical_not(labels)),
                 "false_negatives": tf.logical_and(tf.logical_not(predicted), labels)}
        return [(k, tf.reduce_sum(tf.cast(cases[k], self.dtype) * weights, axis=1)) for k in self.counted]

    def value(self, v):
        return v[0] if self.thresholds is None or np.ndim(self.thresholds) == 0 else v

    def compute(self):
        return self.value(tf.identity(self.var(self.counted[0])))


def _counter(class_name: str, key: str) -> type:
    return type(class_name, (ConfusionCounts,), {"counted": (key,), "__module__": __name__,
                                                 "__doc__": f"The number of {key.replace('_', ' ')}."})


TruePositives = _counter("TruePositives", "true_positives")
FalsePositives = _counter("FalsePositives", "false_positives")
TrueNegatives = _counter("TrueNegatives", "true_negatives")
FalseNegatives = _counter("FalseNegatives", "false_negatives")


class Precision(ConfusionCounts):
    counted = ("true_positives", "false_positives")

    def __init__(self, thresholds=None, top_k=None, class_id=None, name: str | None = None, dtype=None):
        if top_k is not None or class_id is not None:
            raise NotImplementedError(f"{type(self).__name__}(top_k=/class_id=) is not built in flowstack")
        super().__init__(thresholds, name, dtype)

    def compute(self):
        tp, fp = self.var("true_positives"), self.var("false_positives")
        return self.value(tp / tf.maximum(tp + fp, 1e-12))


class Recall(Precision):
    counted = ("true_positives", "false_negatives")

    def compute(self):
        tp, fn = self.var("true_positives"), self.var("false_negatives")
        return self.value(tp / tf.maximum(tp + fn, 1e-12))


class AUC(ConfusionCounts):
    """The area under the ROC (or PR) curve from counts at ``num_thresholds`` thresholds (trapezoids)."""

    counted = ("true_positives", "false_positives", "true_negatives", "false_negatives")

    def __init__(self, num_thresholds: int = 200, curve: str = "ROC", summation_method: str = "interpolation",
                 name: str | None = None, thresholds=None, dtype=None):
        if curve not in ("ROC", "PR"):
            raise ValueError(f"AUC: curve must be 'ROC' or 'PR', got {curve!r}")
        epsilon = 1e-7
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        super().__init__([0.0 - epsilon] + inner + [1.0 + epsilon], name, dtype)
        self.num_thresholds, self.curve, self.summation_method = num_thresholds, curve, summation_method

    def compute(self):
        tp, fp = self.var("true_positives"), self.var("false_positives")
        tn, fn = self.var("true_negatives"), self.var("false_negatives")
        recall = tp / tf.maximum(tp + fn, 1e-12)
        other = fp / tf.maximum(fp + tn, 1e-12) if self.curve == "ROC" else tp / tf.maximum(tp + fp, 1e-12)
        x, y = (other, recall) if self.curve == "ROC" else (recall, other)
        return tf.reduce_sum((x[:-1] - x[1:]) * (y[:-1] + y[1:]) / 2.0)

    def get_config(self) -> dict:
        return {"name": self.name, "num_thresholds": self.num_thresholds, "curve": self.curve}


class MeanTensor(Metric):
    """The elementwise running mean of same-shaped tensors (the shape fixed by the first update)."""

    def __init__(self, name: str | None = None, dtype=None):
        super().__init__(name, dtype)
        self.value_shape = None
        self.state_shapes = {"total": None, "count": None}

    def shape_of(self, key: str) -> tuple:
        if self.value_shape is None:
            raise ValueError(f"MeanTensor {self.name!r}: update_state must be called before result")
        return self.value_shape

    def update(self, values, _=None, sample_weight=None):
        values = tf.cast(values, self.dtype)
        shape = K.int_shape(values)
        if shape is None or None in shape:
            raise ValueError(f"MeanTensor {self.name!r} needs values of a fully known shape, got {shape}")
        if self.value_shape is not None and shape != self.value_shape:
            raise ValueError(f"MeanTensor input values must always have the same shape. Expected shape (set during "
                             f"the first call): {self.value_shape}. Got: {shape}")
        self.value_shape = shape
        weights = _weights_like(values, sample_weight)
        return [("total", values * weights), ("count", weights)]

    def compute(self):
        return self.var("total") / tf.maximum(self.var("count"), 1e-12)


class SensitivityAtSpecificity(ConfusionCounts):
    """The recall (sensitivity) at the threshold whose specificity is nearest ``specificity``."""

    counted = ("true_positives", "false_positives", "true_negatives", "false_negatives")

    def __init__(self, specificity: float, num_thresholds: int = 200, name: str | None = None, dtype=None):
        if not 0 <= specificity <= 1:
            raise ValueError(f"`specificity` must be in the range [0, 1], got {specificity}")
        epsilon = 1e-7
        inner = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
        super().__init__([0.0 - epsilon] + inner + [1.0 + epsilon], name, dtype)
        self.specificity, self.num_thresholds = specificity, num_thresholds

    def _rates(self):
        tp, fp = self.var("true_positives"), self.var("false_positives")
        tn, fn = self.var("true_negatives"), self.var("false_negatives")
        return tp / tf.maximum(tp + fn, 1e-12), tn / tf.maximum(tn + fp, 1e-12)

    def compute(self):
        sensitivity, specificity = self._rates()
        return tf.gather(sensitivity, tf.argmin(tf.abs(specificity - self.specificity), 0))

    def get_config(self) -> dict:
        return {"name": self.name, "specificity": self.specificity, "num_thresholds": self.num_thresholds}


class SpecificityAtSensitivity(SensitivityAtSpecificity):
    """The specificity at the threshold whose sensitivity is nearest ``sensitivity``."""

    def __init__(self, sensitivity: float, num_thresholds: int = 200, name: str | None = None, dtype=None):
        super().__init__(sensitivity, num_thresholds, name, dtype)
        self.sensitivity = sensitivity

    def compute(self):
        sensitivity, specificity = self._rates()
        return tf.gather(specificity, tf.argmin(tf.abs(sensitivity - self.sensitivity), 0))

    def get_config(self) -> dict:
        return {"name": self.name, "sensitivity": self.sensitivity, "num_thresholds": self.num_thresholds}


class MeanIoU(Metric):
    """The mean over classes of intersection / union, from a confusion matrix of ``num_classes``."""

    def __init__(self, num_classes: int, name: str | None = None, dtype=None):
        super().__init__(name, dtype)
        self.num_classes = int(num_classes)
        self.state_shapes = {"total_confusion_matrix": (self.num_classes, self.num_classes)}

    def update(self, y_true, y_pred, sample_weight=None):
        labels = tf.cast(tf.reshape(y_true, [-1]), tf.int64)
        predictions = tf.cast(tf.reshape(y_pred, [-1]), tf.int64)
        weights = tf.reshape(_weights_like(tf.cast(predictions, self.dtype), sample_weight), [-1])
        cells = tf.one_hot(labels * self.num_classes + predictions, self.num_classes ** 2, dtype=self.dtype)
        counts = tf.reduce_sum(cells * tf.expand_dims(weights, 1), 0)
        return [("total_confusion_matrix", tf.reshape(counts, [self.num_classes, self.num_classes]))]

    def compute(self):
        cm = self.var("total_confusion_matrix")
        rows, cols, diag = tf.reduce_sum(cm, 0), tf.reduce_sum(cm, 1), tf.diag_part(cm)
        union = rows + cols - diag
        present = tf.cast(tf.greater(union, 0), self.dtype)
        iou = diag / tf.maximum(union, 1e-12)
        return tf.reduce_sum(iou * present) / tf.maximum(tf.reduce_sum(present), 1.0)


METRIC_CLASSES = {name: globals()[name] for name in __all__}
