"""``tf.keras.estimator.model_to_estimator``: a compiled functional (or Sequential) Keras model as a
``tf.estimator.Estimator``. Its model_fn rebuilds the model from its config on the input_fn's features
(the learning phase fixed by the mode) and trains it with a fresh optimizer of the compiled kind. As in
TensorFlow, the Estimator's first checkpoint (step 0) holds the Keras model's current weights, so
predict and evaluate work at once and train continues from them."""

from __future__ import annotations

import json
import os
import tempfile

import trainer as tf
from trainer.keras import backend as K, losses as losses_module, metrics as metrics_module, optimizers
from trainer.keras.engine.training import v1_metric_name
from trainer.keras.engine.base_layer import to_list
from trainer.keras.saving import training_config

__all__ = ["model_to_estimator"]


class KerasModelFn:
    """The Estimator's model_fn; ``last_model`` is the Keras model its latest call built."""

    def __init__(self, config: dict, compiled: dict, custom_objects=None):
        self.config, self.compiled, self.custom_objects = config, compiled, custom_objects
        self.last_model = None
        layers = {l["name"]: l for l in config["config"]["layers"]}
        self.input_names = [name for name, _, _ in config["config"]["input_layers"]]
        self.input_configs = {name: layers[name]["config"] for name in self.input_names}

    def features_by_input(self, features) -> dict:
        """``features`` (a tensor, a list, or a dict by input name) as input name -> tensor of the input's shape."""
        names = self.input_names
        if isinstance(features, dict):
            missing = [n for n in names if n not in features]
            if missing:
                raise ValueError(f"model_to_estimator: the features have no {missing} (keys: {sorted(features)}); "
                                 f"the model's inputs are {names}")
            values = [features[n] for n in names]
        else:
            values = to_list(features)
        if len(values) != len(names):
            raise ValueError(f"model_to_estimator: the model has inputs {names}, the features give {len(values)}")
        out = {}
        for name, value in zip(names, values):
            config = self.input_configs[name]
            value = tf.cast(value, config["dtype"])
            inner = config["batch_input_shape"][1:]
            out[name] = tf.reshape(value, [-1] + inner) if None not in inner else value
        return out

    def __call__(self, features, labels, mode):
        from trainer.estimator import EstimatorSpec, ModeKeys
        from trainer.keras.engine.training import Model

        K.set_learning_phase(1 if mode == ModeKeys.TRAIN else 0)
        try:
            model = Model.from_config(self.config["config"], self.custom_objects,
                                      input_tensors=self.features_by_input(features))
        finally:
            K.clear_learning_phase()
        self.last_model = model
        outputs, names = model.outputs, [layer.name for layer in model.output_layers]
        predictions = outputs[0] if len(outputs) == 1 else dict(zip(names, outputs))
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions)
        compiled = self.compiled
        model.compile(optimizers.deserialize(compiled["optimizer_config"], self.custom_objects), compiled["loss"],
                      compiled["metrics"], compiled["loss_weights"])
        loss_fns = [losses_module.get(l) for l in model.per_output(model.loss, "loss")]
        weights = model.per_output(model.loss_weights, "loss_weights") if model.loss_weights else [1.0] * len(outputs)
        label_list = [labels[n] for n in names] if isinstance(labels, dict) else to_list(labels)
        total, metric_ops = None, {}
        for out, name, fn, w, y in zip(outputs, names, loss_fns, weights, label_list):
            rank = len(K.int_shape(out))
            sparse = getattr(fn, "__name__", "") == "sparse_categorical_crossentropy"
            y = tf.cast(y, out.dtype)
            if sparse and rank == 2:
                y = tf.reshape(y, [-1])
            term = w * tf.reduce_mean(losses_module.per_sample(fn)(y, out))
            total = term if total is None else total + term
            for m in model.metrics:
                metric = metrics_module.resolve(m, fn, K.int_shape(out))
                key = v1_metric_name(m, metric)
                metric_ops[key if len(outputs) == 1 else f"{name}_{key}"] = tf.metrics.mean(metric(y, out))
        if model.losses:
            total = total + tf.add_n([tf.convert_to_tensor(l) for l in model.losses])
        if mode == ModeKeys.EVAL:
            return EstimatorSpec(mode, predictions=predictions, loss=total, eval_metric_ops=metric_ops)
        updates = model.optimizer.get_updates(total, model.trainable_weights) + model.updates_of_outputs()
        step = tf.train.get_or_create_global_step()
        with tf.control_dependencies(updates):
            train_op = tf.assign_add(step, 1)
        return EstimatorSpec(mode, predictions=predictions, loss=total, train_op=train_op)


def _save_first_checkpoint(model_fn: KerasModelFn, weights: list, model_dir: str) -> None:
    """``model_dir``'s step-0 checkpoint: the training graph (optimizer state included) holding ``weights``."""
    from trainer.estimator import ModeKeys

    graph = tf.Graph()
    with graph.as_default():
        features = {name: tf.placeholder(c["dtype"], c["batch_input_shape"])
                    for name, c in model_fn.input_configs.items()}
        outputs = model_fn.config["config"]["output_layers"]
        labels = [tf.placeholder(tf.float32, None) for _ in outputs]
        model_fn(features, labels if len(labels) > 1 else labels[0], ModeKeys.TRAIN)
        variables = model_fn.last_model.weights
        with tf.Session(graph=graph) as session:
            session.run(tf.global_variables_initializer())
            session.run([v.initializer for v in variables], {v.initial_value: w for v, w in zip(variables, weights)})
            os.makedirs(model_dir, exist_ok=True)
            tf.train.Saver().save(session, os.path.join(model_dir, "model.ckpt"), global_step=0)


def model_to_estimator(keras_model=None, keras_model_path=None, custom_objects=None, model_dir=None, config=None,
                       checkpoint_format=None):
    """An Estimator that trains, evaluates and predicts like ``keras_model`` (compiled), from its weights."""
    from trainer.estimator import Estimator
    from trainer.keras.engine.training import Model
    from trainer.keras.saving import load_model

    if (keras_model is None) == (keras_model_path is None):
        raise ValueError("Either `keras_model` or `keras_model_path` needs to be provided, not both.")
    if keras_model is None:
        keras_model = load_model(keras_model_path, custom_objects)
    if not keras_model.is_graph_network:
        raise NotImplementedError("model_to_estimator of a subclassed Model is not built in flowstack; use a "
                                  "functional or Sequential model")
    compiled = training_config(keras_model)
    if compiled is None:
        raise ValueError("The given keras model has not been compiled yet (or was compiled with a tf.train "
                         "optimizer). Please compile the model with `model.compile()` before calling "
                         "`model_to_estimator()`.")
    # as a functional model: a Sequential's config has no input layers to put the features in
    functional = Model(keras_model.inputs, keras_model.outputs, name=keras_model.name)
    model_fn = KerasModelFn(json.loads(functional.to_json()), compiled, custom_objects)
    model_dir = model_dir or (config.model_dir if config is not None else None) or tempfile.mkdtemp()
    if tf.train.latest_checkpoint(model_dir) is None:
        _save_first_checkpoint(model_fn, keras_model.get_weights(), model_dir)
    return Estimator(model_fn, model_dir=model_dir, config=config)
