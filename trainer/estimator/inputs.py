"""``tf.estimator.inputs``: input functions over in-memory arrays, built on tf.data."""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer.data.dataset import Dataset

__all__ = ["numpy_input_fn"]


def numpy_input_fn(x, y=None, batch_size: int = 128, num_epochs: int | None = 1, shuffle: bool | None = None,
                   queue_capacity: int = 1000, num_threads: int = 1) -> Callable:
    """An input_fn yielding ``(features, labels)`` batches of ``x`` (an array or dict of arrays) and ``y``.

    ``num_epochs=None`` repeats forever; ``shuffle`` must be given, as in TensorFlow. Each call
    of the input_fn builds a fresh pipeline in the current graph.
    """
    if shuffle is None:
        raise ValueError("numpy_input_fn: shuffle must be given explicitly (True for training, False to evaluate "
                         "or predict in order)")
    if not isinstance(shuffle, bool):
        raise TypeError(f"numpy_input_fn: shuffle must be a bool, got {type(shuffle).__name__}")
    features = {k: np.asarray(v) for k, v in x.items()} if isinstance(x, dict) else np.asarray(x)
    labels = None if y is None else ({k: np.asarray(v) for k, v in y.items()} if isinstance(y, dict) else np.asarray(y))
    lengths = {name: len(a) for name, a in _named(features, "x").items()}
    if labels is not None:
        lengths.update({name: len(a) for name, a in _named(labels, "y").items()})
    if len(set(lengths.values())) > 1:
        raise ValueError(f"numpy_input_fn: x and y need the same number of rows, got {lengths}")
    n = next(iter(lengths.values()))

    def input_fn():
        data = Dataset.from_tensor_slices(features if labels is None else (features, labels))
        if shuffle:
            data = data.shuffle(max(min(queue_capacity, n), 1))
        data = data.repeat(num_epochs).batch(batch_size)
        return data.make_one_shot_iterator().get_next()

    return input_fn


def _named(arrays, what: str) -> dict:
    return {f"{what}[{k!r}]": a for k, a in arrays.items()} if isinstance(arrays, dict) else {what: arrays}
