"""``tf.data`` as TensorFlow 1.x spells it: datasets, iterators over them, and their errors.

    ds = trainer.data.Dataset.from_tensor_slices((xs, ys)).shuffle(1000).batch(32).repeat()
    images, labels = ds.make_one_shot_iterator().get_next()   # graph tensors, a new batch per step
"""

from trainer.data import experimental
from trainer.data.dataset import AUTOTUNE, Dataset, TensorSpec
from trainer.data.files import FixedLengthRecordDataset, TFRecordDataset, TextLineDataset
from trainer.data.iterator import Iterator, make_initializable_iterator, make_one_shot_iterator
from trainer.data.structure import DataStructureError
from trainer.kernels import data as _iterator_kernels  # noqa: F401  (registers the iterator ops' kernels)

__all__ = [
    "AUTOTUNE", "DataStructureError", "Dataset", "FixedLengthRecordDataset", "Iterator", "TFRecordDataset",
    "TensorSpec", "TextLineDataset", "experimental", "get_output_classes",
    "get_output_shapes", "get_output_types", "make_initializable_iterator", "make_one_shot_iterator",
]


def get_output_types(dataset_or_iterator):
    """``tf.compat.v1.data.get_output_types``: the element's dtypes, in its structure."""
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    return dataset_or_iterator.output_classes
