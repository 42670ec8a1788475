"""The classification heads of the canned classifiers, as TensorFlow 1.15's estimator builds them.

``n_classes`` > 2: softmax over ``n_classes`` logits. ``n_classes`` == 2: one logit, a sigmoid
(``logistic``), and ``probabilities`` over both classes. Both predict ``logits``,
``probabilities``, ``class_ids`` ([batch, 1]), ``classes`` (the ``label_vocabulary`` entry, else the
class id as a string), ``all_class_ids`` and ``all_classes`` (every class, per row). With a
``label_vocabulary`` the labels are strings mapped to their positions in it; a label outside it
fails the run (InvalidArgumentError), as does an integer label outside ``[0, n_classes)``.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from trainer import losses, metrics, nn
from trainer.array_ops import expand_dims, range as range_, stack, tile
from trainer.debugging import assert_less, assert_non_negative
from trainer.graph import Tensor, control_dependencies
from trainer.lookup_ops import index_table_from_tensor, index_to_string_table_from_tensor
from trainer.ops import argmax, cast, concat, constant, convert_to_tensor, identity, reshape, shape, zeros_like
from trainer.string_ops import as_string

__all__ = ["ClassificationHead", "check_label_vocabulary"]


def check_label_vocabulary(estimator: str, label_vocabulary, n_classes: int) -> tuple[str, ...] | None:
    """The vocabulary as a tuple of strings (None stays None); ValueError as TF gives it otherwise."""
    if n_classes < 2:
        raise ValueError(f"{estimator}: n_classes must be at least 2, got {n_classes}")
    if label_vocabulary is None:
        return None
    if not isinstance(label_vocabulary, (list, tuple)):
        raise ValueError(f"label_vocabulary should be a list or a tuple. Given type: {type(label_vocabulary)}")
    if len(label_vocabulary) != n_classes:
        raise ValueError(f"{estimator}: label_vocabulary has {len(label_vocabulary)} entries, but n_classes is "
                         f"{n_classes}")
    if not all(isinstance(v, (str, bytes)) for v in label_vocabulary):
        raise ValueError(f"{estimator}: label_vocabulary must hold strings, got {list(label_vocabulary)!r}")
    return tuple(v.decode("utf-8") if isinstance(v, bytes) else v for v in label_vocabulary)


class ClassificationHead:
    """Predictions, loss and evaluation metrics over a classifier's logits."""

    def __init__(self, n_classes: int, label_vocabulary: Sequence[str] | None = None):
        self.n_classes = n_classes
        self.label_vocabulary = label_vocabulary

    @property
    def logits_dimension(self) -> int:
        return 1 if self.n_classes == 2 else self.n_classes

    def predictions(self, logits: Tensor) -> dict[str, Tensor]:
        if self.n_classes == 2:
            scores = concat([zeros_like(logits), logits], axis=-1, name="two_class_logits")
            extra = {"logistic": nn.sigmoid(logits, name="logistic")}
        else:
            scores, extra = logits, {}
        class_ids = expand_dims(argmax(scores, axis=-1), -1, name="class_ids")
        rows = stack([shape(logits)[0], 1])
        all_class_ids = tile(expand_dims(range_(self.n_classes), 0), rows, name="all_class_ids")
        if self.label_vocabulary is None:
            classes = as_string(class_ids, name="str_classes")
            class_names = as_string(range_(self.n_classes))
        else:
            vocabulary = constant(np.array(self.label_vocabulary, dtype=object))
            classes = index_to_string_table_from_tensor(vocabulary, name="class_string_lookup").lookup(class_ids)
            class_names = vocabulary
        return {"logits": logits, **extra, "probabilities": nn.softmax(scores, name="probabilities"),
                "class_ids": class_ids, "classes": classes, "all_class_ids": all_class_ids,
                "all_classes": tile(expand_dims(class_names, 0), rows, name="all_classes")}

    def label_ids(self, labels) -> Tensor:
        """The labels as int64 class ids [batch], checked to be classes when the step runs."""
        labels = convert_to_tensor(labels)
        if self.label_vocabulary is None:
            if labels.dtype is not None and labels.dtype.kind not in "iu":
                raise ValueError(f"Labels dtype should be integer. Instead got {labels.dtype}.")
            ids = cast(reshape(labels, (-1,)), np.int64)
            checks = [assert_non_negative(ids, message="Labels must >= 0"),
                      assert_less(ids, np.int64(self.n_classes), message="Labels must <= n_classes - 1")]
        else:
            if labels.dtype != np.dtype(object):
                raise ValueError(f"Labels dtype should be string if there is a vocabulary. Given: {labels.dtype}")
            table = index_table_from_tensor(constant(np.array(self.label_vocabulary, dtype=object)),
                                            name="class_id_lookup")
            ids = table.lookup(reshape(labels, (-1,)))
            checks = [assert_non_negative(ids, data=[labels], message=(
                f"Labels must be in label_vocabulary {list(self.label_vocabulary)}; got labels"))]
        with control_dependencies(checks):
            return identity(ids)

    def loss(self, ids: Tensor, logits: Tensor) -> Tensor:
        if self.n_classes == 2:
            return losses.sigmoid_cross_entropy(cast(reshape(ids, (-1, 1)), logits.dtype), logits)
        return losses.sparse_softmax_cross_entropy(ids, logits)

    def eval_metrics(self, ids: Tensor, predictions: dict, loss: Tensor) -> dict:
        class_ids = reshape(predictions["class_ids"], (-1,))
        found = {"accuracy": metrics.accuracy(ids, class_ids), "average_loss": metrics.mean(loss)}
        if self.n_classes == 2:
            positive = reshape(predictions["logistic"], (-1,))
            found.update(auc=metrics.auc(ids, positive), precision=metrics.precision(ids, class_ids),
                         recall=metrics.recall(ids, class_ids), **{
                             "label/mean": metrics.mean(cast(ids, np.float32)),
                             "prediction/mean": metrics.mean(positive)})
        return found

