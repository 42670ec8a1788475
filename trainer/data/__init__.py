"""``tf.data`` as TensorFlow 1.x spells it: datasets, iterators over them, and their errors.

    ds = trainer.data.Dataset.from_tensor_slices((xs, ys)).shuffle(1000).batch(32).repeat()
    images, labels = ds.make_one_shot_iterator().get_next()   # graph tensors, a new batch per step
"""

from trainer.data import experimental
from trainer.data.dataset import AUTOTUNE, Dataset, TensorSpec
from trainer.data.iterator import Iterator, make_initializable_iterator, make_one_shot_iterator
from trainer.data.structure import DataStructureError

__all__ = [
    "AUTOTUNE", "DataStructureError", "Dataset", "Iterator", "TensorSpec", "experimental",
    "make_initializable_iterator", "make_one_shot_iterator",
]
