"""The state behind a gradient accumulator handle (schemas/ops/accumulators.py).

Thread-safe: workers apply gradients from their own steps while the chief waits in ``take``.
A gradient tagged with a step older than the accumulator's is dropped, so a slow worker's
late gradient never mixes into a later step; ``take`` needs only ``num_required`` gradients,
from whichever workers sent them first, so a dead worker holds nothing the others need.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from trainer.errors import DeadlineExceededError

__all__ = ["REDUCTIONS", "GradientAccumulator", "wait_all"]


REDUCTIONS = ("MEAN", "SUM")


class GradientAccumulator:
    """Sums gradients for one variable: a dense array, or (sparse) a sum per touched row, so a large
    embedding table's accumulator holds only the rows its gradients touched.

    ``reduction`` MEAN (TensorFlow's default) divides a dense sum by the number of gradients, and
    each sparse row by the number of gradients that touched it, as TensorFlow's sparse accumulator
    does: a row one replica of m looked up gets that replica's gradient, not a m-th of it.
    """

    def __init__(self, name: str, dtype, shape, sparse: bool, max_accumulated: int = -1, reduction: str = "MEAN"):
        if reduction not in REDUCTIONS:
            raise ValueError(f"accumulator {name!r}: reduction_type must be one of {REDUCTIONS}, got {reduction!r}")
        self.name = name
        self.reduction = reduction
        self.max_accumulated = max_accumulated
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)
        self.sparse = sparse
        self.step = 0
        self.count = 0
        self.dropped = 0  # stale gradients seen, for tests and logs
        self.total = None
        self.rows: dict[int, np.ndarray] = {}
        self.row_counts: dict[int, int] = {}  # sparse: how many gradients touched each row
        self.cv = threading.Condition()

    def _check(self, value, what: str):
        shape = value.shape if not self.sparse else value.shape[1:]
        want = self.shape if not self.sparse else self.shape[1:]
        if tuple(shape) != want or value.dtype != self.dtype:
            raise ValueError(f"accumulator {self.name!r}: {what} is {value.dtype.name}{tuple(value.shape)}, "
                             f"expected {self.dtype.name}{want if not self.sparse else ('rows',) + want}")

    def apply(self, local_step: int, value, indices=None) -> bool:
        """Add one gradient; False (and nothing added) when ``local_step`` is stale, or when the
        step already has ``max_accumulated`` gradients (a backup worker's, too late to count)."""
        self._check(value, "gradient")
        if indices is not None:
            idx = np.asarray(indices, np.int64).reshape(-1)
            if idx.size and (idx.min() < 0 or idx.max() >= self.shape[0]):
                raise ValueError(f"accumulator {self.name!r}: row index outside [0, {self.shape[0]})")
            rows = value.reshape((idx.size,) + self.shape[1:])
        with self.cv:
            if local_step < self.step or 0 < self.max_accumulated <= self.count:
                self.dropped += 1
                return False
            if indices is None:
                self.total = value.astype(self.dtype, copy=True) if self.total is None else self.total + value
            else:
                for i, row in zip(idx.tolist(), rows):
                    have = self.rows.get(i)
                    self.rows[i] = row.copy() if have is None else have + row
                for i in set(idx.tolist()):  # a row repeated within one gradient is one gradient's
                    self.row_counts[i] = self.row_counts.get(i, 0) + 1
            self.count += 1
            self.cv.notify_all()
            return True

    def take(self, num_required: int, timeout: float | None):
        """The mean (or sum) of ``num_required`` gradients; resets and moves the step on.
        Sparse: (sorted touched indices, their rows, each the mean of the gradients touching it)."""
        if num_required < 1:
            raise ValueError(f"accumulator {self.name!r}: num_required must be >= 1, got {num_required}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cv:
            while self.count < num_required:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise DeadlineExceededError(
                        f"accumulator {self.name!r}: {self.count} of {num_required} gradients for step "
                        f"{self.step} within {timeout:g}s")
                self.cv.wait(0.1 if left is None else min(0.1, left))
            count, total, rows, row_counts = self.count, self.total, self.rows, self.row_counts
            self.total, self.count, self.rows, self.row_counts = None, 0, {}, {}
            self.step += 1
        mean = self.reduction == "MEAN"
        if not self.sparse:
            return total / self.dtype.type(count) if mean else total
        idx = np.asarray(sorted(rows), np.int64)
        values = np.stack([rows[i] for i in idx.tolist()]) if idx.size else np.zeros((0,) + self.shape[1:], self.dtype)
        if mean and idx.size:
            counts = np.asarray([row_counts[i] for i in idx.tolist()], self.dtype)
            values = values / counts.reshape((-1,) + (1,) * (values.ndim - 1))
        return idx, values

    def set_step(self, step: int) -> None:
        with self.cv:
            if step > self.step:
                self.step = step

    def num_accumulated(self) -> int:
        with self.cv:
            return self.count


def wait_all(accumulators: list[GradientAccumulator], num_required: int, timeout: float | None) -> None:
    """Return once every accumulator holds ``num_required`` gradients; DeadlineExceededError past
    ``timeout`` naming the ones short. Nothing is taken, so a timeout leaves every one as it was."""
    deadline = None if timeout is None else time.monotonic() + timeout
    for acc in accumulators:
        with acc.cv:
            while acc.count < num_required:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    short = [f"{a.name} ({a.count})" for a in accumulators if a.count < num_required]
                    raise DeadlineExceededError(f"{num_required} gradients per variable not in within {timeout:g}s; "
                                                f"short: {', '.join(short)}")
                acc.cv.wait(0.1 if left is None else min(0.1, left))
