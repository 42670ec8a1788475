"""SparseTensor-to-SparseTensor ops (trainer/sparse_combine.py) and their TF 1.15 top-level aliases:
values against dense NumPy computations, TensorFlow's documented examples, gradients against
central differences, bad input, and a script."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.tf1_compat.gradient_check import numeric_gradient_check

RNG = np.random.default_rng(7)


def run(fetches, feed=None):
    return tf.Session().run(fetches, feed)


def dense(value) -> np.ndarray:
    out = np.zeros(value.dense_shape, value.values.dtype)
    for idx, v in zip(value.indices, value.values):
        out[tuple(idx)] += v
    return out


def random_sparse(shape, density=0.4, seed=0):
    rng = np.random.default_rng(seed)
    mask = rng.uniform(size=shape) < density
    idx = np.argwhere(mask)
    return tf.SparseTensor(idx, rng.normal(size=len(idx)), shape), idx


def row_major(indices) -> bool:
    keys = [tuple(i) for i in indices]
    return keys == sorted(keys)


# -- add -------------------------------------------------------------------------------------------
def test_sparse_add_documented_threshold_example():
    # TensorFlow's docstring: a = [[0, 1]] + [[1, 2]] with values [1, 2]? Its example: summing with
    # threshold drops the small sums, keeping row-major order.
    a = tf.SparseTensor([[0, 0], [1, 1]], [1.0, 2.0], [2, 2])
    b = tf.SparseTensor([[0, 0], [0, 1]], [-0.9, 3.0], [2, 2])
    kept_all, thresholded = run([tf.sparse.add(a, b), tf.sparse_add(a, b, threshold=0.11)])
    np.testing.assert_array_equal(kept_all.indices, [[0, 0], [0, 1], [1, 1]])
    np.testing.assert_allclose(kept_all.values, [0.1, 3.0, 2.0], rtol=1e-6)
    np.testing.assert_array_equal(thresholded.indices, [[0, 1], [1, 1]])  # |0.1| < 0.11 is dropped
    np.testing.assert_array_equal(run(tf.sparse_add(a, b, thresh=0.11)).indices, [[0, 1], [1, 1]])


def test_sparse_add_random_against_dense_sum():
    a, _ = random_sparse((4, 5, 3), seed=1)
    b, _ = random_sparse((4, 5, 3), seed=2)
    out = run(tf.sparse.add(a, b))
    assert row_major(out.indices)
    np.testing.assert_allclose(dense(out), dense(run(a)) + dense(run(b)))


def test_sparse_plus_dense_is_dense():
    a = tf.SparseTensor([[0, 1], [2, 0]], [5.0, -1.0], [3, 2])
    d = np.arange(6, dtype=np.float32).reshape(3, 2)
    out = tf.sparse.add(d, a)
    assert isinstance(out, tf.Tensor)
    np.testing.assert_array_equal(run(out), d + [[0, 5], [0, 0], [-1, 0]])


def test_sparse_add_gradients_reach_values_and_dense():
    idx_a, idx_b = [[0, 0], [1, 2], [2, 1]], [[0, 0], [2, 2]]
    numeric_gradient_check(
        lambda va, vb: tf.sparse.to_dense(tf.sparse.add(tf.SparseTensor(idx_a, va, [3, 3]),
                                                         tf.SparseTensor(idx_b, vb, [3, 3]))),
        [RNG.normal(size=3), RNG.normal(size=2)], RNG)
    numeric_gradient_check(lambda v, d: tf.sparse.add(tf.SparseTensor(idx_a, v, [3, 3]), d),
                           [RNG.normal(size=3), RNG.normal(size=(3, 3))], RNG)


def test_sparse_add_bad_input():
    a = tf.SparseTensor([[0, 0]], [1.0], [2, 2])
    with pytest.raises(TypeError, match="at least one of a and b must be a SparseTensor"):
        tf.sparse.add(np.ones(2), np.ones(2))
    with pytest.raises(tf.errors.InvalidArgumentError, match="dense shapes must be equal"):
        run(tf.sparse.add(a, tf.SparseTensor([[0, 0]], [1.0], [3, 2])))
    with pytest.raises(TypeError, match="same dtype"):
        tf.sparse.add(a, tf.SparseTensor([[0, 0]], np.array([1.0]), [2, 2]))


# -- maximum / minimum -----------------------------------------------------------------------------
def test_sparse_maximum_minimum_on_union_with_implicit_zeros():
    a, _ = random_sparse((5, 4), seed=3)
    b, _ = random_sparse((5, 4), seed=4)
    hi, lo = run([tf.sparse_maximum(a, b), tf.sparse.minimum(a, b)])
    da, db = dense(run(a)), dense(run(b))
    np.testing.assert_allclose(dense(hi), np.maximum(da, db))
    np.testing.assert_allclose(dense(lo), np.minimum(da, db))
    present = (da != 0) | (db != 0)
    assert len(hi.indices) == present.sum() and row_major(hi.indices)


# -- concat ----------------------------------------------------------------------------------------
def test_sparse_concat_documented_example():
    # TensorFlow's docstring: concat along axis 1 of a [2, 3] and a [2, 4] input
    sp1 = tf.SparseTensor([[0, 2], [1, 0], [1, 1]], ["a", "b", "c"], [2, 3])
    sp2 = tf.SparseTensor([[0, 1], [0, 2]], ["d", "e"], [2, 4])
    out = run(tf.sparse_concat(1, [sp1, sp2]))
    np.testing.assert_array_equal(out.indices, [[0, 2], [0, 4], [0, 5], [1, 0], [1, 1]])
    assert [v.decode() if isinstance(v, bytes) else v for v in out.values] == ["a", "d", "e", "b", "c"]
    np.testing.assert_array_equal(out.dense_shape, [2, 7])


def test_sparse_concat_expand_nonconcat_dim_and_gradient():
    a = tf.SparseTensor([[0, 1]], [1.0], [2, 3])
    b = tf.SparseTensor([[0, 3]], [2.0], [1, 5])
    out = run(tf.sparse.concat(0, [a, b], expand_nonconcat_dim=True))
    np.testing.assert_array_equal(out.dense_shape, [3, 5])
    np.testing.assert_array_equal(dense(out), np.concatenate([np.pad(dense(run(a)), ((0, 0), (0, 2))),
                                                              dense(run(b))], 0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="dims other than axis must match"):
        run(tf.sparse.concat(0, [a, b]))
    numeric_gradient_check(
        lambda u, v: tf.sparse.to_dense(tf.sparse.concat(1, [tf.SparseTensor([[0, 1], [1, 0]], u, [2, 2]),
                                                            tf.SparseTensor([[0, 0]], v, [2, 3])])),
        [RNG.normal(size=2), RNG.normal(size=1)], RNG)
    with pytest.raises(ValueError, match="axis 2 is out of range"):
        tf.sparse.concat(2, [a])


# -- reshape, slice, split, transpose, expand_dims -------------------------------------------------
def test_sparse_reshape_slice_transpose_expand_dims_against_dense():
    sp, _ = random_sparse((4, 6), seed=5)
    d = dense(run(sp))
    np.testing.assert_allclose(dense(run(tf.sparse_reshape(sp, [3, -1]))), d.reshape(3, 8))
    np.testing.assert_allclose(dense(run(tf.sparse.reshape(sp, [2, 2, 6]))), d.reshape(2, 2, 6))
    np.testing.assert_allclose(dense(run(tf.sparse_slice(sp, [1, 2], [2, 10]))), d[1:3, 2:])
    transposed = run(tf.sparse_transpose(sp))
    assert row_major(transposed.indices)
    np.testing.assert_allclose(dense(transposed), d.T)
    np.testing.assert_allclose(dense(run(tf.sparse.expand_dims(sp, -1))), d[:, :, None])
    np.testing.assert_allclose(dense(run(tf.sparse.expand_dims(sp, 0))), d[None])
    with pytest.raises(tf.errors.InvalidArgumentError, match="as many elements"):
        run(tf.sparse.reshape(sp, [5, 5]))
    with pytest.raises(ValueError, match="at most one -1"):
        tf.sparse.reshape(sp, [-1, -1])
    with pytest.raises(ValueError, match="permutation"):
        tf.sparse.transpose(sp, [0, 0])


def test_sparse_split_documented_sizes():
    # TensorFlow's docstring: a [2, 7] input split in 3 along axis 1 gives widths 3, 2, 2
    sp = tf.SparseTensor([[0, 2], [0, 4], [0, 5], [1, 0], [1, 1]], [1.0, 2.0, 3.0, 4.0, 5.0], [2, 7])
    pieces = run(tf.sparse_split(sp_input=sp, num_split=3, axis=1))
    d = dense(run(sp))
    for piece, part in zip(pieces, (d[:, :3], d[:, 3:5], d[:, 5:])):
        np.testing.assert_allclose(dense(piece), part)
    with pytest.raises(TypeError):
        tf.sparse.split(sp, 3, 1)  # TensorFlow requires keyword arguments
    with pytest.raises(ValueError, match="num_split must be positive"):
        tf.sparse.split(sp_input=sp, num_split=0, axis=1)


def test_sparse_reshape_and_slice_gradients():
    idx = [[0, 0], [1, 2], [2, 3]]
    numeric_gradient_check(lambda v: tf.sparse.to_dense(tf.sparse.reshape(tf.SparseTensor(idx, v, [3, 4]), [6, 2])),
                           [RNG.normal(size=3)], RNG)
    numeric_gradient_check(lambda v: tf.sparse.to_dense(tf.sparse.slice(tf.SparseTensor(idx, v, [3, 4]), [1, 1],
                                                                        [2, 3])),
                           [RNG.normal(size=3)], RNG)


# -- softmax, merge, eye, reduce_max ---------------------------------------------------------------
def test_sparse_softmax_over_present_entries_and_gradient():
    idx = [[0, 0], [0, 2], [1, 1], [2, 0], [2, 1], [2, 3]]
    vals = RNG.normal(size=6)
    out = run(tf.sparse_softmax(tf.SparseTensor(idx, vals, [3, 4])))
    np.testing.assert_array_equal(out.indices, idx)
    want = np.concatenate([np.exp(r) / np.exp(r).sum() for r in (vals[:2], vals[2:3], vals[3:])])
    np.testing.assert_allclose(out.values, want, rtol=1e-12)
    numeric_gradient_check(lambda v: tf.sparse.softmax(tf.SparseTensor(idx, v, [3, 4])).values, [vals.copy()], RNG)
    with pytest.raises(ValueError, match="rank 2 or more"):
        tf.sparse.softmax(tf.SparseTensor([[0]], [1.0], [3]))


def test_sparse_merge_documented_example():
    # TensorFlow's docstring: ids and values of a batch of two examples into a [2, vocab] SparseTensor
    ids = tf.SparseTensor([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]], np.array([0, 10, 13, 14, 32], np.int64), [2, 3])
    values = tf.SparseTensor([[0, 0], [0, 1], [0, 2], [1, 0], [1, 1]], [-0.1, 0.2, 0.3, -0.4, 0.5], [2, 3])
    out = run(tf.sparse_merge(ids, values, 100))
    np.testing.assert_array_equal(out.indices, [[0, 0], [0, 10], [0, 13], [1, 14], [1, 32]])
    np.testing.assert_allclose(out.values, [-0.1, 0.2, 0.3, -0.4, 0.5], rtol=1e-6)
    np.testing.assert_array_equal(out.dense_shape, [2, 100])
    two = run(tf.sparse.merge([ids, ids], values, [100, 50]))
    np.testing.assert_array_equal(two.dense_shape, [2, 100, 50])
    with pytest.raises(TypeError, match="integer ids"):
        tf.sparse.merge(values, values, 10)


def test_sparse_eye_and_reduce_max():
    np.testing.assert_array_equal(dense(run(tf.sparse.eye(3, 4, dtype=tf.int32))), np.eye(3, 4, dtype=np.int32))
    sp = tf.SparseTensor([[0, 0], [0, 2], [1, 1]], [-3.0, -1.0, 4.0], [3, 3])
    np.testing.assert_array_equal(run(tf.sparse_reduce_max(sp, axis=1)), [-1.0, 4.0, -np.inf])
    assert run(tf.sparse.reduce_max(sp)) == 4.0


def test_sparse_matmul_is_the_dense_product():
    a, b = RNG.normal(size=(3, 4)).astype(np.float32), RNG.normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_allclose(run(tf.sparse_matmul(a, b, transpose_b=True, a_is_sparse=True)), a @ b.T, rtol=1e-5)
    with pytest.raises(TypeError, match="floating point"):
        tf.sparse_matmul(np.ones((2, 2), np.int32), np.ones((2, 2), np.int32))


def test_tf1_script_bag_of_words_from_sparse_pieces():
    """A TF1 script: two feature groups as SparseTensors, joined, summed and fed to a linear model."""
    tf.set_random_seed(0)
    words = tf.sparse_placeholder(tf.float32, name="words")
    tags = tf.sparse_placeholder(tf.float32, name="tags")
    features = tf.sparse_concat(1, [words, tags])  # [batch, 6 + 4]
    boosted = tf.sparse_add(features, tf.SparseTensor([[0, 0]], [1.0], [2, 10]))
    # 0.1, not 0: at logit 0 TensorFlow's sigmoid cross-entropy gradient sits on its kink
    w = tf.get_variable("w", (10, 1), initializer=tf.constant_initializer(0.1))
    logits = tf.sparse_tensor_dense_matmul(boosted, w)
    labels = tf.constant([[1.0], [0.0]])
    loss = tf.losses.sigmoid_cross_entropy(labels, logits)
    train = tf.train.GradientDescentOptimizer(1.0).minimize(loss)
    feed = {words: tf.SparseTensorValue([[0, 1], [1, 4]], [1.0, 1.0], [2, 6]),
            tags: tf.SparseTensorValue([[0, 0], [1, 3]], [1.0, 1.0], [2, 4])}
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        start = sess.run(loss, feed)
        for _ in range(40):
            sess.run(train, feed)
        end, weights = sess.run([loss, w], feed)
    # the same 40 steps of gradient descent in NumPy on the dense features: 0.6762 -> 0.0210
    x = np.zeros((2, 10))
    x[0, [0, 1, 6]] = 1
    x[1, [4, 9]] = 1
    y, w_np = np.array([1.0, 0.0]), np.full(10, 0.1)

    def xent(w_):
        p = 1 / (1 + np.exp(-(x @ w_)))
        return np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p)))

    assert start == pytest.approx(xent(w_np), rel=1e-5)
    for _ in range(40):
        w_np -= x.T @ (1 / (1 + np.exp(-(x @ w_np))) - y) / 2
    assert end == pytest.approx(xent(w_np), rel=1e-3)
    np.testing.assert_allclose(weights[:, 0], w_np, rtol=1e-4)


def test_edit_distance_documented_example_and_unnormalized():
    # TensorFlow's docstring: hypothesis (2, 1, 1) and truth (2, 2, 2) give [[inf, 1.0], [0.5, 1.0]]
    hypothesis = tf.SparseTensor([[0, 0, 0], [1, 0, 0]], ["a", "b"], (2, 1, 1))
    truth = tf.SparseTensor([[0, 1, 0], [1, 0, 0], [1, 0, 1], [1, 1, 0]], ["a", "b", "c", "a"], (2, 2, 2))
    out = run(tf.edit_distance(hypothesis, truth))
    assert out.dtype == np.float32 and out.shape == (2, 2)
    np.testing.assert_array_equal(out, [[np.inf, 1.0], [0.5, 1.0]])
    np.testing.assert_array_equal(run(tf.edit_distance(hypothesis, truth, normalize=False)), [[1, 1], [1, 1]])


def test_edit_distance_against_a_dynamic_programme():
    def levenshtein(a, b):
        d = np.arange(len(b) + 1)
        for i, x in enumerate(a, 1):
            prev = d.copy()
            d[0] = i
            for j, y in enumerate(b, 1):
                d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (x != y))
        return d[-1]

    rng = np.random.default_rng(9)
    hyps = [list(rng.integers(0, 4, size=rng.integers(1, 7))) for _ in range(5)]
    truths = [list(rng.integers(0, 4, size=rng.integers(1, 7))) for _ in range(5)]

    def sparse(seqs):
        idx = [[b, k] for b, s in enumerate(seqs) for k in range(len(s))]
        return tf.SparseTensor(idx, np.concatenate(seqs).astype(np.int64), [len(seqs), 7])

    out = run(tf.edit_distance(sparse(hyps), sparse(truths)))
    np.testing.assert_allclose(out, [levenshtein(h, t) / len(t) for h, t in zip(hyps, truths)], rtol=1e-6)
    with pytest.raises(TypeError, match="same dtype"):
        tf.edit_distance(sparse(hyps), tf.SparseTensor([[0, 0]], ["a"], [5, 7]))
    with pytest.raises(TypeError, match="must be a SparseTensor"):
        tf.edit_distance(np.zeros((2, 2)), sparse(truths))
