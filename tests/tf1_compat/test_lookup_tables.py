"""tf.lookup / tf.contrib.lookup tables: text-file initializers, StaticVocabularyTable,
IdTableWithHashBuckets and id -> string tables. Out-of-vocabulary ids are checked against FarmHash
Fingerprint64 values computed with pyfarmhash 0.5.1 (Google's C++ FarmHash), as TensorFlow
buckets them."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

FARMHASH = {b"king": 13470331335490262638, b"lake": 8082762728332899256, b"crimson": 8749896438418896594,
            b"7": 9813730750082856088,
            b"-3": 245568598851291699}


def run(fetch):
    with tf.Session() as sess:
        sess.run(tf.tables_initializer())
        return sess.run(fetch)


@pytest.fixture
def vocab(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("emerson\nlake\npalmer\n")
    return str(path)


def test_static_vocabulary_table_hashes_unknown_keys_as_tf(vocab):
    table = tf.lookup.StaticVocabularyTable(tf.contrib.lookup.TextFileIdTableInitializer(vocab), 3)
    ids = table.lookup(tf.constant(["emerson", "lake", "palmer", "king", "crimson"]))
    assert ids.dtype == tf.int64
    out, size = run([ids, table.size()])
    assert out.tolist() == [0, 1, 2, 3 + FARMHASH[b"king"] % 3, 3 + FARMHASH[b"crimson"] % 3]
    assert size == 6


def test_integer_keys_hash_as_their_decimal_text():
    init = tf.lookup.KeyValueTensorInitializer(tf.constant([10, 20], tf.int64), tf.constant([0, 1], tf.int64))
    table = tf.lookup.StaticVocabularyTable(init, 4)
    assert run(table.lookup(tf.constant([20, 7, -3], tf.int64))).tolist() == [
        1, 2 + FARMHASH[b"7"] % 4, 2 + FARMHASH[b"-3"] % 4]


def test_text_file_initializer_reads_columns(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a\t5\tx\nb\t7\ty\nc\t9\tz\n")
    index = tf.lookup.TextFileIndex
    by_column = tf.contrib.lookup.HashTable(
        tf.lookup.TextFileInitializer(str(path), tf.string, 0, tf.int64, 1), -1)
    line_of = tf.contrib.lookup.HashTable(
        tf.lookup.TextFileInitializer(str(path), tf.string, 2, tf.int64, index.LINE_NUMBER, vocab_size=2), -1)
    whole = tf.contrib.lookup.HashTable(
        tf.lookup.TextFileInitializer(str(path), tf.int64, index.LINE_NUMBER, tf.string, index.WHOLE_LINE), "?")
    out = run([by_column.lookup(tf.constant(["b", "c", "q"])), line_of.lookup(tf.constant(["x", "y", "z"])),
               whole.lookup(tf.constant([1, 5], tf.int64))])
    assert out[0].tolist() == [7, 9, -1]
    assert out[1].tolist() == [0, 1, -1]  # vocab_size=2 reads the first two lines
    assert out[2].tolist() == [b"b\t7\ty", b"?"]


def test_text_file_initializer_rejects_bad_files(tmp_path, vocab):
    path = tmp_path / "pairs.tsv"
    path.write_text("a\t5\nb\n")
    with pytest.raises(ValueError, match="line 1 of .* has 1 column"):
        tf.lookup.TextFileInitializer(str(path), tf.string, 0, tf.int64, 1)
    with pytest.raises(ValueError, match="is not a int64"):
        tf.lookup.TextFileInitializer(str(path), tf.int64, 0, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER)
    with pytest.raises(ValueError, match="vocabulary size 9 is more than the 3 lines"):
        tf.contrib.lookup.TextFileIdTableInitializer(vocab, vocab_size=9)
    with pytest.raises(ValueError, match="does not exist"):
        tf.contrib.lookup.TextFileIdTableInitializer(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="num_oov_buckets must be > 0"):
        tf.lookup.StaticVocabularyTable(tf.contrib.lookup.TextFileIdTableInitializer(vocab), 0)
    with pytest.raises(TypeError, match="values must be int64 ids"):
        tf.lookup.StaticVocabularyTable(tf.contrib.lookup.TextFileStringTableInitializer(vocab), 2)


def test_id_table_with_hash_buckets_and_index_to_string(vocab):
    base = tf.contrib.lookup.index_table_from_tensor(tf.constant(["emerson", "lake", "palmer"]))
    wrapped = tf.contrib.lookup.IdTableWithHashBuckets(base, 5)
    hashed_only = tf.contrib.lookup.IdTableWithHashBuckets(None, 5)
    names = tf.contrib.lookup.index_to_string_table_from_file(vocab, default_value="UNKNOWN")
    keys = tf.constant(["lake", "king"])
    out = run([wrapped.lookup(keys), hashed_only.lookup(keys), names.lookup(tf.constant([2, 0, 3], tf.int64)),
               tf.contrib.lookup.index_to_string(tf.constant([1, 4], tf.int64), ["a", "b", "c"]),
               tf.contrib.lookup.index_table_from_file(vocab, num_oov_buckets=2).lookup(keys)])
    assert out[0].tolist() == [1, 3 + FARMHASH[b"king"] % 5]
    assert out[1].tolist() == [FARMHASH[b"lake"] % 5, FARMHASH[b"king"] % 5]
    assert out[2].tolist() == [b"palmer", b"emerson", b"UNKNOWN"]
    assert out[3].tolist() == [b"b", b"UNK"]
    assert out[4].tolist() == [1, 3 + FARMHASH[b"king"] % 2]
    with pytest.raises(ValueError, match="only FastHashSpec"):
        tf.contrib.lookup.IdTableWithHashBuckets(base, 5, hasher_spec="strong")


def test_tables_initializer_is_in_tf_initializers():
    op = tf.initializers.tables_initializer()
    with tf.Session() as sess:
        assert sess.run(op) is None


def test_a_tf1_vocabulary_script(tmp_path):
    """Tokens to ids through a vocabulary file and back, as a TF1 seq2seq input pipeline does."""
    vocab = tmp_path / "words.txt"
    vocab.write_text("<unk>\nthe\ncat\nsat\n")
    lines = tf.placeholder(tf.string, [None])
    tokens = tf.string_split(lines)
    table = tf.contrib.lookup.index_table_from_file(str(vocab), default_value=0)
    ids = tf.SparseTensor(tokens.indices, table.lookup(tokens.values), tokens.dense_shape)
    dense_ids = tf.sparse_tensor_to_dense(ids, default_value=-1)
    back = tf.contrib.lookup.index_to_string_table_from_file(str(vocab)).lookup(tf.maximum(dense_ids, 0))
    with tf.Session() as sess:
        sess.run(tf.tables_initializer())
        got_ids, got_words = sess.run([dense_ids, back], {lines: ["the cat sat", "the dog"]})
    assert got_ids.tolist() == [[1, 2, 3], [1, 0, -1]]
    assert got_words.tolist() == [[b"the", b"cat", b"sat"], [b"the", b"<unk>", b"<unk>"]]
    assert np.all(got_ids < 4)
