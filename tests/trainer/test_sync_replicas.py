"""SyncReplicasOptimizer in one process: replicas are threads on one Session.

The applied update is the mean of the first m gradients of a step, stale and surplus gradients
are dropped, a replica that stops mid-run hangs nobody, and every wait ends by its timeout."""

import threading
import time

import numpy as np
import pytest

import trainer
from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable

TIMEOUT = 1.0


def _accumulator_graph(sparse=False):
    g = trainer.Graph()
    with g.as_default():
        kind = trainer.SparseConditionalAccumulator if sparse else trainer.ConditionalAccumulator
        acc = kind(np.float32, (4, 2), max_accumulated=2)
        step = trainer.placeholder(np.int64, (), name="step")
        if sparse:
            like = trainer.Variable(np.zeros((4, 2), np.float32), name="like")
            idx = trainer.placeholder(np.int64, (None,), name="idx")
            rows = trainer.placeholder(np.float32, (None, 2), name="rows")
            apply = acc.apply_grad(trainer.IndexedSlices(rows, idx, dense_like=like.tensor), step)
            taken = acc.take_indexed_slices_grad(2, like.tensor, timeout=TIMEOUT)
            out = {"apply": apply, "take": [taken.indices, taken.values], "feeds": (idx, rows)}
        else:
            grad = trainer.placeholder(np.float32, (4, 2), name="grad")
            out = {"apply": acc.apply_grad(grad, step), "take": acc.take_grad(2, timeout=TIMEOUT), "feeds": (grad,)}
        out.update(step=step, count=acc.num_accumulated(), set_step=acc.set_global_step(step))
    return g, out


def test_accumulator_means_the_first_m_and_drops_stale_and_surplus():
    g, ops = _accumulator_graph()
    grad = ops["feeds"][0]
    with trainer.Session(g) as sess:
        run = lambda value, step: sess.run(ops["apply"], {grad: np.full((4, 2), value, np.float32), ops["step"]: step})  # noqa: E731
        sess.run(ops["set_step"], {ops["step"]: 5})
        run(100.0, 4)  # computed at an older step: stale, dropped
        assert sess.run(ops["count"]) == 0
        run(1.0, 5)
        run(3.0, 6)
        run(50.0, 5)  # a third gradient of the step: a backup worker's, past the first m = 2
        assert sess.run(ops["count"]) == 2
        np.testing.assert_array_equal(sess.run(ops["take"]), np.full((4, 2), 2.0, np.float32))
        run(7.0, 5)  # take moved the accumulator to step 6: a step-5 gradient is now stale
        assert sess.run(ops["count"]) == 0
        t0 = time.monotonic()
        with pytest.raises(trainer.DeadlineExceededError, match="0 of 2 gradients"):
            sess.run(ops["take"])
        assert time.monotonic() - t0 < TIMEOUT + 1.0


def test_sparse_accumulator_means_each_row_over_the_gradients_that_touched_it():
    """TensorFlow's SparseConditionalAccumulator averages element-wise: row 1 comes from one
    gradient (its two entries summed), row 3 from two."""
    g, ops = _accumulator_graph(sparse=True)
    idx, rows = ops["feeds"]
    with trainer.Session(g) as sess:
        sess.run(trainer.variables_initializer(trainer.global_variables(g)))
        sess.run(ops["apply"], {idx: [1, 3, 1], rows: np.ones((3, 2), np.float32), ops["step"]: 0})
        sess.run(ops["apply"], {idx: [3], rows: np.full((1, 2), 4.0, np.float32), ops["step"]: 0})
        indices, values = sess.run(ops["take"])
    assert indices.tolist() == [1, 3]
    np.testing.assert_array_equal(values, [[2.0, 2.0], [2.5, 2.5]])  # (1 + 1) / 1 and (1 + 4) / 2


