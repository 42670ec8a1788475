"""``tf.metrics``' ranking metrics at k: ``precision_at_k``, ``recall_at_k``, their ``*_at_top_k``
forms (given the top-k class ids instead of scores) and ``average_precision_at_k``.

As TensorFlow's, they compare each row's top-k predicted classes with its set of labels (an int64
[D1, ..., DN, num_labels] tensor, [D1, ..., DN] for one label each, or a SparseTensor of them):
precision is true positives over the k predictions, recall true positives over the labels (a label
outside the classes always counts as missed). With ``class_id`` only that class counts: precision
over the rows that predict it, recall over the rows labelled with it. Totals are float64 local
variables; a ratio with nothing to count is NaN, as in TensorFlow. ``weights`` weigh the rows.
Average precision at k sums precision@i over the ranks i whose prediction is a label, divided by
min(k, number of labels); negative labels are ignored there.
"""

from __future__ import annotations

import numpy as np

from trainer.array_ops import cumsum, expand_dims, greater_equal, logical_and, logical_not, reduce_any, reduce_sum
from trainer.graph import Tensor, control_dependencies, name_scope
from trainer.metrics import collected, metric_variable
from trainer.nn import top_k
from trainer.ops import cast, constant, convert_to_tensor, equal, gather, greater, maximum, minimum, reshape, where
from trainer.sparse_tensor import SparseTensor, sparse_tensor_to_dense

__all__ = ["average_precision_at_k", "precision_at_k", "precision_at_top_k", "recall_at_k", "recall_at_top_k",
           "sparse_average_precision_at_k", "sparse_precision_at_k"]

F64 = np.float64


def _labels(labels, prediction_rank: int | None, ignore_negative: bool) -> tuple[Tensor, Tensor]:
    """Labels as int64 [rows, num_labels] and which of them are labels (a SparseTensor's entries;
    for a dense tensor all of them, or the non-negative ones)."""
    if isinstance(labels, SparseTensor):
        dense = sparse_tensor_to_dense(SparseTensor(labels.indices, cast(labels.values, np.int64), labels.dense_shape),
                                       default_value=-1)
        present = greater_equal(dense, np.int64(0))
    else:
        dense = cast(convert_to_tensor(labels), np.int64)
        if prediction_rank is not None and dense.shape is not None and len(dense.shape) == prediction_rank - 1:
            dense = expand_dims(dense, -1)
        present = greater_equal(dense, np.int64(0)) if ignore_negative else equal(dense, dense)
    last = dense.shape[-1] if dense.shape is not None else None
    if last is None:
        raise ValueError(f"metrics at k: the labels' last dimension must be known, got shape {dense.shape}")
    return reshape(dense, (-1, last)), reshape(present, (-1, last))


def _top_k_ids(predictions_idx, k: int | None) -> tuple[Tensor, int]:
    """The first ``k`` (all when None) predicted ids of each row, int64 [rows, k], and the input's rank."""
    ids = cast(convert_to_tensor(predictions_idx), np.int64)
    if ids.shape is None or ids.shape[-1] is None:
        raise ValueError(f"metrics at k: predictions_idx needs a known last dimension, got shape {ids.shape}")
    rows = reshape(ids, (-1, ids.shape[-1]))
    if k is not None:
        if k < 1 or k > ids.shape[-1]:
            raise ValueError(f"metrics at k: k must be in [1, {ids.shape[-1]}], given {k}")
        rows = gather(rows, np.arange(int(k), dtype=np.int64), axis=1)
    return rows, len(ids.shape)


def _scores_top_k(predictions, k: int) -> tuple[Tensor, int]:
    scores = convert_to_tensor(predictions)
    if scores.shape is None or len(scores.shape) < 2:
        raise ValueError(f"metrics at k: predictions must be [D1, ..., DN, num_classes], got shape {scores.shape}")
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"metrics at k: k must be a positive integer, given {k!r}")
    return top_k(scores, int(k))[1], len(scores.shape)


def _row_weights(weights, rows_like: Tensor) -> Tensor:
    """One float64 weight per row: the weights broadcast over the rows."""
    ones = cast(reduce_any(equal(rows_like, rows_like), axis=1), F64)
    return ones if weights is None else ones * reshape(cast(convert_to_tensor(weights), F64), (-1,))


class _Matches:
    """A batch's top-k ids against its label sets."""

    def __init__(self, ids: Tensor, labels: Tensor, present: Tensor):
        self.ids, self.labels, self.present = ids, labels, present
        pairs = equal(expand_dims(ids, 2), expand_dims(labels, 1))  # [rows, k, num_labels]
        self.predicted_is_label = reduce_any(logical_and(pairs, expand_dims(present, 1)), axis=2)  # [rows, k]
        self.label_is_predicted = reduce_any(pairs, axis=1)  # [rows, num_labels]

    def distinct_labels(self) -> Tensor:
        """[rows, num_labels]: a label, and the first of its value in the row."""
        n = self.labels.shape[-1]
        earlier = constant(np.tril(np.ones((n, n), bool), -1))  # [j, j']: j' before j
        same = logical_and(equal(expand_dims(self.labels, 2), expand_dims(self.labels, 1)), expand_dims(self.present, 1))
        return logical_and(self.present, logical_not(reduce_any(logical_and(same, earlier), axis=2)))

    def counts(self, class_id: int | None) -> dict[str, Tensor]:
        """Per-row float64 true positives, false positives and false negatives."""
        if class_id is None:
            hits = cast(self.predicted_is_label, F64)
            return {"tp": reduce_sum(hits, axis=1), "fp": reduce_sum(1.0 - hits, axis=1),
                    "fn": reduce_sum(cast(logical_and(self.distinct_labels(), logical_not(self.label_is_predicted)),
                                          F64), axis=1)}
        target = np.int64(class_id)
        predicted = reduce_any(equal(self.ids, target), axis=1)
        labelled = reduce_any(logical_and(equal(self.labels, target), self.present), axis=1)
        return {"tp": cast(logical_and(predicted, labelled), F64),
                "fp": cast(logical_and(predicted, logical_not(labelled)), F64),
                "fn": cast(logical_and(labelled, logical_not(predicted)), F64)}


