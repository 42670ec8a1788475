"""The plain Python-iterable input path: batches of NumPy arrays to feed with ``feed_dict``.

For pipelines that should run concurrently with training, use queues and QueueRunner
(trainer/queues.py); a QueueRunner can also be driven from one of these iterators.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

__all__ = ["batches"]


def batches(arrays: Sequence[np.ndarray], batch_size: int, *, shuffle: bool = True, seed: int | None = None,
            epochs: int | None = 1, drop_remainder: bool = False) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield aligned mini-batches of ``arrays`` (all with the same first dimension), epoch after epoch.

    >>> xs, ys = np.arange(10).reshape(5, 2), np.arange(5)
    >>> [b[1].tolist() for b in batches([xs, ys], 2, shuffle=False)]
    [[0, 1], [2, 3], [4]]
    """
    n = len(arrays[0])
    for a in arrays:
        if len(a) != n:
            raise ValueError(f"arrays must share their first dimension: {[len(x) for x in arrays]}")
    rng = np.random.default_rng(seed)
    epoch = 0
    while epochs is None or epoch < epochs:
        order = rng.permutation(n) if shuffle else np.arange(n)
        stop = n - (n % batch_size) if drop_remainder else n
        for i in range(0, stop, batch_size):
            idx = order[i:i + batch_size]
            yield tuple(a[idx] for a in arrays)
        epoch += 1
