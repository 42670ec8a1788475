"""tf.train.Example records in TFRecord files, read back with parse_single_example / parse_example,
as TF1 input pipelines do; byte-for-byte TensorFlow's wire format."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import trainer as tf

pytest.importorskip("google.protobuf")

FEATURES = {"image": tf.FixedLenFeature([2, 2], tf.float32), "label": tf.FixedLenFeature([], tf.int64),
            "name": tf.FixedLenFeature([], tf.string), "weight": tf.FixedLenFeature([], tf.float32, default_value=1.0),
            "tokens": tf.FixedLenSequenceFeature([], tf.int64, allow_missing=True)}


def example(i: int) -> bytes:
    feature = {"image": tf.train.Feature(float_list=tf.train.FloatList(value=np.full(4, i, np.float32))),
               "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
               "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"n{i}".encode()])),
               "tokens": tf.train.Feature(int64_list=tf.train.Int64List(value=list(range(i))))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_examples_are_tensorflows_bytes():
    one = tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 2.0]))})).SerializeToString()
    floats = struct.pack("<2f", 1.0, 2.0)  # packed repeated float, as TensorFlow writes it
    assert one == bytes([0x0A, 0x13, 0x0A, 0x11, 0x0A, 0x01, 0x78, 0x12, 0x0C, 0x12, 0x0A, 0x0A, 0x08]) + floats
    assert tf.train.Example.FromString(one).features.feature["x"].float_list.value == [1.0, 2.0]


def test_a_tfrecord_pipeline_parses_its_examples(tmp_path):
    path = str(tmp_path / "train.tfrecord")
    with tf.python_io.TFRecordWriter(path) as writer:
        for i in range(5):
            writer.write(example(i))
    single = {k: v for k, v in FEATURES.items() if k != "tokens"}
    one_by_one = tf.data.TFRecordDataset(path).map(lambda r: tf.parse_single_example(r, single)).batch(5)
    batched = tf.data.TFRecordDataset(path).batch(5).map(lambda r: tf.io.parse_example(r, FEATURES))
    with tf.Session() as sess:
        a = sess.run(one_by_one.make_one_shot_iterator().get_next())
        b = sess.run(batched.make_one_shot_iterator().get_next())
    for got in (a, b):
        np.testing.assert_array_equal(got["image"], np.arange(5, dtype=np.float32)[:, None, None] * np.ones((2, 2)))
        assert got["label"].tolist() == [0, 1, 2, 3, 4] and got["name"].tolist() == [b"n0", b"n1", b"n2", b"n3", b"n4"]
        assert got["weight"].tolist() == [1.0] * 5  # absent: the default
    assert b["tokens"].tolist() == [[0, 0, 0, 0], [0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0], [0, 1, 2, 3]]


@pytest.mark.parametrize("spec,record,message", [
    ({"missing": tf.FixedLenFeature([], tf.int64)}, example(1), r"Feature: missing \(data type: int64\) is required"),
    ({"label": tf.FixedLenFeature([], tf.float32)}, example(1), "Key: label. Data types don't match"),
    ({"image": tf.FixedLenFeature([3], tf.float32)}, example(1), "expected 3 values .* got 4"),
    ({"label": tf.FixedLenFeature([], tf.int64)}, b"\xff\xff garbage", "not a serialized tf.train.Example"),
], ids=["missing feature", "wrong dtype", "wrong length", "not an Example"])  # (a map's bytes vary by process)
def test_bad_records_are_named(spec, record, message):
    parsed = tf.parse_single_example(tf.constant(np.array(record, dtype=object)), spec)
    with tf.Session() as sess, pytest.raises(Exception, match=message):
        sess.run(parsed)


def test_var_len_features_come_back_sparse(tmp_path):
    records = tf.constant(np.array([example(i) for i in (2, 0, 3)], dtype=object))
    parsed = tf.parse_example(records, {"tokens": tf.VarLenFeature(tf.int64), "label": tf.FixedLenFeature([], tf.int64)})
    one = tf.parse_single_example(tf.constant(np.array(example(3), dtype=object)), {"tokens": tf.VarLenFeature(tf.int64)})
    with tf.Session() as sess:
        tokens, single, dense = sess.run([parsed["tokens"], one["tokens"],
                                          tf.sparse_tensor_to_dense(parsed["tokens"], default_value=-1)])
    assert tokens.indices.tolist() == [[0, 0], [0, 1], [2, 0], [2, 1], [2, 2]] and tokens.values.tolist() == [0, 1, 0, 1, 2]
    assert tokens.dense_shape.tolist() == [3, 3] and single.indices.tolist() == [[0], [1], [2]]
    assert dense.tolist() == [[0, 1, -1], [-1, -1, -1], [0, 1, 2]]


def test_a_sequence_feature_without_allow_missing_is_refused():
    record = tf.constant(np.array(example(1), dtype=object))
    with pytest.raises(ValueError, match="needs allow_missing=True"):
        tf.parse_single_example(record, {"tokens": tf.FixedLenSequenceFeature([], tf.int64)})
