"""``tf.estimator.MultiHead``: several heads over one model, for multi-objective learning.

The logits are a dict keyed by head name, or one tensor whose last dimension is the heads'
logits side by side (in order); the labels are a dict keyed by head name. The loss is the sum of
the heads' losses, each times its ``head_weights`` entry; predictions are keyed ``(head name,
key)``; evaluation metrics are each head's under ``<key>/<head name>``, with each head's loss as
``loss/<head name>``; the export outputs are each head's under ``<head name>`` and
``<head name>/<output>``, the first head's being ``serving_default``, as TensorFlow's.
"""

from __future__ import annotations

from typing import Callable

from trainer import metrics
from trainer.array_ops import split
from trainer.estimator.export import PredictOutput
from trainer.estimator.head_v2 import Head, train_spec
from trainer.estimator.spec import EstimatorSpec, ModeKeys
from trainer.graph import Tensor
from trainer.ops import add_n, convert_to_tensor

__all__ = ["MultiHead"]


class MultiHead:
    def __init__(self, heads, head_weights=None):
        heads = list(heads or ())
        if not heads:
            raise ValueError(f"Must specify heads. Given: {heads}")
        if head_weights is not None and len(head_weights) != len(heads):
            raise ValueError(f"heads and head_weights must have the same size. Given len(heads): {len(heads)}. "
                             f"Given len(head_weights): {len(head_weights)}.")
        for head in heads:
            if not isinstance(head, Head):
                raise ValueError(f"MultiHead: each head must be a tf.estimator head, given {type(head).__name__}")
            if not head.name:
                raise ValueError(f"All given heads must have name specified. Given: {head}")
        names = [h.name for h in heads]
        if len(set(names)) != len(names):
            raise ValueError(f"MultiHead: head names must be unique, given {names}")
        self._heads = heads
        self._weights = [1.0] * len(heads) if head_weights is None else [float(w) for w in head_weights]

    @property
    def name(self) -> str:
        return "_".join(h.name for h in self._heads)

    @property
    def logits_dimension(self) -> int:
        return sum(h.logits_dimension for h in self._heads)

    def _split_logits(self, logits) -> dict[str, Tensor]:
        if isinstance(logits, dict):
            missing = [h.name for h in self._heads if h.name not in logits]
            if missing:
                raise ValueError(f"MultiHead: logits has no entry for the heads {missing}; given {sorted(logits)}")
            return {h.name: convert_to_tensor(logits[h.name]) for h in self._heads}
        parts = split(convert_to_tensor(logits), [h.logits_dimension for h in self._heads], axis=-1)
        return {h.name: p for h, p in zip(self._heads, parts)}

    def _labels(self, labels) -> dict:
        if not isinstance(labels, dict):
            raise ValueError(f"labels must be a dict. Given: {labels}")
        missing = [h.name for h in self._heads if h.name not in labels]
        if missing:
            raise ValueError(f"MultiHead: labels has no entry for the heads {missing}; given {sorted(labels)}")
        return labels

    def loss(self, labels, logits, features=None, mode=None, regularization_losses=None) -> Tensor:
        """The heads' losses, weighted and summed (plus the regularization losses)."""
        split_logits, labels = self._split_logits(logits), self._labels(labels)
        losses = [w * h.loss(labels[h.name], split_logits[h.name], features, mode)
                  for h, w in zip(self._heads, self._weights)]
        total = add_n(losses) if len(losses) > 1 else losses[0]
        return total if not regularization_losses else total + add_n(list(regularization_losses))

    def predictions(self, logits, keys=None) -> dict:
        split_logits = self._split_logits(logits)
        return {(h.name, k): v for h in self._heads for k, v in h.predictions(split_logits[h.name], keys).items()}

    def _export_outputs(self, split_logits: dict) -> dict:
        outputs, everything = {}, {}
        for i, head in enumerate(self._heads):
            predictions = head.predictions(split_logits[head.name])
            own = head.export_outputs(predictions)
            if i == 0:
                outputs["serving_default"] = own["serving_default"]
            outputs[head.name] = own["serving_default"]
            outputs.update({f"{head.name}/{k}": v for k, v in own.items() if k != "serving_default"})
            everything.update({f"{head.name}/{k}": v for k, v in predictions.items()})
        outputs["predict"] = PredictOutput(everything)
        return outputs

    def create_estimator_spec(self, features, mode, logits, labels=None, optimizer=None, trainable_variables=None,
                              train_op_fn: Callable | None = None, update_ops=None,
                              regularization_losses=None) -> EstimatorSpec:
        split_logits = self._split_logits(logits)
        predictions = self.predictions(split_logits)
        if mode == ModeKeys.PREDICT:
            return EstimatorSpec(mode, predictions=predictions, export_outputs=self._export_outputs(split_logits))
        labels = self._labels(labels)
        loss = self.loss(labels, split_logits, features, mode, regularization_losses)
        if mode == ModeKeys.EVAL:
            found = {}
            for head in self._heads:
                spec = head.create_estimator_spec(features, mode, split_logits[head.name], labels[head.name])
                found.update({f"{k}/{head.name}": v for k, v in spec.eval_metric_ops.items()})
                found[f"loss/{head.name}"] = metrics.mean(spec.loss)
            return EstimatorSpec(mode, predictions=predictions, loss=loss, eval_metric_ops=found)
        return train_spec(mode, predictions, loss, optimizer, train_op_fn, trainable_variables, update_ops)
