"""``tf.keras.utils``' enqueuers: batches of a ``Sequence`` (in order, optionally shuffled per epoch) or of a
generator, produced in the caller's thread (``workers`` and multiprocessing are accepted and unused: the
trainer's sessions already run concurrently with Python)."""

from __future__ import annotations

import numpy as np

__all__ = ["GeneratorEnqueuer", "OrderedEnqueuer", "SequenceEnqueuer"]


class SequenceEnqueuer:
    def __init__(self, sequence, use_multiprocessing: bool = False):
        self.sequence, self.use_multiprocessing = sequence, use_multiprocessing
        self.running = False

    def start(self, workers: int = 1, max_queue_size: int = 10) -> None:
        self.running = True

    def is_running(self) -> bool:
        return self.running

    def stop(self, timeout=None) -> None:
        self.running = False

    def get(self):
        raise NotImplementedError


class OrderedEnqueuer(SequenceEnqueuer):
    """Yields ``sequence[i]`` for every batch index, epoch after epoch (shuffled per epoch if asked)."""

    def __init__(self, sequence, use_multiprocessing: bool = False, shuffle: bool = False):
        super().__init__(sequence, use_multiprocessing)
        self.shuffle = shuffle

    def get(self):
        while self.running:
            order = np.random.permutation(len(self.sequence)) if self.shuffle else range(len(self.sequence))
            for i in order:
                if not self.running:
                    return
                yield self.sequence[int(i)]
            self.sequence.on_epoch_end()


class GeneratorEnqueuer(SequenceEnqueuer):
    """Yields what ``generator`` yields until it ends or ``stop`` is called."""

    def __init__(self, generator, use_multiprocessing: bool = False, wait_time=None, seed=None):
        super().__init__(generator, use_multiprocessing)

    def get(self):
        for item in self.sequence:
            if not self.running:
                return
            yield item
