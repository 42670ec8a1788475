"""Input from files as TF1 scripts read it: TFRecord files written with tf.python_io.TFRecordWriter
(TensorFlow's framing and masked CRC32C, optionally GZIP) and read back through tf.data.TFRecordDataset
and tf.decode_raw to train on scikit-learn's digits; text files through tf.data.TextLineDataset."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

import trainer as tf
from trainer.data.tfrecord import crc32c, masked_crc32c


def write_shards(directory, x, y, shards, options=None):
    paths = [str(directory / f"digits-{i:05d}-of-{shards:05d}.tfrecord") for i in range(shards)]
    for i, path in enumerate(paths):
        with tf.python_io.TFRecordWriter(path, options) as writer:
            for image, label in zip(x[i::shards], y[i::shards]):
                writer.write(np.append(image, np.float32(label)).astype(np.float32).tobytes())
    return paths


@pytest.mark.slow
def test_softmax_regression_trains_from_gzipped_tfrecord_shards(digits, tmp_path):
    options = tf.python_io.TFRecordOptions(tf.python_io.TFRecordCompressionType.GZIP)
    train_files = write_shards(tmp_path, digits["x_train"], digits["y_train"], 3, options)
    (tmp_path / "test").mkdir()
    test_files = write_shards(tmp_path / "test", digits["x_test"], digits["y_test"], 1, options)

    def parse(record):
        values = tf.decode_raw(record, tf.float32)
        return values[:64], tf.cast(values[64], tf.int64)

    filenames = tf.placeholder(tf.string, shape=[None])
    dataset = tf.data.TFRecordDataset(filenames, compression_type="GZIP").map(parse)
    train_iterator = dataset.shuffle(1500, seed=0).batch(100).make_initializable_iterator()
    test_iterator = dataset.batch(1000).make_initializable_iterator()
    images, labels = train_iterator.get_next()
    W = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=tf.matmul(images, W) + b)
    train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    test_images, test_labels = test_iterator.get_next()
    correct = tf.equal(tf.argmax(tf.matmul(test_images, W) + b, 1), test_labels)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    steps = 0
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for _ in range(15):
            sess.run(train_iterator.initializer, {filenames: train_files})
            while True:
                try:
                    sess.run(train_op)
                    steps += 1
                except tf.errors.OutOfRangeError:
                    break
        sess.run(test_iterator.initializer, {filenames: test_files})
        acc = sess.run(accuracy)
    assert steps == 15 * 14  # 1400 records, batches of 100, every epoch
    assert acc >= 0.9, acc


def test_records_are_framed_as_tensorflow_frames_them(tmp_path):
    assert crc32c(b"123456789") == 0xE3069283 and crc32c(bytes(32)) == 0x8A9136AA  # RFC 3720's check values
    path = str(tmp_path / "two.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"hello")
        writer.write(b"")
    raw = (tmp_path / "two.tfrecord").read_bytes()
    crc = crc32c(b"hello")
    masked = ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    length = struct.pack("<Q", 5)
    assert raw[:21] == length + struct.pack("<I", masked_crc32c(length)) + b"hello" + struct.pack("<I", masked)
    assert len(raw) == 21 + 16
    assert list(tf.python_io.tf_record_iterator(path)) == [b"hello", b""]
    corrupt = bytearray(raw)
    corrupt[14] ^= 0x20  # a bit of the first record's data
    (tmp_path / "two.tfrecord").write_bytes(bytes(corrupt))
    with pytest.raises(tf.errors.DataLossError, match=r"two.tfrecord: corrupted record at byte 0 \(data checksum"):
        list(tf.python_io.tf_record_iterator(path))


def test_text_lines_from_several_files_in_order(tmp_path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv.gz"
    first.write_text("label,pixels\n1,0 0 16\n2,3 3 3\n")
    with gzip.open(second, "wt") as f:
        f.write("label,pixels\r\n7,1 2 3\r\n")
    plain = tf.data.TextLineDataset(str(first)).skip(1)
    lines = plain.concatenate(tf.data.TextLineDataset([str(second)], compression_type="GZIP").skip(1))
    line = lines.make_one_shot_iterator().get_next()
    assert line.dtype == tf.string and line.get_shape().as_list() == []
    got = []
    with tf.Session() as sess:
        while True:
            try:
                got.append(sess.run(line))
            except tf.errors.OutOfRangeError:
                break
    assert got == [b"1,0 0 16", b"2,3 3 3", b"7,1 2 3"]  # TF1 fetches strings as bytes


def test_a_missing_file_is_named_at_get_next(tmp_path):
    record = tf.data.TFRecordDataset(str(tmp_path / "nope.tfrecord")).make_one_shot_iterator().get_next()
    with tf.Session() as sess, pytest.raises(tf.errors.OpError, match="nope.tfrecord"):
        sess.run(record)


def test_zlib_records_round_trip_and_zlib_is_what_is_on_disk(tmp_path):
    import zlib

    path = str(tmp_path / "z.tfrecord")
    records = [bytes([i]) * (i * 1000) for i in range(5)]
    with tf.python_io.TFRecordWriter(path, tf.python_io.TFRecordOptions("ZLIB")) as writer:
        for r in records:
            writer.write(r)
    framed = zlib.decompress((tmp_path / "z.tfrecord").read_bytes())
    assert len(framed) == sum(16 + len(r) for r in records)
    assert list(tf.python_io.tf_record_iterator(path, tf.python_io.TFRecordOptions("ZLIB"))) == records
