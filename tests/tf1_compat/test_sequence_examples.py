"""tf.io.parse_single_sequence_example / parse_sequence_example: SequenceExample records built
field by field, parsed back into context and per-step tensors (expected values are the ones put in,
padded by hand)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from trainer.example_proto import SequenceExample


def record(length=None, tokens=(), frames=(), label_steps=None) -> bytes:
    s = SequenceExample()
    if length is not None:
        s.context.feature["length"].int64_list.value.append(length)
    for t in tokens:
        s.feature_lists.feature_list["tokens"].feature.add().bytes_list.value.append(t)
    for f in frames:
        s.feature_lists.feature_list["frames"].feature.add().float_list.value.extend(f)
    for labels in label_steps or ():
        s.feature_lists.feature_list["labels"].feature.add().int64_list.value.extend(labels)
    return s.SerializeToString()


CONTEXT = {"length": tf.FixedLenFeature([], tf.int64), "lang": tf.FixedLenFeature([], tf.string, default_value="en")}
SEQUENCE = {"tokens": tf.FixedLenSequenceFeature([], tf.string),
            "frames": tf.FixedLenSequenceFeature([2], tf.float32, allow_missing=True),
            "labels": tf.VarLenFeature(tf.int64)}


def test_parse_single_sequence_example():
    serialized = record(3, [b"a", b"b", b"c"], [[1, 2], [3, 4], [5, 6]], [[1], [], [2, 3]])
    context, lists = tf.io.parse_single_sequence_example(serialized, CONTEXT, SEQUENCE)
    assert context["length"].shape == () and lists["frames"].shape == (None, 2) and lists["tokens"].shape == (None,)
    with tf.Session() as sess:
        ctx, seq = sess.run([context, lists])
    assert ctx["length"] == 3 and ctx["lang"] == b"en"
    assert seq["tokens"].tolist() == [b"a", b"b", b"c"]
    assert seq["frames"].tolist() == [[1, 2], [3, 4], [5, 6]]
    assert seq["labels"].indices.tolist() == [[0, 0], [2, 0], [2, 1]]
    assert seq["labels"].values.tolist() == [1, 2, 3] and seq["labels"].dense_shape.tolist() == [3, 2]


def test_parse_sequence_example_pads_a_batch_and_gives_lengths():
    batch = [record(2, [b"x", b"y"], [[1, 1], [2, 2]], [[4]]), record(1, [b"z"], [], [[5, 6], [7]])]
    context, lists, lengths = tf.io.parse_sequence_example(tf.constant(batch, dtype=tf.string), CONTEXT, SEQUENCE)
    assert lists["frames"].shape == (2, None, 2) and lengths["tokens"].shape == (2,)
    with tf.Session() as sess:
        ctx, seq, lens = sess.run([context, lists, lengths])
    assert ctx["length"].tolist() == [2, 1] and ctx["lang"].tolist() == [b"en", b"en"]
    assert seq["tokens"].tolist() == [[b"x", b"y"], [b"z", b""]]
    assert seq["frames"].tolist() == [[[1, 1], [2, 2]], [[0, 0], [0, 0]]]  # record 1 lacks the list
    assert {k: v.tolist() for k, v in lens.items()} == {"tokens": [2, 1], "frames": [2, 0]}
    assert seq["labels"].indices.tolist() == [[0, 0, 0], [1, 0, 0], [1, 0, 1], [1, 1, 0]]
    assert seq["labels"].dense_shape.tolist() == [2, 2, 2]


def test_bad_records_and_specs_fail_clearly():
    context, lists = tf.io.parse_single_sequence_example(record(1, [], [[1, 2, 3]]), CONTEXT,
                                                         {"frames": SEQUENCE["frames"]})
    with pytest.raises(tf.errors.OpError, match=r"Key: frames, Index: 0. Number of values \(3\) does not match"):
        tf.Session().run(lists)
    _, lists = tf.io.parse_single_sequence_example(record(1), CONTEXT, {"tokens": SEQUENCE["tokens"]})
    with pytest.raises(tf.errors.OpError, match="Feature list 'tokens' is required but could not be found"):
        tf.Session().run(lists)
    context, _ = tf.io.parse_single_sequence_example(record(None, [b"a"]), CONTEXT, {"tokens": SEQUENCE["tokens"]})
    with pytest.raises(tf.errors.OpError, match=r"Feature: length \(data type: int64\) is required"):
        tf.Session().run(context)
    with pytest.raises(tf.errors.OpError, match="not a serialized tf.train.SequenceExample"):
        tf.Session().run(tf.io.parse_single_sequence_example(b"\xff\xff", CONTEXT)[0])
    with pytest.raises(TypeError, match="expected FixedLenSequenceFeature or VarLenFeature"):
        tf.io.parse_single_sequence_example(record(1), None, {"tokens": tf.FixedLenFeature([], tf.string)})
    with pytest.raises(ValueError, match="serialized must be a scalar string"):
        tf.io.parse_single_sequence_example(tf.constant([record(1)]), CONTEXT)


def test_a_tf1_sequence_input_pipeline(tmp_path):
    """SequenceExamples in a TFRecord file, parsed and padded per batch through tf.data, as a TF1
    sequence tagger reads them."""
    path = str(tmp_path / "seq.tfrecord")
    rng = np.random.default_rng(3)
    sentences = [[int(t) for t in rng.integers(1, 9, size=n)] for n in (3, 1, 4, 2)]
    with tf.io.TFRecordWriter(path) as writer:
        for s in sentences:
            writer.write(record(len(s), label_steps=[[t] for t in s]))

    def parse(serialized):
        context, lists = tf.io.parse_single_sequence_example(
            serialized, {"length": tf.FixedLenFeature([], tf.int64)},
            {"labels": tf.FixedLenSequenceFeature([], tf.int64)})
        return lists["labels"], context["length"]

    labels, length = tf.data.TFRecordDataset(path).map(parse).padded_batch(2, ([None], [])) \
        .make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = [sess.run([labels, length]) for _ in range(2)]
    for (batch, lens), rows in zip(got, (sentences[:2], sentences[2:])):
        width = max(map(len, rows))
        assert batch.tolist() == [r + [0] * (width - len(r)) for r in rows]
        assert lens.tolist() == [len(r) for r in rows]
