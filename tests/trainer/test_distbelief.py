"""The DistBelief baseline: get / compute / put trains exactly as plain SGD, moving every byte."""

import numpy as np
import pytest

import trainer
from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable


def _model(seed=0):
    rng = np.random.default_rng(seed)
    g = trainer.Graph()
    with g.as_default():
        ids = trainer.placeholder(np.int64, (None,), name="ids")
        y = trainer.placeholder(np.float32, (None,), name="y")
        emb = partitioned_variable("emb", (50, 4), initializer=rng.standard_normal((50, 4)).astype(np.float32) * 0.1,
                                   partitioner=fixed_size_partitioner(2))
        w = trainer.Variable(rng.standard_normal((4, 1)).astype(np.float32), name="w")
        pred = trainer.reshape(trainer.matmul(trainer.nn.embedding_lookup(emb, ids, partition_strategy="div"), w), [-1])
        loss = trainer.reduce_mean(trainer.square(pred - y))
    return g, ids, y, emb, w, loss


def test_distbelief_steps_equal_plain_sgd():
    batches = [(np.asarray([1, 7, 7, 30], np.int64), np.asarray([1, 0, 0, 2], np.float32)),
               (np.asarray([49, 0], np.int64), np.asarray([3, -1], np.float32))]
    results = []
    for mode in ("sgd", "distbelief"):
        g, ids, y, emb, w, loss = _model()
        with g.as_default():
            step = trainer.train.get_or_create_global_step()
            if mode == "sgd":
                train = trainer.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
            else:
                db = trainer.train.DistBeliefTrainer(loss, 0.5, global_step=step)
            init = trainer.global_variables_initializer()
        with trainer.Session(g) as sess:
            sess.run(init)
            for xs, ys in batches * 3:
                if mode == "sgd":
                    sess.run(train, {ids: xs, y: ys})
                else:
                    db.step(sess, {ids: xs, y: ys})
            results.append((sess.run(emb.as_tensor()), sess.run(w), sess.run(step)))
    (e1, w1, s1), (e2, w2, s2) = results
    np.testing.assert_allclose(e2, e1, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(w2, w1, rtol=1e-5, atol=1e-7)
    assert s1 == s2 == 6


def test_distbelief_moves_every_parameter_and_gradient():
    g, ids, y, emb, w, loss = _model()
    with g.as_default():
        db = trainer.train.DistBeliefTrainer(loss, 0.1)
    assert db.bytes_per_step == 2 * (50 * 4 + 4) * 4
    put_ops = [n for n in g.nodes if n.op_type == "ApplyGradientDescent"]
    assert all(n.device == n.inputs[0].node.device for n in put_ops) and len(put_ops) == 3
    with trainer.Session(g) as sess:
        sess.run(trainer.variables_initializer(trainer.global_variables(g)))
        params = db.get(sess)
        _, grads = db.compute(sess, params, {ids: np.asarray([3], np.int64), y: np.asarray([1.0], np.float32)})
    assert [gr.shape for gr in grads] == [(25, 4), (25, 4), (4, 1)]  # dense, whole shards
    assert np.count_nonzero(grads[0].any(axis=1)) == 1  # one row had gradient; all 25 travel


def test_a_loss_that_ignores_a_variable_is_refused():
    g = trainer.Graph()
    with g.as_default():
        a = trainer.Variable(np.ones(2, np.float32), name="a")
        trainer.Variable(np.ones(2, np.float32), name="unused")
        with pytest.raises(ValueError, match="unused"):
            trainer.train.DistBeliefTrainer(trainer.reduce_sum(a), 0.1)