@pytest.mark.parametrize("sparse", [False, True])
def test_reduction_type_sum_adds_without_dividing(sparse):
    g = trainer.Graph()
    with g.as_default():
        kind = trainer.SparseConditionalAccumulator if sparse else trainer.ConditionalAccumulator
        acc = kind(np.float32, (2, 2), reduction_type="SUM")
        if sparse:
            like = trainer.Variable(np.zeros((2, 2), np.float32), name="like")
            grad = trainer.IndexedSlices(trainer.constant(np.ones((1, 2), np.float32)),
                                         trainer.constant(np.asarray([1], np.int64)), dense_like=like.tensor)
            taken = acc.take_indexed_slices_grad(2, like.tensor, timeout=TIMEOUT).values
        else:
            grad = trainer.constant(np.ones((2, 2), np.float32))
            taken = acc.take_grad(2, timeout=TIMEOUT)
        apply = acc.apply_grad(grad, 0)
    with trainer.Session(g) as sess:
        sess.run(apply)
        sess.run(apply)
        np.testing.assert_array_equal(sess.run(taken), np.full((1 if sparse else 2, 2), 2.0, np.float32))


def test_an_unknown_reduction_type_is_refused():
    with trainer.Graph().as_default(), pytest.raises(ValueError, match="reduction_type must be one of"):
        trainer.ConditionalAccumulator(np.float32, (2,), reduction_type="MAX")


def _sync_model(m, n, *, sparse=False, timeout=TIMEOUT):
    """loss = sum(w * x): each replica's gradient is the x it feeds, whatever w is."""
    g = trainer.Graph()
    with g.as_default():
        step = trainer.train.get_or_create_global_step()
        x = trainer.placeholder(np.float32, (3,), name="x")
        w = trainer.Variable(np.zeros(3, np.float32), name="w")
        loss = trainer.reduce_sum(w * x)
        tables = None
        if sparse:
            tables = partitioned_variable("emb", (6, 3), initializer=np.zeros((6, 3), np.float32),
                                          partitioner=fixed_size_partitioner(2))
            ids = trainer.constant(np.asarray([1, 4], np.int64))
            loss = loss + trainer.reduce_sum(trainer.nn.embedding_lookup(tables, ids, partition_strategy="div") * x)
        opt = trainer.train.SyncReplicasOptimizer(trainer.train.GradientDescentOptimizer(1.0), replicas_to_aggregate=m,
                                                  total_num_replicas=n, timeout_secs=timeout)
        train = opt.minimize(loss, global_step=step)
    return g, x, w, tables, step, opt, train


def _run_in_thread(fn, *args):
    errors = []

    def target():
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, errors


def _wait_for_step(sess, step, value, timeout=5.0):
    deadline = time.monotonic() + timeout
    while sess.run(step) < value:
        assert time.monotonic() < deadline, f"global step stuck at {sess.run(step)}, wanted {value}"
        time.sleep(0.01)


def test_update_is_the_mean_of_the_first_m_gradients():
    g, x, w, tables, step, opt, train = _sync_model(m=2, n=3, sparse=True)
    sess = trainer.Session(g)
    sess.run(trainer.variables_initializer(trainer.global_variables(g)))
    hook = opt.make_session_run_hook(is_chief=True, num_tokens=0)
    hook.after_create_session(sess, 0)  # as a MonitoredTrainingSession passing the global step calls it
    try:
        a, err_a = _run_in_thread(sess.run, train, {x: np.asarray([1, 2, 3], np.float32)})
        time.sleep(0.1)
        assert sess.run(step) == 0  # one gradient of the two needed: nothing applied, replica 0 waits
        b, err_b = _run_in_thread(sess.run, train, {x: np.asarray([5, 6, 7], np.float32)})
        a.join(TIMEOUT + 2)
        b.join(TIMEOUT + 2)
        assert not (err_a or err_b) and not a.is_alive() and not b.is_alive()
        _wait_for_step(sess, step, 1)
        np.testing.assert_allclose(sess.run(w), -np.asarray([3, 4, 5], np.float32))  # -mean([1,2,3], [5,6,7])
        table = sess.run(tables.as_tensor())
        np.testing.assert_allclose(table[[1, 4]], -np.asarray([[3, 4, 5]] * 2, np.float32))
        assert (table[[0, 2, 3, 5]] == 0).all()
        # the third replica's gradient (never sent) was not needed; step 1's first gradient is fresh
        assert sess.run(opt.accumulators[0][0].num_accumulated()) == 0
    finally:
        hook.end(sess)
        sess.close()


