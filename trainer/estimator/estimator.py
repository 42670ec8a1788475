"""``Estimator``: TensorFlow 1.x's train / evaluate / predict / export loop around a ``model_fn``.

Each call builds a fresh graph (input_fn, then model_fn in the call's mode), so the three modes
share variables only through the checkpoints in ``model_dir``. Training runs in a
``MonitoredTrainingSession`` (restore or initialize, periodic checkpoints and summaries, a final
checkpoint); evaluation and prediction restore the newest checkpoint. ``export_saved_model`` plays
SavedModel's role: it writes ``<export_dir_base>/<version>/model.flow``, the model repository
entry ``flowstack serve`` loads.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import os
import tempfile
import time
from typing import Callable, Iterator

import numpy as np

from trainer.data.dataset import Dataset
from trainer.errors import OutOfRangeError
from trainer.estimator.export import ServingInputReceiver
from trainer.estimator.hooks import HookedRunner, NanLossDuringTrainingError
from trainer.estimator.run_config import RunConfig
from trainer.estimator.spec import EstimatorSpec, EstimatorSpecError, ModeKeys, scalar
from trainer.graph import Graph
from trainer.metrics import mean
from trainer.monitored import MonitoredTrainingSession
from trainer.queues import Coordinator, start_queue_runners
from trainer.saver import Saver, latest_checkpoint
from trainer.session import Session
from trainer.summary import FileWriter
from trainer.train import get_or_create_global_step
from trainer.variables import local_variables_initializer

__all__ = ["Estimator", "NanLossDuringTrainingError", "add_metrics"]

log = logging.getLogger("trainer.estimator")

# The exporter is the layer above the trainer (DESIGN.md section 1), so the trainer never imports it;
# export_saved_model looks its freeze-check-optimize-write entry point up by name when called.
_EXPORTER = ("exporter.freeze", "export_trained")


def _call_with_accepted(fn: Callable, what: str, **available):
    """Call ``fn`` with the arguments its signature names, as TensorFlow does for input_fn and model_fn."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn()
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return fn(**available)
    unknown = [n for n, p in params.items() if n not in available and p.default is p.empty
               and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if unknown:
        raise TypeError(f"{what} {getattr(fn, '__name__', fn)!r} takes {unknown}; it may take only "
                        f"{sorted(available)}")
    return fn(**{n: v for n, v in available.items() if n in params})


class Estimator:
    """``Estimator(model_fn, model_dir=None, config=None, params=None)``."""

    def __init__(self, model_fn: Callable, model_dir: str | None = None, config: RunConfig | None = None,
                 params: dict | None = None, warm_start_from=None):
        if not callable(model_fn):
            raise TypeError(f"Estimator: model_fn must be callable, got {type(model_fn).__name__}")
        self._warm_start = _warm_start_settings(warm_start_from)
        config = config or RunConfig()
        if (model_dir is not None and config.model_dir is not None
                and os.path.abspath(model_dir) != os.path.abspath(config.model_dir)):
            raise ValueError(f"Estimator: model_dir {model_dir!r} differs from config.model_dir {config.model_dir!r}")
        model_dir = model_dir or config.model_dir or tempfile.mkdtemp(prefix="estimator_")
        self._model_fn = model_fn
        self._model_dir = os.fspath(model_dir)
        self._config = config.replace(model_dir=self._model_dir)
        self._params = dict(params or {})

    @property
    def model_fn(self) -> Callable:
        """The ``model_fn`` given: what wrappers such as ``add_metrics`` build on."""
        return self._model_fn

    @property
    def model_dir(self) -> str:
        return self._model_dir

    @property
    def config(self) -> RunConfig:
        return self._config

    @property
    def params(self) -> dict:
        return dict(self._params)

    def latest_checkpoint(self) -> str | None:
        return latest_checkpoint(self._model_dir)

    def get_variable_names(self) -> list[str]:
        from trainer.saver import load_checkpoint

        path = self._require_checkpoint(None)
        return sorted(load_checkpoint(path)[1])

    def get_variable_value(self, name: str) -> np.ndarray:
        """The checkpointed value of ``name`` (an op name, or a variable's ``"w:0"`` as TensorFlow takes too)."""
        from trainer.saver import load_checkpoint

        if name.endswith(":0"):
            name = name[:-2]
        values = load_checkpoint(self._require_checkpoint(None))[1]
        if name not in values:
            raise ValueError(f"variable {name!r} is not in the checkpoint; it has {sorted(values)}")
        return values[name]

    # -- building -----------------------------------------------------------------------------------
    def _graph(self) -> Graph:
        g = Graph()
        if self._config.tf_random_seed is not None:
            from trainer import init

            init.set_seed(self._config.tf_random_seed)
        return g

    def _input(self, input_fn: Callable, mode: str):
        result = _call_with_accepted(input_fn, "input_fn", mode=mode, params=self.params, config=self._config)
        if isinstance(result, Dataset):
            result = result.make_one_shot_iterator().get_next()
        if isinstance(result, tuple) and len(result) == 2:
            return result
        if isinstance(result, tuple):
            raise ValueError(f"input_fn must return features, (features, labels) or a Dataset of them; got a tuple of "
                             f"{len(result)}")
        return result, None

    def _spec(self, features, labels, mode: str) -> EstimatorSpec:
        spec = _call_with_accepted(self._model_fn, "model_fn", features=features, labels=labels, mode=mode,
                                   params=self.params, config=self._config)
        if not isinstance(spec, EstimatorSpec):
            raise EstimatorSpecError(f"model_fn must return a tf.estimator.EstimatorSpec, got {type(spec).__name__}")
        if spec.mode != mode:
            raise EstimatorSpecError(f"model_fn was called in mode {mode!r} but returned an EstimatorSpec with "
                                     f"mode {spec.mode!r}")
        if mode == ModeKeys.TRAIN:
            for field, value in (("loss", spec.loss), ("train_op", spec.train_op)):
                if value is None:
                    raise EstimatorSpecError(f"EstimatorSpec.{field} is required for training")
        return spec

    def _require_checkpoint(self, checkpoint_path: str | None) -> str:
        path = checkpoint_path or latest_checkpoint(self._model_dir)
        if path is None:
            raise ValueError(f"could not find a trained model in model_dir {self._model_dir!r}: train() first "
                             "(or pass checkpoint_path)")
        return path

    def _restored_session(self, g: Graph, checkpoint_path: str | None) -> Session:
        path = self._require_checkpoint(checkpoint_path)
        with g.as_default():
            saver = Saver(graph=g)
            local_init = local_variables_initializer()
        sess = Session(g)
        saver.restore(sess, path)
        sess.run(local_init)
        return sess

    # -- train ----------------------------------------------------------------------------------------
    def train(self, input_fn: Callable, hooks=None, steps: int | None = None, max_steps: int | None = None,
              saving_listeners=None) -> "Estimator":
        """Train until the input ends, ``steps`` more steps, or global step ``max_steps``."""
        if steps is not None and max_steps is not None:
            raise ValueError("train: give steps or max_steps, not both")
        for name, value in (("steps", steps), ("max_steps", max_steps)):
            if value is not None and value <= 0:
                raise ValueError(f"train: {name} must be positive, got {value}")
        if max_steps is not None:
            done = self._checkpointed_step()
            if done is not None and done >= max_steps:
                log.info("skipping training: global step %d already reached max_steps %d", done, max_steps)
                return self
        g = self._graph()
        with g.as_default():
            global_step = get_or_create_global_step(g)
            features, labels = self._input(input_fn, ModeKeys.TRAIN)
            spec = self._spec(features, labels, ModeKeys.TRAIN)
            from trainer.summary import merge_all, scalar as scalar_summary

            scalar_summary("loss", spec.loss)
            summaries = merge_all(g)
            if self._warm_start is not None and self.latest_checkpoint() is None:  # a first run only, as TF's
                from trainer.warm_starting import warm_start

                warm_start(*self._warm_start)
        with g.as_default():  # hooks build their fetches in the estimator's graph, as in TensorFlow
            self._train_loop(g, spec, global_step, summaries, hooks, steps, max_steps)
        return self

    def _train_loop(self, g, spec, global_step, summaries, hooks, steps, max_steps) -> None:
        c = self._config
        runner = HookedRunner(list(hooks or ()) + list(spec.training_hooks) + list(spec.training_chief_hooks))
        runner.begin()
        sess = MonitoredTrainingSession(
            self._model_dir, graph=g, save_steps=c.save_checkpoints_steps,
            save_secs=None if c.save_checkpoints_steps is not None else c.save_checkpoints_secs,
            max_to_keep=c.keep_checkpoint_max, summary_op=summaries, save_summaries_steps=c.save_summary_steps)
        try:
            sess.max_steps = max_steps if max_steps is not None else (sess.step + steps if steps is not None else None)
            runner.after_create_session(sess.session)
            fetches = {"train_op": spec.train_op, "loss": spec.loss, "step": global_step}
            started, logged_step = time.monotonic(), sess.step
            while not sess.should_stop() and not runner.stop_requested:
                try:
                    out = runner.run(sess.run, fetches)
                except OutOfRangeError:
                    break
                loss = float(out["loss"])
                if not np.isfinite(loss):
                    raise NanLossDuringTrainingError(f"loss is {loss} at global step {int(out['step'])}")
                if c.log_step_count_steps and sess.step - logged_step >= c.log_step_count_steps:
                    rate = (sess.step - logged_step) / max(time.monotonic() - started, 1e-9)
                    log.info("loss = %.6g, step = %d (%.1f steps/s)", loss, sess.step, rate)
                    started, logged_step = time.monotonic(), sess.step
            runner.end(sess.session)
        finally:
            sess.close()

    def _checkpointed_step(self) -> int | None:
        path = latest_checkpoint(self._model_dir)
        if path is None:
            return None
        from trainer.saver import load_checkpoint

        values = load_checkpoint(path)[1]
        step = values.get("global_step")
        return None if step is None else int(step)

    # -- evaluate -------------------------------------------------------------------------------------
    def evaluate(self, input_fn: Callable, steps: int | None = None, hooks=None, checkpoint_path: str | None = None,
                 name: str | None = None) -> dict:
        """Metrics over the input (or ``steps`` batches of it): ``eval_metric_ops``, ``loss`` and ``global_step``."""
        g = self._graph()
        with g.as_default():
            global_step = get_or_create_global_step(g)
            features, labels = self._input(input_fn, ModeKeys.EVAL)
            spec = self._spec(features, labels, ModeKeys.EVAL)
            metrics = dict(spec.eval_metric_ops or {})
            if "loss" not in metrics:
                metrics["loss"] = mean(spec.loss, name="mean_loss")
        with g.as_default():
            results = self._evaluate_loop(g, spec, metrics, global_step, hooks, steps, checkpoint_path)
        self._write_eval_summaries(results, name)
        return results

    def _evaluate_loop(self, g, spec, metrics, global_step, hooks, steps, checkpoint_path) -> dict:
        sess = self._restored_session(g, checkpoint_path)
        coord = Coordinator()
        threads = start_queue_runners(sess, coord)  # an input_fn's queue pipeline, as under TensorFlow
        runner = HookedRunner(list(hooks or ()) + list(spec.evaluation_hooks))
        runner.begin()
        try:
            runner.after_create_session(sess)
            updates = [update for _, update in metrics.values()]
            done = 0
            while (steps is None or done < steps) and not runner.stop_requested:
                try:
                    runner.run(sess.run, updates)
                except OutOfRangeError:
                    break
                done += 1
            if done == 0:
                raise ValueError("evaluate: the input_fn gave no batches to evaluate on")
            results = {k: scalar(v) for k, v in sess.run({k: value for k, (value, _) in metrics.items()}).items()}
            results["global_step"] = int(sess.run(global_step))
            runner.end(sess)
        finally:
            _close(sess, coord, threads)
        return results

    def _write_eval_summaries(self, results: dict, name: str | None) -> None:
        with FileWriter(os.path.join(self._model_dir, "eval" if not name else f"eval_{name}")) as writer:
            for key, value in results.items():
                if key != "global_step" and np.ndim(value) == 0:
                    writer.add_scalar(key, float(value), results["global_step"])

    # -- predict --------------------------------------------------------------------------------------
    def predict(self, input_fn: Callable, predict_keys=None, hooks=None, checkpoint_path: str | None = None,
                yield_single_examples: bool = True) -> Iterator:
        """Predictions for every input example (dicts when the model_fn's predictions are a dict)."""
        g = self._graph()
        with g.as_default():
            features, _ = self._input(input_fn, ModeKeys.PREDICT)
            spec = self._spec(features, None, ModeKeys.PREDICT)
        predictions = spec.predictions
        if predict_keys is not None:
            if not isinstance(predictions, dict):
                raise ValueError("predict_keys needs the model_fn's predictions to be a dict")
            missing = [k for k in predict_keys if k not in predictions]
            if missing:
                raise ValueError(f"predict_keys {missing} are not among the predictions {sorted(predictions)}")
            predictions = {k: predictions[k] for k in predict_keys}
        sess = self._restored_session(g, checkpoint_path)
        coord = Coordinator()
        threads = start_queue_runners(sess, coord)  # an input_fn's queue pipeline, as under TensorFlow
        runner = HookedRunner(list(hooks or ()) + list(spec.prediction_hooks))
        try:
            with g.as_default():  # not across the yields: the caller's default graph is its own
                runner.begin()
                runner.after_create_session(sess)
            while not runner.stop_requested:
                try:
                    with g.as_default():
                        batch = runner.run(sess.run, predictions)
                except OutOfRangeError:
                    break
                if not yield_single_examples:
                    yield batch
                    continue
                yield from _examples(batch)
            with g.as_default():
                runner.end(sess)
        finally:
            _close(sess, coord, threads)

    # -- export ---------------------------------------------------------------------------------------
    def export_saved_model(self, export_dir_base: str, serving_input_receiver_fn: Callable, assets_extra=None,
                           as_text: bool = False, checkpoint_path: str | None = None,
                           experimental_mode: str = ModeKeys.PREDICT) -> bytes:
        """Write ``<export_dir_base>/<version>/model.flow`` (version: seconds since the epoch, as TensorFlow
        names SavedModel directories) from the newest checkpoint; returns that directory's path as bytes.

        The served inputs are the receiver's tensors (its ``receiver_tensors_alternatives``, which a
        SavedModel serves as extra signatures, are not exported: a .flow has one entry point); the
        outputs are the spec's ``export_outputs`` (see ``_served_outputs``), else its ``predictions``.
        The exporter checks the model against the trainer before writing it; a receiver fed
        serialized tf.Examples (``build_parsing_serving_input_receiver_fn``) is checked on sample
        records, and the .flow lists that input for servers (edge_runtime/example_records.py).
        """
        if experimental_mode != ModeKeys.PREDICT:
            raise ValueError("export_saved_model exports the PREDICT graph only")
        g = self._graph()
        with g.as_default():
            receiver = serving_input_receiver_fn()
            if not isinstance(receiver, ServingInputReceiver):
                raise TypeError(f"serving_input_receiver_fn must return a ServingInputReceiver, got "
                                f"{type(receiver).__name__}")
            spec = self._spec(receiver.features, None, ModeKeys.PREDICT)
        outputs = _served_outputs(spec)
        sess = self._restored_session(g, checkpoint_path)
        try:
            version = _next_version(export_dir_base)
            destination = os.path.join(os.fspath(export_dir_base), str(version), "model.flow")
            os.makedirs(os.path.dirname(destination), exist_ok=True)
            module, name = _EXPORTER
            export_trained = getattr(importlib.import_module(module), name)
            export_trained(sess, destination, dict(receiver.receiver_tensors), outputs)
        finally:
            sess.close()
        return os.path.dirname(destination).encode()

    export_savedmodel = export_saved_model  # the TF 1.x spelling before 1.13


def _warm_start_settings(warm_start_from):
    """``warm_start_from`` as WarmStartSettings: a checkpoint path warm-starts every trainable variable."""
    from trainer.warm_starting import WarmStartSettings

    if warm_start_from is None or isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    if isinstance(warm_start_from, (str, os.PathLike)):
        return WarmStartSettings(os.fspath(warm_start_from))
    raise ValueError(f"warm_start_from must be a string or a WarmStartSettings, instead got {type(warm_start_from)}")


def _close(sess: Session, coord: Coordinator, threads: list) -> None:
    """Stop and join the queue runners (re-raising one's error, a bad record), then close ``sess``."""
    try:
        coord.request_stop()
        coord.join(threads)
    finally:
        sess.close()


def _served_outputs(spec: EstimatorSpec) -> dict:
    """The export outputs' tensors: the ``serving_default`` signature's (the one SavedModel serves by
    default) if there is one, else every ExportOutput's, as ``<key>/<name>`` when there are several."""
    outputs = spec.export_outputs
    if outputs:
        if "serving_default" in outputs:
            outputs = {"serving_default": outputs["serving_default"]}
        several = len(outputs) > 1
        return {(f"{key}/{name}" if several else name): t
                for key, out in outputs.items() for name, t in out.outputs.items()}
    preds = spec.predictions
    return dict(preds) if isinstance(preds, dict) else {"output": preds}


def _next_version(base: str) -> int:
    """Seconds since the epoch, bumped past any version directory already there."""
    version = int(time.time())
    if os.path.isdir(base):
        taken = [int(d) for d in os.listdir(base) if d.isdigit()]
        version = max([version] + [t + 1 for t in taken])
    return version


def _examples(batch):
    if isinstance(batch, dict):
        n = {len(v) for v in batch.values() if np.ndim(v) > 0}
        if len(n) != 1:
            raise ValueError(f"predict: the predictions' batch sizes differ ({sorted(n)}); use "
                             "yield_single_examples=False")
        for i in range(n.pop()):
            yield {k: v[i] for k, v in batch.items()}
    else:
        yield from batch


def add_metrics(estimator: Estimator, metric_fn: Callable) -> Estimator:
    """A copy of ``estimator`` whose evaluation also reports ``metric_fn``'s metrics.

    ``metric_fn`` takes any of ``features``, ``labels``, ``predictions`` and ``config`` and returns
    a dict of name -> (value, update_op); its names replace the model_fn's where both have one.
    """
    model_fn = estimator.model_fn

    def with_metrics(features, labels, mode, params, config):
        spec = _call_with_accepted(model_fn, "model_fn", features=features, labels=labels, mode=mode,
                                   params=params, config=config)
        if mode != ModeKeys.EVAL or not isinstance(spec, EstimatorSpec):
            return spec
        available = {"features": features, "labels": labels, "config": config}
        if spec.predictions is not None:  # else a metric_fn taking predictions is told they are missing
            available["predictions"] = spec.predictions
        extra = _call_with_accepted(metric_fn, "metric_fn", **available)
        metrics = {**(spec.eval_metric_ops or {}), **extra}
        return EstimatorSpec(spec.mode, predictions=spec.predictions, loss=spec.loss, eval_metric_ops=metrics,
                             export_outputs=spec.export_outputs, evaluation_hooks=spec.evaluation_hooks)

    return Estimator(with_metrics, model_dir=estimator.model_dir, config=estimator.config, params=estimator.params)
