"""tf.io.serialize_tensor / parse_tensor and tf.make_tensor_proto / make_ndarray: TensorProto bytes
checked against the protobuf wire format written out by hand and against TensorBoard's copy of
TensorFlow's own tensor_pb2 (an independent build of tensor.proto)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import trainer as tf


def run(fetch, feed=None):
    return tf.Session().run(fetch, feed)


def test_serialized_bytes_are_tensorflows_wire_format():
    value = np.array([[1.5, 2.0], [3.0, 4.0]], np.float32)
    # dtype=DT_FLOAT(1); tensor_shape {dim {size: 2} dim {size: 2}}; tensor_content = 16 raw bytes
    expected = (b"\x08\x01" + b"\x12\x08" + b"\x12\x02\x08\x02" * 2 + b"\x22\x10" + struct.pack("<4f", *value.ravel()))
    assert run(tf.io.serialize_tensor(value)) == expected
    strings = run(tf.serialize_tensor(tf.constant(["a", "bc"])))
    assert strings == b"\x08\x07" + b"\x12\x04\x12\x02\x08\x02" + b"\x42\x01a" + b"\x42\x02bc"  # string_val = 8


@pytest.mark.parametrize("value", [
    np.arange(6, dtype=np.int32).reshape(2, 3), np.array(2.5, np.float64), np.array([True, False]),
    np.array([1 + 2j], np.complex64), np.array([-3, 7], np.int64), np.array([0.5, -1], np.float16),
    np.zeros((0, 3), np.float32), np.array([[b"x", b""], [b"yz", b"\xff"]], object), np.array([200], np.uint8),
], ids=lambda v: f"{v.dtype.name}{v.shape}")
def test_round_trips_each_dtype(value):
    serialized = tf.io.serialize_tensor(tf.constant(value))
    parsed = tf.io.parse_tensor(serialized, tf.as_dtype(value.dtype))
    assert serialized.shape == ()
    out = run(parsed)
    assert out.dtype == value.dtype and out.shape == value.shape
    np.testing.assert_array_equal(out, value)


def test_parses_tensorflows_own_protos():
    tensor_pb2 = pytest.importorskip("tensorboard.compat.proto.tensor_pb2")
    shape_pb2 = pytest.importorskip("tensorboard.compat.proto.tensor_shape_pb2")
    dims = [shape_pb2.TensorShapeProto.Dim(size=2), shape_pb2.TensorShapeProto.Dim(size=2)]
    typed = tensor_pb2.TensorProto(dtype=3, tensor_shape=shape_pb2.TensorShapeProto(dim=dims), int_val=[4, 5, 6])
    x = tf.placeholder(tf.string, [])
    # a short value list is filled with its last value, as TensorFlow reads it
    assert run(tf.io.parse_tensor(x, tf.int32), {x: typed.SerializeToString()}).tolist() == [[4, 5], [6, 6]]
    ours = tensor_pb2.TensorProto.FromString(run(tf.io.serialize_tensor(tf.constant([[1.0, 2.0]], tf.float64))))
    assert ours.dtype == 2 and [d.size for d in ours.tensor_shape.dim] == [1, 2]
    assert np.frombuffer(ours.tensor_content, "<f8").tolist() == [1.0, 2.0]


def test_parse_tensor_rejects_bad_input():
    serialized = tf.io.serialize_tensor(tf.constant([1.0, 2.0]))
    with pytest.raises(tf.errors.OpError, match=r"type mismatch between parsed tensor \(float32\) and dtype \(int32\)"):
        run(tf.io.parse_tensor(serialized, tf.int32))
    with pytest.raises(tf.errors.OpError, match="could not parse the input as a TensorProto"):
        run(tf.io.parse_tensor(tf.constant("\xff\xff not a proto"), tf.float32))
    with pytest.raises(ValueError, match="serialized must be a scalar string"):
        tf.io.parse_tensor(tf.constant(["a", "b"]), tf.float32)


def test_make_tensor_proto_and_make_ndarray():
    proto = tf.make_tensor_proto([1, 2, 3], tf.int32)
    assert proto.dtype == 3 and [d.size for d in proto.tensor_shape.dim] == [3]
    assert tf.make_ndarray(proto).tolist() == [1, 2, 3]
    filled = tf.make_tensor_proto(7.0, shape=[2, 2])
    assert tf.make_ndarray(filled).tolist() == [[7.0, 7.0], [7.0, 7.0]] and tf.make_ndarray(filled).dtype == np.float32
    assert tf.make_ndarray(tf.make_tensor_proto(["a", "b"])).tolist() == [b"a", b"b"]
    with pytest.raises(ValueError, match="3 values do not fill shape"):
        tf.make_tensor_proto([1, 2, 3], shape=[2, 2])


def test_a_tf1_script_stores_tensors_in_tfrecords(tmp_path):
    """Tensors serialized into a TFRecord file, then read back through tf.data as TF1 scripts do."""
    path = str(tmp_path / "tensors.tfrecord")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((2, k)).astype(np.float32) for k in (1, 3, 2)]
    x = tf.placeholder(tf.float32, [2, None])
    serialized = tf.io.serialize_tensor(x)
    with tf.Session() as sess, tf.io.TFRecordWriter(path) as writer:
        for a in arrays:
            writer.write(sess.run(serialized, {x: a}))
    tf.reset_default_graph()
    dataset = tf.data.TFRecordDataset(path).map(lambda s: tf.io.parse_tensor(s, tf.float32))
    item = dataset.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        for a in arrays:
            np.testing.assert_array_equal(sess.run(item), a)
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(item)


def test_serialize_sparse_parts_are_tensor_protos():
    tensor_pb2 = pytest.importorskip("tensorboard.compat.proto.tensor_pb2")
    sp = tf.SparseTensor([[0, 1], [2, 0]], [1.5, -2.0], [3, 4])
    parts = run(tf.io.serialize_sparse(sp))
    assert parts.shape == (3,)
    indices, values, shape = (tensor_pb2.TensorProto.FromString(p) for p in parts)
    assert np.frombuffer(indices.tensor_content, "<i8").tolist() == [0, 1, 2, 0]
    assert np.frombuffer(values.tensor_content, "<f4").tolist() == [1.5, -2.0]
    assert np.frombuffer(shape.tensor_content, "<i8").tolist() == [3, 4]


def test_deserialize_many_sparse_matches_tfs_documented_example():
    a = tf.SparseTensor([[0], [10], [20]], [1, 2, 3], [50])
    b = tf.SparseTensor([[2], [10]], [4, 5], [30])
    joined = tf.io.deserialize_many_sparse(tf.stack([tf.io.serialize_sparse(a), tf.io.serialize_sparse(b)]),
                                           tf.int64, rank=2)
    assert joined.indices.shape == (None, 2)
    out = run(joined)
    assert out.indices.tolist() == [[0, 0], [0, 10], [0, 20], [1, 2], [1, 10]]
    assert out.values.tolist() == [1, 2, 3, 4, 5] and out.dense_shape.tolist() == [2, 50]


def test_serialize_many_sparse_round_trips_a_minibatch():
    sp = tf.SparseTensor([[0, 0, 1], [1, 1, 0], [1, 0, 2]], ["a", "b", "c"], [3, 2, 3])
    rows = tf.io.serialize_many_sparse(sp)
    back = run(tf.io.deserialize_many_sparse(rows, tf.string))
    assert run(rows).shape == (3, 3)
    assert back.indices.tolist() == [[0, 0, 1], [1, 1, 0], [1, 0, 2]]
    assert back.values.tolist() == [b"a", b"b", b"c"]
    assert back.dense_shape.tolist() == [3, 2, 3]


def test_sparse_serialization_rejects_bad_input():
    with pytest.raises(ValueError, match="serialized_sparse must be \\[N, 3\\]"):
        tf.io.deserialize_many_sparse(tf.constant([["a", "b"]]), tf.int32)
    with pytest.raises(ValueError, match="out_type must be tf.string"):
        tf.io.serialize_sparse(tf.SparseTensor([[0]], [1], [2]), out_type=tf.int32)
    with pytest.raises(ValueError, match="must have rank >= 2"):
        tf.io.serialize_many_sparse(tf.SparseTensor([[0]], [1], [2]))
    mixed = tf.stack([tf.io.serialize_sparse(tf.SparseTensor([[0]], [1], [2])),
                      tf.io.serialize_sparse(tf.SparseTensor([[0, 0]], [1], [2, 2]))])
    with pytest.raises(tf.errors.OpError, match="the rows have different ranks"):
        run(tf.io.deserialize_many_sparse(mixed, tf.int64))
