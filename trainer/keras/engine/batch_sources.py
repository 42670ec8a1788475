"""Where ``fit``/``evaluate``/``predict`` get their batches: NumPy arrays (sliced, shuffled per epoch),
a ``tf.data.Dataset`` (pulled through an iterator in the Keras session), a ``keras.utils.Sequence``,
or a Python generator. Each yields ``(x_list, y_list, sample_weight_list)`` NumPy batches; ``y_list``
is None when the source has no targets, ``sample_weight_list`` when it has no sample weights."""

from __future__ import annotations

import numpy as np

import trainer as tf
from trainer.keras import backend as K
from trainer.keras.engine.base_layer import to_list

__all__ = ["ArraySource", "DatasetSource", "GeneratorSource", "SequenceSource", "split_xy"]


def split_xy(element) -> tuple:
    """A batch element (``(x, y)``, ``(x, y, sample_weight)`` or ``x``) as (x_list, y_list, sample_weight_list)."""
    if isinstance(element, tuple) and len(element) in (2, 3):
        xs = to_list(element[0]) if not isinstance(element[0], dict) else [element[0]]
        weights = to_list(element[2]) if len(element) == 3 and element[2] is not None else None
        return xs, to_list(element[1]), weights
    return (to_list(element) if not isinstance(element, dict) else [element]), None, None


class ArraySource:
    def __init__(self, xs: list, ys: list | None, batch_size: int, shuffle=False, sample_weights: list | None = None):
        self.xs, self.ys, self.batch_size, self.shuffle = xs, ys, batch_size, shuffle
        self.sample_weights = sample_weights
        self.samples = len(xs[0]) if xs else 0

    def steps(self) -> int:
        return (self.samples + self.batch_size - 1) // self.batch_size

    def batches(self):
        index = np.arange(self.samples)
        if self.shuffle == "batch":  # shuffle whole batches, as Keras' shuffle="batch"
            starts = np.random.permutation(self.steps()) * self.batch_size
            index = np.concatenate([index[s:s + self.batch_size] for s in starts])
        elif self.shuffle:
            np.random.shuffle(index)
        for start in range(0, self.samples, self.batch_size):
            take = index[start:start + self.batch_size]
            yield ([x[take] for x in self.xs], None if self.ys is None else [y[take] for y in self.ys],
                   None if self.sample_weights is None else [w[take] for w in self.sample_weights])


class DatasetSource:
    """Batches of a Dataset. With ``steps`` set, one iterator runs across epochs (a repeated dataset),
    ``steps`` batches each; otherwise, or with ``restart`` (validation, evaluation), each pass
    re-initializes it and runs to its end or ``steps``."""

    def __init__(self, dataset, steps: int | None, restart: bool = False):
        self.steps_per_epoch, self.restart = steps, restart
        graph = tf.get_default_graph()
        with graph.as_default():
            self.iterator = dataset.make_initializable_iterator()
            self.next_element = self.iterator.get_next()
        self.initialized = False

    def steps(self):
        return self.steps_per_epoch

    def batches(self):
        session = K.get_session()
        if self.steps_per_epoch is None or self.restart or not self.initialized:
            session.run(self.iterator.initializer)
            self.initialized = True
        step = 0
        while self.steps_per_epoch is None or step < self.steps_per_epoch:
            try:
                element = session.run(self.next_element)
            except tf.errors.OutOfRangeError:
                if self.steps_per_epoch is not None and not self.restart:
                    raise ValueError(f"the dataset ran out after {step} of steps_per_epoch={self.steps_per_epoch} "
                                     "batches; repeat it (dataset.repeat()) or lower steps_per_epoch") from None
                return
            yield split_xy(element)
            step += 1


class SequenceSource:
    def __init__(self, sequence, shuffle: bool, steps: int | None = None):
        self.sequence, self.shuffle, self.steps_per_epoch = sequence, shuffle, steps

    def steps(self) -> int:
        return self.steps_per_epoch or len(self.sequence)

    def batches(self):
        order = np.random.permutation(len(self.sequence)) if self.shuffle else np.arange(len(self.sequence))
        for i in order[:self.steps()]:
            yield split_xy(self.sequence[int(i)])
        self.sequence.on_epoch_end()


class GeneratorSource:
    def __init__(self, generator, steps: int | None, what: str = "steps_per_epoch"):
        if steps is None:
            raise ValueError(f"`{what}` must be given when the data is a generator")
        self.generator, self.steps_per_epoch = generator, steps

    def steps(self) -> int:
        return self.steps_per_epoch

    def batches(self):
        for _ in range(self.steps_per_epoch):
            yield split_xy(next(self.generator))
