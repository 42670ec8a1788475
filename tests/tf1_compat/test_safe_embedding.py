"""tf.nn.safe_embedding_lookup_sparse as TF1 recommenders use it: invalid ids and non-positive
weights ignored, empty rows zeros or the default id's embedding, checked against a NumPy loop."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf

TABLE = np.random.default_rng(4).standard_normal((6, 3)).astype(np.float32)
ROWS = [[(1, 1.0), (4, 2.0), (-1, 1.0)], [], [(2, 0.5), (3, -1.0)], [(-5, 1.0)], [(0, 1.0), (0, 3.0)]]


def _sparse(values):
    indices = np.asarray([(r, i) for r, row in enumerate(ROWS) for i in range(len(row))], np.int64)
    return tf.SparseTensor(indices, np.asarray(values), [len(ROWS), 3])


def reference(combiner, weighted, default_id):
    out = np.zeros((len(ROWS), 3))
    for r, row in enumerate(ROWS):
        kept = [(i, w if weighted else 1.0) for i, w in row if i >= 0 and (w > 0 or not weighted)]
        if not kept:
            out[r] = TABLE[default_id] if default_id is not None else 0.0
            continue
        total = sum(w * TABLE[i] for i, w in kept)
        norm = {"sum": 1.0, "mean": sum(w for _, w in kept), "sqrtn": np.sqrt(sum(w * w for _, w in kept))}[combiner]
        out[r] = total / norm
    return out


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_safe_lookup_prunes_and_fills_rows_like_tf(combiner):
    ids = _sparse([i for row in ROWS for i, _ in row])
    weights = _sparse(np.asarray([w for row in ROWS for _, w in row], np.float32))
    table = tf.constant(TABLE)
    outs = [tf.nn.safe_embedding_lookup_sparse(table, ids, None, combiner=combiner),
            tf.nn.safe_embedding_lookup_sparse([table], ids, weights, combiner=combiner),
            tf.nn.safe_embedding_lookup_sparse(table, ids, weights, combiner=combiner, default_id=5)]
    got = tf.Session().run(outs)
    np.testing.assert_allclose(got[0], reference(combiner, False, None), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], reference(combiner, True, None), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], reference(combiner, True, 5), rtol=1e-5, atol=1e-6)


def test_safe_lookup_trains_the_table_and_rejects_bad_combiners():
    ids = _sparse([i for row in ROWS for i, _ in row])
    table = tf.Variable(TABLE)
    out = tf.nn.safe_embedding_lookup_sparse(table, ids, None, default_id=5)
    (grad,) = tf.gradients(tf.reduce_sum(out), [table])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        g = sess.run(tf.convert_to_tensor(grad) if not isinstance(grad, tf.IndexedSlices) else grad.to_dense())
    # row 0 (mean of ids 1 and 4): 1/2 each; row 2: 1/2 each to 2 and 3; row 4: id 0 twice at 1/2;
    # rows 1 and 3 are empty: the default id 5, once each.
    np.testing.assert_allclose(g[:, 0], [1.0, 0.5, 0.5, 0.5, 0.5, 2.0])
    with pytest.raises(ValueError, match="combiner must be one of"):
        tf.nn.safe_embedding_lookup_sparse(table, ids, combiner="max")
