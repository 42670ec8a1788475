"""A TF1 text pipeline: lines from a file, split into tokens, looked up in a vocabulary file, and
embedded per line with embedding_lookup_sparse; plus the string functions it uses."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf


def test_lines_to_token_ids_to_line_embeddings(tmp_path):
    (tmp_path / "vocab.txt").write_text("the\ncat\ndog\nsat\n")
    (tmp_path / "lines.txt").write_text("the cat sat\na dog\n\nthe  dog\n")
    lines = tf.data.TextLineDataset(str(tmp_path / "lines.txt")).batch(4).make_one_shot_iterator().get_next()
    tokens = tf.string_split(lines)
    table = tf.contrib.lookup.index_table_from_file(str(tmp_path / "vocab.txt"), num_oov_buckets=1)
    ids = table.lookup(tokens)
    embeddings = tf.Variable(np.eye(5, dtype=np.float32))
    per_line = tf.nn.embedding_lookup_sparse(embeddings, ids, None, combiner="sum")
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), tf.tables_initializer()])
        got_ids, got = sess.run([ids, per_line])
    assert got_ids.indices.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [3, 0], [3, 1]]
    assert got_ids.values.tolist() == [0, 1, 3, 4, 2, 0, 2]  # "a" is out of vocabulary: bucket 4
    np.testing.assert_array_equal(got, [[1, 1, 0, 1, 0], [0, 0, 1, 0, 1], [0, 0, 0, 0, 0], [1, 0, 1, 0, 0]])


def test_split_spellings_numbers_joins_and_reverse_lookups():
    source = tf.constant(["a,b,,c", "d"])
    kept, all_tokens = tf.string_split(source, ","), tf.string_split(source, ",", skip_empty=False)
    by_sep = tf.strings.split(source, sep=",")
    numbers = tf.strings.to_number(tf.constant(["1.5", " 2", "-3"]), out_type=tf.float64)
    joined = tf.strings.join([tf.constant(["a", "b"]), tf.constant("x")], separator="-")
    names = tf.contrib.lookup.index_to_string_table_from_tensor(["zero", "one"]).lookup(tf.constant([1, 0, 9], tf.int64))
    hashed = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["x", "y"], [10, 20]), -1)
    with tf.Session() as sess:
        k, a, s, n, j, r, h = sess.run([kept, all_tokens, by_sep, numbers, joined, names,
                                        hashed.lookup(tf.constant(["y", "z"]))])
        with pytest.raises(Exception, match="could not correctly convert string: x1"):
            sess.run(tf.string_to_number(tf.constant(["x1"])))
    assert k.values.tolist() == [b"a", b"b", b"c", b"d"] and a.values.tolist() == [b"a", b"b", b"", b"c", b"d"]
    assert s.values.tolist() == [b"a", b"b", b"", b"c", b"d"] and s.dense_shape.tolist() == [2, 4]
    assert n.tolist() == [1.5, 2.0, -3.0] and n.dtype == np.float64
    assert j.tolist() == [b"a-x", b"b-x"] and r.tolist() == [b"one", b"zero", b"UNK"] and h.tolist() == [20, -1]
    with pytest.raises(ValueError, match="does not exist"):
        tf.contrib.lookup.index_table_from_file("/nonexistent/vocab.txt")


def test_string_fetches_are_bytes_as_in_tensorflow():
    """TF1's Session.run returns a string tensor's elements as bytes (a scalar as one bytes object),
    so scripts that ``.decode()`` what they fetch run unchanged."""
    with tf.Graph().as_default(), tf.Session() as sess:
        scalar, vector = sess.run([tf.constant("é"), tf.constant([["a", "b"]])])
    assert scalar == "é".encode() and type(scalar) is bytes
    assert vector.dtype == object and vector.shape == (1, 2) and vector.tolist() == [[b"a", b"b"]]
