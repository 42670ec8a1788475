"""``tf.data.experimental``: the names TF 1.x scripts reach for there. The transformations are
functions of a dataset, for ``dataset.apply(...)``; most are the Dataset methods they became."""

from __future__ import annotations

import numpy as np

from trainer.data.csv_batches import make_csv_dataset
from trainer.data.csv_dataset import CsvDataset
from trainer.data.dataset import AUTOTUNE, INFINITE_CARDINALITY, UNKNOWN_CARDINALITY, Dataset
from trainer.data.example_batches import make_batched_features_dataset, parse_example_dataset
from trainer.data.filtering import ignore_errors, take_while, unique
from trainer.data.grouping import Reducer, bucket_by_sequence_length, group_by_reducer, group_by_window
from trainer.data.inspection import cardinality, get_single_element
from trainer.data.iterator import make_initializable_iterator, make_one_shot_iterator
from trainer.data.resampling import rejection_resample
from trainer.data.scan import scan
from trainer.data.selection import ChooseDataset, SampleDataset

__all__ = [
    "AUTOTUNE", "Counter", "CsvDataset", "INFINITE_CARDINALITY", "Reducer", "UNKNOWN_CARDINALITY",
    "bucket_by_sequence_length", "cardinality", "choose_from_datasets", "enumerate_dataset", "get_single_element",
    "group_by_reducer", "group_by_window", "ignore_errors", "make_batched_features_dataset", "make_csv_dataset",
    "make_initializable_iterator", "make_one_shot_iterator", "map_and_batch", "parallel_interleave",
    "parse_example_dataset", "rejection_resample", "sample_from_datasets", "scan",
    "shuffle_and_repeat", "take_while", "unbatch", "unique",
]


def map_and_batch(map_func, batch_size, num_parallel_batches=None, drop_remainder: bool = False,
                  num_parallel_calls=None):
    """``map`` then ``batch``, fused in TensorFlow for speed; the elements are the same."""
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError("map_and_batch: give num_parallel_batches or num_parallel_calls, not both")
    calls = num_parallel_calls if num_parallel_calls is not None else num_parallel_batches
    return lambda dataset: dataset.map(map_func, num_parallel_calls=calls).batch(batch_size, drop_remainder)


def parallel_interleave(map_func, cycle_length, block_length=1, sloppy: bool = False, buffer_output_elements=None,
                        prefetch_input_elements=None):
    """``interleave`` of ``cycle_length`` inputs at a time; the order is the deterministic one, which
    ``sloppy=True`` allows as well."""
    return lambda dataset: dataset.interleave(map_func, cycle_length=cycle_length, block_length=block_length)


def shuffle_and_repeat(buffer_size, count=None, seed=None):
    """``shuffle`` (reshuffled every epoch) then ``repeat``."""
    return lambda dataset: dataset.shuffle(buffer_size, seed=seed, reshuffle_each_iteration=True).repeat(count)


def unbatch():
    return lambda dataset: dataset.unbatch()


def enumerate_dataset(start=0):
    """Each element as ``(index, element)``, indices from ``start``."""
    return lambda dataset: dataset.enumerate(start)


def Counter(start=0, step=1, dtype=np.int64) -> Dataset:  # noqa: N802 - TensorFlow's name
    """start, start + step, ... without end."""
    if step == 0:
        raise ValueError("Counter: step must not be 0")
    stop = np.iinfo(np.int64).max if step > 0 else np.iinfo(np.int64).min
    counts = Dataset.range(start, stop, step)
    return counts if np.dtype(dtype) == np.int64 else counts.map(lambda x: _cast(x, dtype))


def _cast(x, dtype):
    from trainer.ops import cast

    return cast(x, dtype)


def sample_from_datasets(datasets, weights=None, seed=None) -> Dataset:
    """Each element from one of ``datasets``, drawn with probabilities ``weights`` (uniform by default)."""
    return SampleDataset(datasets, weights, seed)


def choose_from_datasets(datasets, choice_dataset) -> Dataset:
    """Each element from ``datasets[i]`` for each ``i`` that ``choice_dataset`` gives."""
    return ChooseDataset(datasets, choice_dataset)
