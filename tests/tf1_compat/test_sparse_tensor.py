"""``tf.SparseTensor``: fed and fetched as one value, made dense, multiplied, and used as the ids
of ``embedding_lookup_sparse``, with gradients reaching the dense operands."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

VALUE = tf.SparseTensorValue([[0, 1], [2, 0], [2, 1]], [5.0, 7.0, -1.0], [3, 2])
DENSE = np.array([[0, 5], [0, 0], [7, -1]], np.float32)


def test_fed_and_fetched_as_one_value():
    sp = tf.sparse_placeholder(tf.float32)
    b = tf.placeholder(tf.float32, [2, 4])
    bs = np.arange(8, dtype=np.float32).reshape(2, 4)
    with tf.Session() as sess:
        back, dense, summed, product = sess.run(
            [sp, tf.sparse.to_dense(sp), tf.sparse_reduce_sum(sp, axis=1), tf.sparse_tensor_dense_matmul(sp, b)],
            {sp: VALUE, b: bs})
        as_tuple = sess.run(tf.sparse_tensor_to_dense(sp, default_value=9.0), {sp: tuple(VALUE)})
    assert isinstance(back, tf.SparseTensorValue) and back.indices.tolist() == VALUE.indices
    np.testing.assert_array_equal(dense, DENSE)
    np.testing.assert_array_equal(summed, DENSE.sum(1))
    np.testing.assert_allclose(product, DENSE @ bs)
    np.testing.assert_array_equal(as_tuple, np.where(DENSE == 0, 9.0, DENSE))  # no stored value is 0
    with pytest.raises(TypeError, match="fed a SparseTensorValue"):
        with tf.Session() as sess:
            sess.run(tf.sparse.to_dense(sp), {sp: DENSE})


def test_matmul_gradients_reach_the_dense_operand_and_the_values():
    values = tf.placeholder(tf.float32, [3])
    sp = tf.SparseTensor(VALUE.indices, values, VALUE.dense_shape)
    b = tf.constant(np.arange(8, dtype=np.float32).reshape(2, 4))
    loss = tf.reduce_sum(tf.sparse_tensor_dense_matmul(sp, b) ** 2)
    grad_values, grad_b = tf.gradients(loss, [values, b])
    with tf.Session() as sess:
        gv, gb = sess.run([grad_values, grad_b], {values: VALUE.values})
    bs = np.arange(8, dtype=np.float32).reshape(2, 4)
    upstream = 2 * DENSE @ bs
    np.testing.assert_allclose(gb, DENSE.T @ upstream)
    np.testing.assert_allclose(gv, [upstream[0] @ bs[1], upstream[2] @ bs[0], upstream[2] @ bs[1]])


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse_combines_each_rows_ids(combiner):
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    params = tf.Variable(table)
    ids = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], np.array([1, 3, 2], np.int64), [3, 2])
    weights = tf.SparseTensor([[0, 0], [0, 1], [2, 0]], [1.0, 3.0, 2.0], [3, 2])
    out = tf.nn.embedding_lookup_sparse(params, ids, weights, combiner=combiner)
    (grad,) = tf.gradients(tf.reduce_sum(out), [params])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        got, g = sess.run([out, tf.convert_to_tensor(grad)])
    norms = {"sum": (1.0, 1.0), "mean": (4.0, 2.0), "sqrtn": (np.sqrt(10.0), 2.0)}[combiner]
    want = np.stack([(table[1] + 3 * table[3]) / norms[0], np.zeros(3), 2 * table[2] / norms[1]])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(g.sum(1), np.array([0, 1 / norms[0], 2 / norms[1], 3 / norms[0]]) * 3, rtol=1e-6)


def test_string_split_words_densify_with_an_empty_default():
    """string_split -> sparse_tensor_to_dense -> vocabulary lookup, the TF1 text-input idiom: string
    values densify with "" where a row is shorter."""
    words = tf.sparse_tensor_to_dense(tf.string_split(tf.constant(["a b c", "d e"])), default_value="")
    table = tf.contrib.lookup.index_table_from_tensor(tf.constant(["a", "b", "c", "d"]), num_oov_buckets=1)
    with tf.Session() as sess:
        sess.run(tf.tables_initializer())
        got_words, ids = sess.run([words, table.lookup(words)])
    assert [[w.decode() if isinstance(w, bytes) else w for w in row] for row in got_words] == [["a", "b", "c"],
                                                                                                 ["d", "e", ""]]
    assert ids.tolist() == [[0, 1, 2], [3, 4, 4]]


def test_a_default_fills_around_the_values_and_the_gradient_reaches_them():
    values = tf.Variable([1.5, 2.5])
    dense = tf.sparse_tensor_to_dense(tf.SparseTensor([[0, 0], [1, 2]], values, [2, 3]), default_value=7.0)
    grad = tf.gradients(tf.reduce_sum(dense * 3.0), values)[0]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(dense), [[1.5, 7.0, 7.0], [7.0, 7.0, 2.5]])
        np.testing.assert_array_equal(sess.run(grad), [3.0, 3.0])
