"""tf.data.experimental's transformations and selections as TF 1.x input pipelines apply them, and
counts given as tensors (a nested dataset built from an element: from_tensors(x).repeat(n))."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.nest import StructureError

experimental = tf.data.experimental


@pytest.fixture(autouse=True)
def fresh_graph():
    tf.reset_default_graph()
    yield
    tf.reset_default_graph()


def _all(dataset, limit: int = 10_000) -> list:
    nxt = dataset.make_one_shot_iterator().get_next()
    out = []
    with tf.Session() as sess:
        try:
            while len(out) < limit:
                out.append(sess.run(nxt))
        except tf.errors.OutOfRangeError:
            pass
    return out


def _ints(dataset, limit: int = 10_000) -> list[int]:
    return [int(v) for v in _all(dataset, limit)]


def test_counts_given_as_tensors_inside_flat_map() -> None:
    repeated = tf.data.Dataset.range(4).flat_map(lambda i: tf.data.Dataset.from_tensors(i).repeat(i))
    assert _ints(repeated) == [1, 2, 2, 3, 3, 3]
    prefixes = tf.data.Dataset.range(1, 4).flat_map(lambda n: tf.data.Dataset.range(10).take(n))
    assert _ints(prefixes) == [0, 0, 1, 0, 1, 2]
    tails = tf.data.Dataset.range(7, 10).flat_map(lambda n: tf.data.Dataset.range(10).skip(n))
    assert _ints(tails) == [7, 8, 9, 8, 9, 9]


def test_map_and_batch_and_parallel_interleave_give_the_plain_results() -> None:
    fused = tf.data.Dataset.range(10).apply(experimental.map_and_batch(lambda x: x * 2, 4, num_parallel_calls=2))
    assert [b.tolist() for b in _all(fused)] == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18]]
    dropped = tf.data.Dataset.range(10).apply(experimental.map_and_batch(lambda x: x, 4, drop_remainder=True))
    assert len(_all(dropped)) == 2
    woven = tf.data.Dataset.range(3).apply(experimental.parallel_interleave(
        lambda i: tf.data.Dataset.from_tensors(i).repeat(2), cycle_length=2, sloppy=True))
    plain = tf.data.Dataset.range(3).interleave(lambda i: tf.data.Dataset.from_tensors(i).repeat(2), cycle_length=2)
    assert _ints(woven) == _ints(plain)


def test_shuffle_and_repeat_reshuffles_each_epoch_reproducibly() -> None:
    epochs = _ints(tf.data.Dataset.range(20).apply(experimental.shuffle_and_repeat(20, count=3, seed=7)))
    first, second, third = epochs[:20], epochs[20:40], epochs[40:]
    assert len(epochs) == 60 and sorted(first) == sorted(second) == sorted(third) == list(range(20))
    assert first != second  # a new order each epoch
    tf.reset_default_graph()
    assert _ints(tf.data.Dataset.range(20).apply(experimental.shuffle_and_repeat(20, count=3, seed=7))) == epochs


def test_unbatch_enumerate_and_counter() -> None:
    rows = tf.data.Dataset.from_tensors(np.arange(6).reshape(3, 2)).apply(experimental.unbatch())
    assert [r.tolist() for r in _all(rows)] == [[0, 1], [2, 3], [4, 5]]
    numbered = tf.data.Dataset.range(10, 13).apply(experimental.enumerate_dataset(start=5))
    assert [(int(i), int(v)) for i, v in _all(numbered)] == [(5, 10), (6, 11), (7, 12)]
    assert _ints(experimental.Counter(3, 2), limit=4) == [3, 5, 7, 9]
    assert _all(experimental.Counter(dtype=tf.int32), limit=1)[0].dtype == np.int32


def test_sample_from_datasets_follows_the_weights_until_all_run_out() -> None:
    evens = tf.data.Dataset.range(0, 2000, 2)
    odds = tf.data.Dataset.range(1, 2000, 2)
    drawn = _ints(experimental.sample_from_datasets([evens, odds], weights=[0.8, 0.2], seed=1), limit=500)
    share = sum(v % 2 == 0 for v in drawn) / len(drawn)
    assert 0.7 < share < 0.9  # 0.8 expected; seeded, and 500 draws keep it well inside
    both = _ints(experimental.sample_from_datasets([tf.data.Dataset.range(3), tf.data.Dataset.range(10, 15)], seed=2))
    assert sorted(both) == [0, 1, 2, 10, 11, 12, 13, 14]  # every element, once each input is exhausted
    assert [v for v in both if v < 10] == [0, 1, 2]  # each input keeps its order


def test_choose_from_datasets_follows_the_choices() -> None:
    letters = [tf.data.Dataset.from_tensor_slices(["a", "b"]), tf.data.Dataset.from_tensor_slices(["x", "y", "z"])]
    choices = tf.data.Dataset.from_tensor_slices(np.array([0, 1, 1, 0, 1, 0], np.int64))
    got = [v.decode() if isinstance(v, bytes) else str(v) for v in _all(experimental.choose_from_datasets(letters, choices))]
    assert got == ["a", "x", "y", "b", "z"]  # the last choice of an exhausted input is skipped


def test_selections_refuse_mismatched_inputs() -> None:
    with pytest.raises(StructureError, match="same structure and types"):
        experimental.sample_from_datasets([tf.data.Dataset.range(3), tf.data.Dataset.from_tensor_slices([1.0])])
    with pytest.raises(ValueError, match="weights must be 2 non-negative numbers"):
        experimental.sample_from_datasets([tf.data.Dataset.range(3)] * 2, weights=[1.0])
    with pytest.raises(StructureError, match="choice_dataset must give scalar int64 elements"):
        experimental.choose_from_datasets([tf.data.Dataset.range(3)], tf.data.Dataset.from_tensor_slices([0.0]))
