"""``tf.estimator.BestExporter``: export only when an evaluation beats the best one so far (by
default, a smaller ``loss``), keeping the newest ``exports_to_keep`` exports.

The best result so far starts as the best among the evaluations already written to the model's
event files (``event_file_pattern`` under ``model_dir``), so a restarted job does not export a
model worse than one it exported before, as TensorFlow's does.
"""

from __future__ import annotations

import glob
import inspect
import os
import shutil
from typing import Callable

from trainer.estimator.export import Exporter

__all__ = ["BestExporter"]


def loss_smaller(best_eval_result: dict, current_eval_result: dict) -> bool:
    """True when the current evaluation's ``loss`` is smaller than the best one's."""
    for what, result in (("best_eval_result", best_eval_result), ("current_eval_result", current_eval_result)):
        if not result or "loss" not in result:
            raise ValueError(f"{what} cannot be empty or no loss is found in it.")
    return best_eval_result["loss"] > current_eval_result["loss"]


def _event_results(pattern: str) -> list[dict]:
    """The evaluations written to the event files that match ``pattern``: one {tag: value} per step."""
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    results = []
    for path in sorted(glob.glob(pattern)):
        by_step: dict[int, dict] = {}
        for event in LegacyEventFileLoader(path).Load():
            for value in event.summary.value:
                if value.HasField("simple_value"):
                    by_step.setdefault(event.step, {})[value.tag] = value.simple_value
        results.extend(by_step[step] for step in sorted(by_step))
    return results


class BestExporter(Exporter):
    def __init__(self, name: str = "best_exporter", serving_input_receiver_fn: Callable | None = None,
                 event_file_pattern: str | None = "eval/*.tfevents.*", compare_fn: Callable = loss_smaller,
                 assets_extra=None, as_text: bool = False, exports_to_keep: int | None = 5):
        if serving_input_receiver_fn is None:
            raise ValueError("BestExporter: serving_input_receiver_fn must be given")
        if not callable(compare_fn):
            raise ValueError("`compare_fn` must not be None.")
        params = inspect.signature(compare_fn).parameters
        for needed in ("best_eval_result", "current_eval_result"):
            if needed not in params:
                raise ValueError(f"compare_fn ({compare_fn}) must include {needed} argument.")
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError(f"`exports_to_keep`, if provided, must be a positive number. Got {exports_to_keep}")
        self.name = name
        self.serving_input_receiver_fn = serving_input_receiver_fn
        self.event_file_pattern = event_file_pattern
        self.compare_fn = compare_fn
        self.exports_to_keep = exports_to_keep
        self.best_eval_result: dict | None = None
        self._model_dir: str | None = None

    def _load_best(self, model_dir: str) -> None:
        """The best of the evaluations in ``model_dir``'s event files, once per model_dir."""
        if self._model_dir == model_dir or not self.event_file_pattern:
            return
        self._model_dir = model_dir
        for result in _event_results(os.path.join(model_dir, self.event_file_pattern)):
            if "loss" in result and (self.best_eval_result is None
                                     or self.compare_fn(best_eval_result=self.best_eval_result,
                                                        current_eval_result=result)):
                self.best_eval_result = result

    def export(self, estimator, export_path: str, checkpoint_path: str | None, eval_result: dict,
               is_the_final_export: bool):
        self._load_best(estimator.model_dir)
        if self.best_eval_result is not None and not self.compare_fn(best_eval_result=self.best_eval_result,
                                                                     current_eval_result=eval_result):
            return None
        self.best_eval_result = dict(eval_result)
        path = estimator.export_saved_model(export_path, self.serving_input_receiver_fn,
                                            checkpoint_path=checkpoint_path)
        if self.exports_to_keep:
            versions = sorted((d for d in os.listdir(export_path) if d.isdigit()), key=int)
            for old in versions[:-self.exports_to_keep]:
                shutil.rmtree(os.path.join(export_path, old))
        return path
