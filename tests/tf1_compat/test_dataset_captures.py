"""Dataset functions that read tensors of the graph the pipeline is built in, as TF 1.x pipelines do:
a vocabulary table looked up in ``map`` (the NMT tutorial's pipeline), a placeholder fed when the
iterator is initialized, a constant; and a function nested in ``flat_map`` reading its element."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.data.structure import DataStructureError


def values(iterator_init, element, feed=None, count=None) -> list:
    out = []
    with tf.Session() as sess:
        sess.run([tf.tables_initializer()] + ([iterator_init] if iterator_init is not None else []), feed)
        while count is None or len(out) < count:
            try:
                out.append(sess.run(element))
            except tf.errors.OutOfRangeError:
                break
    return out


def test_a_vocabulary_table_is_looked_up_inside_map(tmp_path) -> None:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<unk>\nthe\ncat\nsat\n")
    with tf.Graph().as_default():
        table = tf.contrib.lookup.index_table_from_file(str(vocab), default_value=0)
        lines = tf.data.Dataset.from_tensor_slices(tf.constant(["the cat sat", "a cat"]))
        ids = lines.map(lambda line: table.lookup(tf.string_split([line]).values))
        iterator = ids.make_initializable_iterator()
        got = values(iterator.initializer, iterator.get_next())
    assert [g.tolist() for g in got] == [[1, 2, 3], [0, 2]]


def test_a_placeholder_read_by_map_and_filter_is_fed_at_initialization() -> None:
    with tf.Graph().as_default():
        scale = tf.placeholder(tf.float32, [])
        ds = (tf.data.Dataset.range(5).map(lambda x: tf.cast(x, tf.float32) * scale, num_parallel_calls=2)
              .filter(lambda v: v > scale))
        iterator = ds.make_initializable_iterator()
        element = iterator.get_next()
        assert values(iterator.initializer, element, {scale: 2.0}) == [4.0, 6.0, 8.0]
        assert values(iterator.initializer, element, {scale: 3.0}) == [6.0, 9.0, 12.0]
        with pytest.raises(DataStructureError, match="make_initializable_iterator"):
            ds.make_one_shot_iterator()  # as in TensorFlow: a one-shot iterator takes no parameters


def test_nested_functions_read_their_callers_and_the_pipelines_tensors() -> None:
    with tf.Graph().as_default():
        offset = tf.constant(np.int64(100))
        ds = tf.data.Dataset.range(3).flat_map(
            lambda x: tf.data.Dataset.range(2).map(lambda i: x * 10 + i + offset))
        assert [int(v) for v in values(None, ds.make_one_shot_iterator().get_next())] == [
            100, 101, 110, 111, 120, 121]
        same = tf.data.Dataset.range(2).map(lambda _: offset)  # the caller's tensor returned as it is
        assert [int(v) for v in values(None, same.make_one_shot_iterator().get_next())] == [100, 100]
