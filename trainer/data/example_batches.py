"""``tf.data.experimental.parse_example_dataset`` and ``make_batched_features_dataset``: batches of
serialized ``tf.train.Example`` records parsed to feature dicts by ``tf.parse_example``.

Datasets hold dense tensors only, so a ``VarLenFeature`` (a SparseTensor) is refused by name.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainer.data.dataset import AUTOTUNE, Dataset
from trainer.data.files import TFRecordDataset
from trainer.data.readers import matching_files, shuffle_and_repeat_epochs
from trainer.data.structure import DataStructureError, flatten

__all__ = ["make_batched_features_dataset", "parse_example_dataset"]


def _dense_features(features: dict, what: str) -> dict:
    from trainer.parsing import FixedLenFeature, FixedLenSequenceFeature

    if not isinstance(features, dict) or not features:
        raise ValueError(f"{what}: features must be a non-empty dict of feature name to feature spec")
    for key, spec in features.items():
        if not isinstance(spec, (FixedLenFeature, FixedLenSequenceFeature)):
            raise TypeError(f"{what}: feature {key!r} is a {type(spec).__name__}; flowstack's datasets hold dense "
                            "tensors, so only FixedLenFeature and FixedLenSequenceFeature are supported here")
    return features


def parse_example_dataset(features: dict, num_parallel_calls: int = 1) -> Callable[[Dataset], Dataset]:
    """Each element, a vector of serialized Examples, parsed to ``{key: [batch, *shape] tensor}``."""
    from trainer.parsing import parse_example

    _dense_features(features, "parse_example_dataset")

    def apply(dataset: Dataset) -> Dataset:
        specs = flatten(dataset.element_spec)
        if len(specs) != 1 or specs[0].dtype != np.dtype(object) or specs[0].shape not in (None,) and \
                len(specs[0].shape) != 1:
            raise DataStructureError(f"parse_example_dataset: the input must be a dataset of string vectors "
                                     f"(batches of serialized Examples), got {dataset.output_types} of shape "
                                     f"{dataset.output_shapes}")
        return dataset.map(lambda serialized: parse_example(serialized, features),
                           num_parallel_calls=num_parallel_calls)

    return apply


def make_batched_features_dataset(file_pattern, batch_size: int, features: dict, reader=TFRecordDataset,
                                  label_key: str | None = None, reader_args=None, num_epochs: int | None = None,
                                  shuffle: bool = True, shuffle_buffer_size: int = 10000,
                                  shuffle_seed: int | None = None, prefetch_buffer_size=AUTOTUNE,
                                  reader_num_threads: int = 1, parser_num_threads: int = 2,
                                  sloppy_ordering: bool = False, drop_final_batch: bool = False) -> Dataset:
    """Batches of ``features`` dicts (or ``(features, label)`` with ``label_key``) parsed from the
    Example records of the files matching ``file_pattern``, read by ``reader(filename, *reader_args)``.
    ``num_epochs=None`` repeats forever and, as in TensorFlow, keeps every batch full."""
    _dense_features(features, "make_batched_features_dataset")
    if label_key is not None and label_key not in features:
        raise ValueError(f"make_batched_features_dataset: label_key {label_key!r} must be one of the features keys "
                         f"{sorted(features)}")
    paths = matching_files(file_pattern, "make_batched_features_dataset")
    files = Dataset.from_tensor_slices(np.asarray(paths, dtype=object))
    if shuffle:
        files = files.shuffle(len(paths), seed=shuffle_seed)
    args = list(reader_args or [])
    records = files.interleave(lambda filename: reader(filename, *args), cycle_length=reader_num_threads)
    if isinstance(records.output_types, tuple) and len(records.output_types) == 2:
        records = records.map(lambda key, value: value)  # a (key, value) reader: the values are the records
    records = shuffle_and_repeat_epochs(records, num_epochs, shuffle, shuffle_buffer_size, shuffle_seed)
    batches = records.batch(batch_size, drop_remainder=drop_final_batch or num_epochs is None)
    parsed = batches.apply(parse_example_dataset(features, num_parallel_calls=parser_num_threads))
    if label_key is not None:
        def split_label(example: dict):
            example = dict(example)
            label = example.pop(label_key)
            return example, label

        parsed = parsed.map(split_label)
    return parsed.prefetch(prefetch_buffer_size)