def test_a_replica_that_stops_mid_run_hangs_nobody():
    target_steps, m, n = 8, 2, 3
    g, x, w, _, step, opt, train = _sync_model(m=m, n=n)
    sess = trainer.Session(g)
    sess.run(trainer.variables_initializer(trainer.global_variables(g)))
    hook = opt.make_session_run_hook(is_chief=True)
    coord = trainer.Coordinator()
    hook.after_create_session(sess, coord)
    feeds = [np.full(3, v, np.float32) for v in (1.0, 2.0, 4.0)]
    longest_wait = [0.0]

    def replica(i, max_steps):
        for _ in range(max_steps):
            if sess.run(step) >= target_steps:
                return
            t0 = time.monotonic()
            try:
                sess.run(train, {x: feeds[i]})
            except trainer.DeadlineExceededError:
                if sess.run(step) < target_steps:  # only the last step may find no partner left
                    raise
            longest_wait[0] = max(longest_wait[0], time.monotonic() - t0)

    t0 = time.monotonic()
    threads = [_run_in_thread(replica, i, steps) for i, steps in enumerate([100, 100, 2])]  # replica 2 stops
    for t, _ in threads:
        t.join(20)
    try:
        assert all(not t.is_alive() for t, _ in threads), "a replica hung"
        assert [e for _, errs in threads for e in errs] == []
        assert sess.run(step) >= target_steps
        assert longest_wait[0] <= TIMEOUT + 1.5  # no step waited past its timeout (plus a loaded host's slack)
        assert time.monotonic() - t0 < 15
        # every step applied the mean of 2 gradients from {1, 2, 4}: w is minus a sum of such means
        total = -sess.run(w)[0]
        steps = int(sess.run(step))
        means = {1.0, 1.5, 2.0, 2.5, 3.0, 4.0}
        assert steps * min(means) - 1e-4 <= total <= steps * max(means) + 1e-4
        assert hook.error is None
    finally:
        hook.end(sess)
        sess.close()


def test_a_worker_without_a_chief_fails_by_its_timeout():
    g, x, w, _, step, opt, train = _sync_model(m=1, n=1, timeout=0.5)
    with trainer.Session(g) as sess:
        sess.run(trainer.variables_initializer(trainer.global_variables(g)))
        t0 = time.monotonic()
        with pytest.raises(trainer.DeadlineExceededError, match="sync_token_q"):
            sess.run(train, {x: np.ones(3, np.float32)})
        assert time.monotonic() - t0 < 2.0


def test_misuse_is_refused():
    g, x, w, _, step, opt, train = _sync_model(m=2, n=2)
    with g.as_default():
        with pytest.raises(ValueError, match="only once"):
            opt.minimize(trainer.reduce_sum(w * x), global_step=step)
        with pytest.raises(ValueError, match="global_step"):
            trainer.train.SyncReplicasOptimizer(trainer.train.GradientDescentOptimizer(1.0), 1).minimize(
                trainer.reduce_sum(w * x))
    with pytest.raises(ValueError, match="replicas_to_aggregate"):
        trainer.train.SyncReplicasOptimizer(trainer.train.GradientDescentOptimizer(1.0), 0)


def test_the_chief_loop_stops_soon_even_with_a_long_timeout():
    g = trainer.Graph()
    with g.as_default():
        w = trainer.Variable(np.ones(3, np.float32), name="w")
        step = trainer.train.get_or_create_global_step()
        opt = trainer.train.SyncReplicasOptimizer(trainer.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=2,
                                                  timeout_secs=60.0)
        opt.minimize(trainer.reduce_sum(w * w), global_step=step)
        hook = opt.make_session_run_hook(is_chief=True)
        init = trainer.global_variables_initializer()
    with trainer.Session(g) as sess:
        sess.run(init)
        hook.after_create_session(sess, None)
        time.sleep(0.2)  # the loop now waits for gradients no replica sends
        t0 = time.monotonic()
        hook.end(sess)
        assert time.monotonic() - t0 < 2.0  # its wait polls; ending does not take timeout_secs
        assert hook.error is None
