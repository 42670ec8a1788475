"""Triton's classification extension: a requested output with ``class_count`` N (HTTP
``"parameters": {"classification": N}``, gRPC ``parameters["classification"].int64_param``) is
answered as its top N classes, each the string ``"score:index:label"`` (``"score:index"`` where the
model has no labels), highest score first: shape [batch, N] for a batched model, [N] otherwise.
Labels are the model's ``labels`` metadata (one a line, as ``flowstack export --labels`` writes them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from serving.errors import InvalidRequest, shown

PARAMETER = "classification"


def class_count(output: str, parameters: dict[str, Any]) -> int | None:
    """The class count a requested output's parameters ask for, or None."""
    count = parameters.get(PARAMETER)
    if count is None:
        return None
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise InvalidRequest(f"output {shown(output)}: 'classification' must be a positive number of classes, got {shown(count)}")
    return count


def labels_of(metadata: dict[str, str]) -> list[str]:
    text = metadata.get("labels", "")
    return text.splitlines() if text else []


def top_classes(name: str, scores: np.ndarray, count: int, labels: list[str], batched: bool) -> np.ndarray:
    """The ``count`` best classes of each batch row of ``scores`` (of the whole tensor when not
    ``batched``), as Triton's "score:index[:label]" strings in an object array."""
    if scores.dtype.kind not in "biuf":
        raise InvalidRequest(f"output {name!r} is {scores.dtype} data, not scores: it cannot be classified")
    rows = scores.reshape(scores.shape[0], -1) if batched and scores.ndim else scores.reshape(1, -1)
    count = min(count, rows.shape[1])
    # A stable sort of the negated scores: ties keep the lower index first, as Triton's do.
    best = np.argsort(-rows.astype(np.float64), axis=1, kind="stable")[:, :count]
    whole = scores.dtype.kind != "f"  # integer scores are written as integers, as Triton writes them
    out = np.empty(best.shape, dtype=object)
    for r, indices in enumerate(best.tolist()):
        for k, index in enumerate(indices):
            value = rows[r, index]
            text = f"{int(value)}:{index}" if whole else f"{float(value):f}:{index}"
            out[r, k] = f"{text}:{labels[index]}" if index < len(labels) and labels[index] else text
    return out if batched and scores.ndim else out[0]