def _streaming_rate(matches: _Matches, miss: str, class_id, weights, scope: str, metrics_collections,
                    updates_collections):
    """tp / (tp + miss) over every batch, from float64 running totals."""
    counts = matches.counts(class_id)
    w = _row_weights(weights, matches.ids)
    with name_scope(scope):
        tp = metric_variable((), "true_positive", F64)
        missed = metric_variable((), "false_positive" if miss == "fp" else "false_negative", F64)
        updates = [tp.assign_add(reduce_sum(counts["tp"] * w)), missed.assign_add(reduce_sum(counts[miss] * w))]
        value = _nan_ratio(tp.value(), tp.value() + missed.value())
        with control_dependencies(updates):
            update = _nan_ratio(tp.value() * 1.0, tp.value() + missed.value())
    return collected(value, update, metrics_collections, updates_collections)


def _nan_ratio(num: Tensor, den: Tensor) -> Tensor:
    """num / den, NaN where den is 0 (TensorFlow's plain division, without a floating-point warning)."""
    positive = greater(den, np.float64(0))
    return where(positive, num / where(positive, den, den * 0 + 1), den * 0 + np.float64(np.nan))


def _scope(name, kind: str, k: int | None, class_id) -> str:
    return name or f"{kind}_at_{k if k is not None else 'top_k'}" + ("" if class_id is None else f"_class{class_id}")


def precision_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):
    """Precision of the given top-k class ids (``predictions_idx``, [D1, ..., DN, k])."""
    ids, rank = _top_k_ids(predictions_idx, k)
    lab, present = _labels(labels, rank, False)
    return _streaming_rate(_Matches(ids, lab, present), "fp", class_id, weights,
                           _scope(name, "precision", k, class_id), metrics_collections, updates_collections)


def recall_at_top_k(labels, predictions_idx, k=None, class_id=None, weights=None, metrics_collections=None,
                    updates_collections=None, name=None):
    """Recall of the given top-k class ids (``predictions_idx``, [D1, ..., DN, k])."""
    ids, rank = _top_k_ids(predictions_idx, k)
    lab, present = _labels(labels, rank, False)
    return _streaming_rate(_Matches(ids, lab, present), "fn", class_id, weights, _scope(name, "recall", k, class_id),
                           metrics_collections, updates_collections)


def precision_at_k(labels, predictions, k: int, class_id=None, weights=None, metrics_collections=None,
                   updates_collections=None, name=None):
    """Precision of the k highest-scoring classes of ``predictions`` ([D1, ..., DN, num_classes])."""
    ids, rank = _scores_top_k(predictions, k)
    lab, present = _labels(labels, rank, False)
    return _streaming_rate(_Matches(_top_k_ids(ids, None)[0], lab, present), "fp", class_id, weights,
                           _scope(name, "precision", k, class_id), metrics_collections, updates_collections)


def recall_at_k(labels, predictions, k: int, class_id=None, weights=None, metrics_collections=None,
                updates_collections=None, name=None):
    """Recall of the k highest-scoring classes of ``predictions`` ([D1, ..., DN, num_classes])."""
    ids, rank = _scores_top_k(predictions, k)
    lab, present = _labels(labels, rank, False)
    return _streaming_rate(_Matches(_top_k_ids(ids, None)[0], lab, present), "fn", class_id, weights,
                           _scope(name, "recall", k, class_id), metrics_collections, updates_collections)


def average_precision_at_k(labels, predictions, k: int, weights=None, metrics_collections=None,
                           updates_collections=None, name=None):
    """The mean over rows of average precision at k (see the module docstring)."""
    ids, rank = _scores_top_k(predictions, k)
    lab, present = _labels(labels, rank, True)
    matches = _Matches(_top_k_ids(ids, None)[0], lab, present)
    relevant = cast(matches.predicted_is_label, F64)  # [rows, k]
    precision_at_i = cumsum(relevant, axis=1) / constant(np.arange(1, int(k) + 1, dtype=F64))
    num_relevant = minimum(reduce_sum(cast(matches.distinct_labels(), F64), axis=1), np.float64(k))
    per_row = _nan_ratio(reduce_sum(relevant * precision_at_i, axis=1), num_relevant)
    w = _row_weights(weights, matches.ids)
    with name_scope(name or f"average_precision_at_{k}"):
        total, count = metric_variable((), "total", F64), metric_variable((), "max", F64)
        updates = [total.assign_add(reduce_sum(per_row * w)), count.assign_add(reduce_sum(w))]
        value = total.value() / maximum(count.value(), np.float64(1e-300))
        with control_dependencies(updates):
            update = total.value() / maximum(count.value() * 1.0, np.float64(1e-300))
    return collected(value, update, metrics_collections, updates_collections)


# TF 1.15's deprecated names for the same metrics.
sparse_precision_at_k = precision_at_k
sparse_average_precision_at_k = average_precision_at_k
