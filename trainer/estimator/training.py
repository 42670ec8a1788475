"""``train_and_evaluate`` with ``TrainSpec``/``EvalSpec``, in one process.

TensorFlow's local mode alternates training and evaluation at checkpoints no closer than
``throttle_secs``; here training runs to ``TrainSpec.max_steps`` (or the input's end), then
evaluation runs once and the exporters export the result, which is what that schedule amounts to
whenever training takes less than ``throttle_secs`` (600 s by default).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

__all__ = ["EvalSpec", "TrainSpec", "train_and_evaluate"]


@dataclass(frozen=True)
class TrainSpec:
    input_fn: Callable
    max_steps: int | None = None
    hooks: tuple = ()


@dataclass(frozen=True)
class EvalSpec:
    input_fn: Callable
    steps: int | None = 100
    name: str | None = None
    hooks: tuple = ()
    exporters: tuple = field(default=())
    start_delay_secs: int = 120
    throttle_secs: int = 600


def train_and_evaluate(estimator, train_spec: TrainSpec, eval_spec: EvalSpec):
    """Train, evaluate, export; returns ``(eval_result, export_results)``."""
    if not isinstance(train_spec, TrainSpec) or not isinstance(eval_spec, EvalSpec):
        raise TypeError("train_and_evaluate takes a TrainSpec and an EvalSpec")
    estimator.train(train_spec.input_fn, hooks=list(train_spec.hooks), max_steps=train_spec.max_steps)
    result = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=list(eval_spec.hooks),
                                name=eval_spec.name)
    checkpoint = estimator.latest_checkpoint()
    exports = []
    for exporter in eval_spec.exporters:
        path = os.path.join(estimator.model_dir, "export", exporter.name)
        exports.append(exporter.export(estimator, path, checkpoint, result, True))
    return result, exports
