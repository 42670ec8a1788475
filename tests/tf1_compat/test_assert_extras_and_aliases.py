"""TF 1.15's remaining ``tf.assert_*`` checks and the top-level names of functions flowstack keeps in
other namespaces (``tf.betainc`` is ``tf.math.betainc``, ``tf.matrix_solve_ls`` is ``tf.linalg.lstsq``)."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import trainer as tf


def run(fetches, feed=None):
    return tf.Session().run(fetches, feed)


def test_static_asserts():
    tf.assert_integer(tf.constant([1], tf.int32))
    with pytest.raises(TypeError, match="Expected \"x\" to be integer type"):
        tf.assert_integer(tf.constant([1.0]), message="ids")
    s = tf.constant(1.0)
    assert tf.assert_scalar(s) is s
    with pytest.raises(ValueError, match="Expected scalar shape"):
        tf.assert_scalar(tf.constant([1.0]))
    tf.assert_rank_in(tf.zeros([2, 3]), [1, 2])
    with pytest.raises(ValueError, match=r"must have rank in \(0, 1\)"):
        tf.assert_rank_in(tf.zeros([2, 3]), [0, 1])
    assert tf.assert_same_float_dtype([tf.constant(1.0), tf.zeros([2])]) == tf.float32
    assert tf.assert_same_float_dtype(None, tf.float64) == tf.float64
    with pytest.raises(ValueError, match="with dtype"):
        tf.assert_same_float_dtype([tf.constant(1.0), tf.constant(np.float64(1.0))])
    tf.assert_proper_iterable([1, 2])
    for bad in (tf.constant([1]), np.zeros(2), "abc", 3):
        with pytest.raises(TypeError, match="iterable"):
            tf.assert_proper_iterable(bad)


def test_run_time_asserts():
    x = tf.placeholder(tf.float32, (None,))
    fed = tf.placeholder(tf.float32, (None,))
    near = tf.assert_near(x, fed, atol=1e-3, rtol=0.0, message="too far")
    run(near, {x: [1.0, 2.0], fed: [1.0005, 2.0]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="too far"):
        run(near, {x: [1.0, 2.0], fed: [1.01, 2.0]})
    unknown = tf.placeholder(tf.float32)
    rank_check = tf.assert_rank_in(unknown, [1, 3])
    run(rank_check, {unknown: np.zeros((2, 2, 2))})
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have rank in"):
        run(rank_check, {unknown: np.zeros((2, 2))})
    v = tf.Variable(1.0)
    check = tf.assert_variables_initialized([v])
    sess = tf.Session()
    with pytest.raises(tf.errors.InvalidArgumentError, match="not initialized"):
        sess.run(check)
    sess.run(v.initializer)
    sess.run(check)


def test_aliases_are_the_namespaced_functions():
    assert tf.betainc is tf.math.betainc and tf.igamma is tf.math.igamma and tf.igammac is tf.math.igammac
    assert tf.cholesky_solve is tf.linalg.cholesky_solve and tf.matrix_solve_ls is tf.linalg.lstsq
    assert tf.self_adjoint_eigvals is tf.linalg.eigvalsh
    assert tf.serialize_sparse is tf.io.serialize_sparse and tf.deserialize_many_sparse is tf.io.deserialize_many_sparse
    assert tf.parse_single_sequence_example is tf.io.parse_single_sequence_example
    assert tf.decode_compressed is tf.io.decode_compressed
    assert tf.uniform_unit_scaling_initializer is tf.initializers.uniform_unit_scaling
    assert tf.dimension_at_index is tf.compat.dimension_at_index
    assert tf.get_logger() is logging.getLogger("tensorflow")


def test_aliases_compute_known_values():
    a = np.array([[4.0, 1.0], [1.0, 3.0]])
    evals, solved = run([tf.self_adjoint_eigvals(a), tf.matrix_solve_ls(a, np.array([[1.0], [2.0]]))])
    np.testing.assert_allclose(evals, np.linalg.eigvalsh(a))
    np.testing.assert_allclose(solved, np.linalg.solve(a, [[1.0], [2.0]]), rtol=1e-10)
    # I_0.5(2, 2) = 0.5 by symmetry; P(1, x) = 1 - exp(-x)
    assert run(tf.betainc(2.0, 2.0, 0.5)) == pytest.approx(0.5)
    assert run(tf.igamma(1.0, 2.0)) == pytest.approx(1 - np.exp(-2.0), rel=1e-6)


def test_initialize_all_tables_and_conversions():
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2]), -1)
    sess = tf.Session()
    sess.run(tf.initialize_all_tables())
    assert list(sess.run(table.lookup(tf.constant(["b", "z"])))) == [2, -1]
    sp = tf.convert_to_tensor_or_sparse_tensor(tf.SparseTensorValue([[0]], [1.0], [2]))
    assert isinstance(sp, tf.SparseTensor)
    assert isinstance(tf.convert_to_tensor_or_sparse_tensor([1.0, 2.0]), tf.Tensor)
    with pytest.raises(ValueError, match="requested"):
        tf.convert_to_tensor_or_sparse_tensor(sp, dtype=tf.int32)
    slices = tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([0]))
    assert tf.convert_to_tensor_or_indexed_slices(slices) is slices


def test_colocate_with_places_ops_beside_the_variable():
    with tf.device("/job:ps/task:0"):
        v = tf.Variable(1.0)
    with tf.device("/job:worker/task:0"):
        with tf.colocate_with(v):
            beside = tf.identity(v)
        elsewhere = tf.identity(v)
    assert beside.op.colocate_with is v.op and beside.op.device == v.op.device
    assert elsewhere.op.device != v.op.device


def test_setdiff1d_documented_example():
    out, idx = run(tf.setdiff1d([1, 2, 3, 4, 5, 6], [1, 3, 5]))
    np.testing.assert_array_equal(out, [2, 4, 6])
    np.testing.assert_array_equal(idx, [1, 3, 5])
    assert idx.dtype == np.int32
    strings, where = run(tf.setdiff1d(tf.constant(["a", "b", "c"]), tf.constant(["b"]), index_dtype=tf.int64))
    assert [s.decode() if isinstance(s, bytes) else s for s in strings] == ["a", "c"] and where.dtype == np.int64
    with pytest.raises(ValueError, match="must be 1-D"):
        tf.setdiff1d(np.zeros((2, 2)), [1.0])


def test_get_static_value():
    np.testing.assert_array_equal(tf.get_static_value(tf.constant([1, 2])), [1, 2])
    x = tf.placeholder(tf.float32, (None, 3))
    assert tf.get_static_value(x) is None
    assert tf.get_static_value(tf.shape(x)) is None
    partial = tf.get_static_value(tf.shape(x), partial=True)
    assert list(partial) == [None, 3]
    np.testing.assert_array_equal(tf.get_static_value(tf.shape(tf.zeros([2, 5]))), [2, 5])


def test_deprecated_scopes_and_queue_namespace():
    a = tf.constant(1.0)
    with tf.op_scope([a], None, default_name="helper") as scope:
        inside = tf.identity(a, name="out")
    assert scope.startswith("helper") and inside.name.startswith("helper")
    with tf.variable_op_scope([a], "layer"):
        v = tf.get_variable("w", [], initializer=tf.zeros_initializer())
    assert v.name == "layer/w:0"
    assert tf.queue.FIFOQueue is tf.FIFOQueue and tf.queue.PaddingFIFOQueue is tf.PaddingFIFOQueue
    q = tf.queue.FIFOQueue(2, [tf.float32])
    sess = tf.Session()
    sess.run(q.enqueue([3.0]))
    assert sess.run(q.dequeue()) == 3.0


def test_event_protos_are_tensorboards():
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import event_pb2

    assert tf.Event is event_pb2.Event and tf.SessionLog is event_pb2.SessionLog
    event = tf.Event(step=3, session_log=tf.SessionLog(status=tf.SessionLog.START))
    assert tf.Event.FromString(event.SerializeToString()).step == 3
