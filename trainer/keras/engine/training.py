"""``Model``: a ``Network`` that trains. ``compile`` resolves the optimizer, losses and metrics (an
unknown name fails here, naming it); the training graph (targets, total loss, updates) is built on
first use, once the model has outputs (a Sequential without an input shape, or a subclassed model,
is built from the first data it sees). ``fit``/``evaluate``/``predict`` run it in ``K.get_session()``."""

from __future__ import annotations

import numpy as np

import trainer as tf
from trainer.keras import backend as K, losses as losses_module, metrics as metrics_module, optimizers
from trainer.keras.callbacks import CallbackList, History, ProgbarLogger
from trainer.keras.engine.base_layer import keras_history, to_list, unpack
from trainer.keras.engine.batch_sources import ArraySource, DatasetSource, GeneratorSource, SequenceSource
from trainer.keras.engine.data_checks import standardize_arrays, standardize_weights, weight_arrays
from trainer.keras.engine.input_layer import Input
from trainer.keras.engine.network import Network
from trainer.keras.metric_objects import Metric

__all__ = ["Model"]

_SPARSE_LOSSES = ("sparse_categorical_crossentropy",)


def _is_sparse(loss) -> bool:
    return getattr(loss, "__name__", "") in _SPARSE_LOSSES or \
        isinstance(loss, losses_module.SparseCategoricalCrossentropy)


def _mean(x):
    return tf.reduce_mean(x)


def _weighted_mean(per_sample, weights):
    """Keras' weighted loss: the per-sample values (averaged over any further axes) times ``weights``,
    divided by the fraction of non-zero weights, averaged."""
    rank = len(K.int_shape(per_sample))
    if rank > 1:
        per_sample = tf.reduce_mean(per_sample, axis=list(range(1, rank)))
    nonzero = tf.reduce_mean(tf.cast(tf.not_equal(weights, 0.0), per_sample.dtype))
    return tf.reduce_mean(per_sample * weights) / tf.maximum(nonzero, K.epsilon())



def v1_metric_name(metric, function) -> str:
    """The name TF 1.x's Keras (graph mode) reports a compiled metric under: ``"acc"`` for
    "accuracy"/"acc", ``"ce"`` for "crossentropy"/"ce", else the metric function's name
    (``"mae"`` is reported as ``"mean_absolute_error"``), as in ``history.history["val_acc"]``."""
    if metric in ("accuracy", "acc"):
        return "acc"
    if metric in ("crossentropy", "ce"):
        return "ce"
    return getattr(function, "name", None) or getattr(function, "__name__", "metric")

class Model(Network):
    """``Model(inputs, outputs)`` (functional) or a subclass defining ``call`` (subclassed)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.optimizer = None
        self.compiled = False
        self.history = None
        self.train_function = self.test_function = self.predict_function = None

    # -- compile -----------------------------------------------------------------------------
    def compile(self, optimizer, loss=None, metrics=None, loss_weights=None, sample_weight_mode=None,
                weighted_metrics=None, target_tensors=None, **kwargs):
        if kwargs:
            raise TypeError(f"compile: unexpected keyword argument(s) {sorted(kwargs)}")
        for argument, value in (("sample_weight_mode", sample_weight_mode), ("weighted_metrics", weighted_metrics),
                                ("target_tensors", target_tensors)):
            if value is not None:
                raise NotImplementedError(f"compile({argument}=...) is not built in flowstack's Keras")
        if loss is None:
            raise ValueError("compile: a `loss` is required (a name such as 'mse', a function, or a list/dict "
                             "of them per output)")
        self.optimizer = optimizers.get(optimizer)
        self.loss = loss
        for each in (loss.values() if isinstance(loss, dict) else to_list(loss)):
            losses_module.get(each) if not isinstance(each, losses_module.Loss) else None
        self.metrics = metrics or []
        for each in (self.metrics.values() if isinstance(self.metrics, dict) else self.metrics):
            for m in to_list(each):
                if m not in ("accuracy", "acc", "crossentropy", "ce"):
                    metrics_module.get(m)
        self.loss_weights = loss_weights
        self.compiled = True
        self.train_function = self.test_function = None

    def per_output(self, spec, what: str) -> list:
        """``spec`` (one value, a list with one entry per output, or a dict by output name) as a list
        with one entry per output. ``metrics`` lists are one list for every output unless given per output."""
        names = self._output_names()
        if isinstance(spec, dict):
            unknown = set(spec) - set(names)
            if unknown:
                raise ValueError(f"Unknown entries in {what} dictionary: {sorted(unknown)}. Only expected the "
                                 f"following keys: {names}")
            return [spec.get(n) for n in names]
        if isinstance(spec, (list, tuple)) and (what != "metrics" or len(self.outputs) > 1):
            if len(spec) != len(self.outputs):
                raise ValueError(f"When passing a list as {what}, it should have one entry per model output. The "
                                 f"model has {len(self.outputs)} outputs, but you passed {what}={spec}")
            return list(spec)
        return [spec] * len(self.outputs)

    def _output_names(self) -> list[str]:
        if self.is_graph_network:
            return [layer.name for layer in self.output_layers]
        return [f"output_{i + 1}" for i in range(len(self.outputs))]

    def _build_training(self) -> None:
        """Targets, the total loss and metrics, and the train/test/predict functions (once)."""
        if self.train_function is not None:
            return
        graph = self.outputs[0].graph
        with graph.as_default(), tf.name_scope("training"):
            loss_fns = [losses_module.get(l) if not isinstance(l, losses_module.Loss) else l
                        for l in self.per_output(self.loss, "loss")]
            weights = self.per_output(self.loss_weights, "loss_weights") if self.loss_weights is not None else \
                [1.0] * len(self.outputs)
            metric_lists = self.per_output(self.metrics, "metrics") if isinstance(self.metrics, dict) else \
                [self.metrics] * len(self.outputs)
            names = self._output_names()
            self.targets, self.sparse_targets, self.sample_weights = [], [], []
            total, output_losses, metric_values, metric_names, stateful = None, [], [], [], []
            self.stateful_metrics = []
            for out, name, fn, w, mets in zip(self.outputs, names, loss_fns, weights, metric_lists):
                rank = len(K.int_shape(out))
                sparse = _is_sparse(fn)
                target = K.placeholder(ndim=rank - 1 if sparse else rank, name=f"{name}_target")
                weights = K.placeholder(ndim=1, name=f"{name}_sample_weights")
                self.targets.append(target)
                self.sparse_targets.append(sparse)
                self.sample_weights.append(weights)
                output_loss = _weighted_mean(losses_module.per_sample(fn)(target, out), weights)
                output_losses.append(output_loss)
                total = w * output_loss if total is None else total + w * output_loss
                for m in to_list(mets or []):
                    if isinstance(m, Metric):  # stateful: updated, then its running value
                        metric_values.append(m(target, out))
                        self.stateful_metrics.append(m)
                        base = m.name
                    else:
                        fn_m = metrics_module.resolve(m, fn, K.int_shape(out))
                        metric_values.append(_mean(fn_m(target, out)))
                        base = v1_metric_name(m, fn_m)
                    stateful.append(isinstance(m, Metric))
                    metric_names.append(base if len(self.outputs) == 1 else f"{name}_{base}")
            regularization = self.losses
            if regularization:
                total = total + tf.add_n([tf.convert_to_tensor(r) for r in regularization])
            self.total_loss = total
            self.metrics_names = ["loss"] + ([f"{n}_loss" for n in names] if len(self.outputs) > 1 else []) + \
                metric_names
            fetches = [total] + (output_losses if len(self.outputs) > 1 else []) + metric_values
            # per fetch: True where the value is a running one (reported as is, not averaged over batches)
            self.running_values = np.asarray([False] * (len(fetches) - len(stateful)) + stateful)
            with tf.name_scope(type(self.optimizer).__name__):
                updates = self.optimizer.get_updates(total, self.trainable_weights)
            phase = [K.learning_phase()] if K.learning_phase_is_fed() else []
            self.train_function = K.function(self.inputs + self.targets + self.sample_weights + phase, fetches,
                                             updates=updates + self.updates_of_outputs())
            self.train_phase_values = [True] * len(phase)
            self.test_function = K.function(self.inputs + self.targets + self.sample_weights, fetches)

    def _build_predict(self) -> None:
        if self.predict_function is None:
            self.predict_function = K.function(self.inputs, self.outputs)

    # -- data --------------------------------------------------------------------------------
    def _ensure_built(self, xs: list) -> None:
        """A model without outputs yet (a Sequential without input shape, a subclassed model) built on ``xs``."""
        if self.outputs:
            return
        if hasattr(self, "build_on_shape"):
            self.build_on_shape((None,) + tuple(np.shape(xs[0])[1:]), np.asarray(xs[0]).dtype)
            return
        inputs = [Input(batch_shape=(None,) + tuple(np.shape(x)[1:]),
                        dtype=K.floatx() if np.asarray(x).dtype.kind == "f" else np.asarray(x).dtype.name)
                  for x in xs]
        outputs = self(unpack(inputs))
        self.inputs, self.outputs = inputs, to_list(outputs)
        self.output_layers = [keras_history(o).layer for o in self.outputs]

    def _input_names(self) -> list[str]:
        return [keras_history(x).layer.name if keras_history(x) else x.name for x in self.inputs]

    def _standardize(self, data, tensors: list, names: list[str], what: str, sparse=None) -> list:
        """``data`` checked against ``tensors`` (targets: against the outputs, see data_checks)."""
        if sparse is None:
            shapes = [K.int_shape(t) for t in tensors]
        else:
            shapes = [K.int_shape(o)[:-1] if s else K.int_shape(o) for o, s in zip(self.outputs, sparse)]
        return standardize_arrays(data, shapes, [np.dtype(t.dtype) for t in tensors], names, what)

    def _check_compiled(self) -> None:
        if not self.compiled:
            raise RuntimeError("You must compile your model before training/testing. Use "
                               "`model.compile(optimizer, loss)`.")

    def _source(self, x, y, batch_size, shuffle, steps, what: str, restart: bool = False, sample_weight=None,
                class_weight=None):
        """A batch source for ``x``/``y`` of any supported kind, the model built on the first data if needed."""
        from trainer.data import Dataset
        from trainer.keras.utils import Sequence

        if not isinstance(x, (np.ndarray, list, tuple, dict)) and (sample_weight is not None or
                                                                   class_weight is not None):
            raise NotImplementedError(f"{what}: sample_weight=/class_weight= with a dataset, Sequence or generator "
                                      "is not built in flowstack; yield (x, y, sample_weight) instead")
        if isinstance(x, Dataset):
            if y is not None:
                raise ValueError("`y` argument is not supported when using dataset as input.")
            return DatasetSource(x, steps, restart)
        if isinstance(x, Sequence):
            return SequenceSource(x, shuffle, steps)
        if hasattr(x, "__next__"):
            return GeneratorSource(x, steps)
        if x is None:
            raise ValueError(f"{what}: no input data (x is None)")
        xs = list(x.values()) if isinstance(x, dict) else to_list(x) if isinstance(x, (list, tuple)) else [x]
        self._ensure_built(xs)
        xs = self._standardize(x, self.inputs, self._input_names(), "input")
        ys = weights = None
        if y is not None:
            self._build_training()
            ys = self._standardize(y, self.targets, self._output_names(), "target", self.sparse_targets)
            if len(ys[0]) != len(xs[0]):
                raise ValueError(f"Input arrays should have the same number of samples as target arrays. Found "
                                 f"{len(xs[0])} input samples and {len(ys[0])} target samples.")
            weights = standardize_weights(sample_weight, class_weight, ys, self._output_names())
        return ArraySource(xs, ys, batch_size or 32, shuffle, weights)

    def _batch_arrays(self, xb, yb, wb=None):
        """A generated batch (x, y, sample weights) checked as arrays are (the model built on it if needed)."""
        raw = list(xb[0].values()) if len(xb) == 1 and isinstance(xb[0], dict) else xb
        self._ensure_built(raw)
        xs = self._standardize(xb[0] if len(xb) == 1 and isinstance(xb[0], dict) else xb, self.inputs,
                               self._input_names(), "input")
        if yb is None:
            return xs, None, None
        self._build_training()
        ys = self._standardize(yb, self.targets, self._output_names(), "target", self.sparse_targets)
        return xs, ys, standardize_weights(wb, None, ys, self._output_names())

    # -- training loops ------------------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs: int = 1, verbose: int = 1, callbacks=None,
            validation_split: float = 0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch: int = 0, steps_per_epoch=None, validation_steps=None,
            validation_freq: int = 1, max_queue_size: int = 10, workers: int = 1,
            use_multiprocessing: bool = False, **kwargs):
        """Train for ``epochs``; returns the ``History`` (``history.history["loss"]``, ``"val_loss"``, ...)."""
        if kwargs:
            raise TypeError(f"fit: unexpected keyword argument(s) {sorted(kwargs)}")
        self._check_compiled()
        if validation_split and validation_data is None:
            if not isinstance(x, (np.ndarray, list, tuple, dict)):
                raise ValueError("validation_split is only supported for NumPy array inputs")
            if sample_weight is not None:
                sample_weight, _, _ = self._split(sample_weight, sample_weight, validation_split)
            x, y, validation_data = self._split(x, y, validation_split)
        source = self._source(x, y, batch_size, shuffle, steps_per_epoch, "fit", sample_weight=sample_weight,
                              class_weight=class_weight)
        val_source = None
        if validation_data is not None:
            val_source = self._validation_source(validation_data, batch_size, validation_steps)
        self.history = History()
        progress = [ProgbarLogger()] if verbose else []
        cbs = CallbackList(list(callbacks or []) + [self.history] + progress)  # History sees what others log
        cbs.set_model(self)
        cbs.set_params({"batch_size": batch_size, "epochs": epochs, "steps": source.steps(), "verbose": verbose,
                        "samples": getattr(source, "samples", None), "do_validation": val_source is not None,
                        "metrics": None})
        self.stop_training = False
        cbs.on_train_begin()
        for epoch in range(initial_epoch, epochs):
            cbs.on_epoch_begin(epoch)
            epoch_logs = self._run_epoch(source, cbs)
            if val_source is not None and (epoch + 1) % validation_freq == 0:
                for name, value in zip(self.metrics_names, self._evaluate_source(val_source)):
                    epoch_logs["val_" + name] = value
            cbs.on_epoch_end(epoch, epoch_logs)
            if self.stop_training:
                break
        cbs.on_train_end()
        return self.history

    @staticmethod
    def _accumulate(totals, outs: list, n: int, running):
        """Batch-size-weighted sums of the values, except running values, which replace (times n)."""
        outs = np.asarray(outs) * n
        if totals is None:
            return outs
        return np.where(running, outs, totals + outs)

    def _epoch_values(self, totals, seen: int, last_n: int) -> list[float]:
        running = self.running_values
        return [float(v) for v in np.where(running, totals / max(last_n, 1), totals / seen)]

    def _run_epoch(self, source, cbs) -> dict:
        totals, seen, n = None, 0, 0
        self.reset_metrics()
        for index, (xb, yb, wb) in enumerate(source.batches()):
            if yb is None:
                raise ValueError("fit needs targets: pass y, or a dataset/generator yielding (x, y)")
            if not isinstance(source, ArraySource):
                xb, yb, wb = self._batch_arrays(xb, yb, wb)
            self._build_training()
            n = len(xb[0])
            logs = {"batch": index, "size": n}
            cbs.on_train_batch_begin(index, logs)
            feeds = xb + yb + weight_arrays(yb, wb) + self.train_phase_values
            outs = [float(v) for v in self.train_function(feeds)]
            logs.update(zip(self.metrics_names, outs))
            totals = self._accumulate(totals, outs, n, self.running_values)
            seen += n
            cbs.on_train_batch_end(index, logs)
            if self.stop_training:
                break
        if totals is None:
            raise ValueError("fit: the data yielded no batches")
        return dict(zip(self.metrics_names, self._epoch_values(totals, seen, n)))

    def _split(self, x, y, fraction: float):
        xs = x if isinstance(x, (list, tuple)) else [x]
        n = len(xs[0])
        at = int(n * (1.0 - fraction))
        cut = lambda data, part: ({k: v[part] for k, v in data.items()} if isinstance(data, dict) else  # noqa: E731
                                  [d[part] for d in data] if isinstance(data, (list, tuple)) else data[part])
        return cut(x, slice(0, at)), cut(y, slice(0, at)), (cut(x, slice(at, None)), cut(y, slice(at, None)))

    def _validation_source(self, data, batch_size, steps):
        from trainer.data import Dataset

        if isinstance(data, Dataset) or hasattr(data, "__getitem__") and not isinstance(data, (tuple, list)):
            return self._source(data, None, batch_size, False, steps, "validation", restart=True)
        if isinstance(data, (tuple, list)) and len(data) in (2, 3):
            weights = data[2] if len(data) == 3 else None
            return self._source(data[0], data[1], batch_size, False, steps, "validation", sample_weight=weights)
        raise ValueError("When passing validation_data, it must contain 2 (x_val, y_val) items, or be a dataset; "
                         f"got {type(data).__name__}")

    def _evaluate_source(self, source) -> list[float]:
        totals, seen, n = None, 0, 0
        if self.train_function is not None:
            self.reset_metrics()
        for xb, yb, wb in source.batches():
            if not isinstance(source, ArraySource):
                xb, yb, wb = self._batch_arrays(xb, yb, wb)
            if yb is None:
                raise ValueError("evaluate needs targets: pass y, or a dataset yielding (x, y)")
            if self.train_function is None:
                self._build_training()
                self.reset_metrics()
            outs = [float(v) for v in self.test_function(xb + yb + weight_arrays(yb, wb))]
            n = len(xb[0])
            totals = self._accumulate(totals, outs, n, self.running_values)
            seen += n
        if totals is None:
            raise ValueError("evaluate: the data yielded no batches")
        return self._epoch_values(totals, seen, n)

    def evaluate(self, x=None, y=None, batch_size=None, verbose: int = 1, sample_weight=None, steps=None,
                 callbacks=None, max_queue_size: int = 10, workers: int = 1, use_multiprocessing: bool = False):
        """The loss (and metrics) over the data: a scalar, or a list in ``metrics_names`` order."""
        self._check_compiled()
        values = self._evaluate_source(self._source(x, y, batch_size, False, steps, "evaluate", restart=True,
                                                    sample_weight=sample_weight))
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose: int = 0, steps=None, callbacks=None, max_queue_size: int = 10,
                workers: int = 1, use_multiprocessing: bool = False):
        """The model's outputs for ``x``, batch by batch, concatenated."""
        source = self._source(x, None, batch_size, False, steps, "predict", restart=True)
        chunks = []
        for xb, _, _ in source.batches():
            if not isinstance(source, ArraySource):
                xb, _, _ = self._batch_arrays(xb, None)
            self._build_predict()
            chunks.append(self.predict_function(xb))
        if not chunks:
            raise ValueError("predict: the data yielded no batches")
        outputs = [np.concatenate([c[i] for c in chunks]) for i in range(len(chunks[0]))]
        return unpack(outputs)

    def train_on_batch(self, x, y, sample_weight=None, class_weight=None, reset_metrics: bool = True):
        self._check_compiled()
        source = self._source(x, y, None, False, None, "train_on_batch", sample_weight=sample_weight,
                              class_weight=class_weight)
        xs, ys = source.xs, source.ys
        if reset_metrics:
            self.reset_metrics()
        feeds = xs + ys + weight_arrays(ys, source.sample_weights) + self.train_phase_values
        outs = [float(v) for v in self.train_function(feeds)]
        return outs[0] if len(outs) == 1 else outs

    def test_on_batch(self, x, y, sample_weight=None, reset_metrics: bool = True):
        self._check_compiled()
        source = self._source(x, y, None, False, None, "test_on_batch", sample_weight=sample_weight)
        if reset_metrics:
            self.reset_metrics()
        outs = [float(v) for v in self.test_function(source.xs + source.ys +
                                                     weight_arrays(source.ys, source.sample_weights))]
        return outs[0] if len(outs) == 1 else outs

    def predict_on_batch(self, x):
        source = self._source(x, None, None, False, None, "predict_on_batch")
        self._build_predict()
        return unpack(self.predict_function(source.xs))

    def fit_generator(self, generator, steps_per_epoch=None, epochs: int = 1, verbose: int = 1, callbacks=None,
                      validation_data=None, validation_steps=None, validation_freq: int = 1, class_weight=None,
                      max_queue_size: int = 10, workers: int = 1, use_multiprocessing: bool = False,
                      shuffle: bool = True, initial_epoch: int = 0):
        return self.fit(generator, steps_per_epoch=steps_per_epoch, epochs=epochs, verbose=verbose,
                        callbacks=callbacks, validation_data=validation_data, validation_steps=validation_steps,
                        validation_freq=validation_freq, class_weight=class_weight, shuffle=shuffle,
                        initial_epoch=initial_epoch)

    def evaluate_generator(self, generator, steps=None, callbacks=None, max_queue_size: int = 10, workers: int = 1,
                           use_multiprocessing: bool = False, verbose: int = 0):
        return self.evaluate(generator, steps=steps)

    def predict_generator(self, generator, steps=None, callbacks=None, max_queue_size: int = 10, workers: int = 1,
                          use_multiprocessing: bool = False, verbose: int = 0):
        return self.predict(generator, steps=steps)

    def save(self, filepath, overwrite: bool = True, include_optimizer: bool = True, save_format=None) -> None:
        from trainer.keras import saving

        saving.save_model(self, filepath, overwrite, include_optimizer)

    def reset_metrics(self) -> None:
        """Zero the metric objects' state (function metrics are per batch and have none)."""
        for metric in getattr(self, "stateful_metrics", []):
            metric.reset_states()

    def reset_states(self) -> None:
        """Recurrent layers here are never stateful, so there is no state to reset."""


