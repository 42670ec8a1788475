"""Graph building and Session.run: partial execution, feeds, fetch structures, plan cache,
concurrent steps, and errors that name the node and the expected and actual values."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import trainer as T
from schemas.registry import ShapeError
from tests.trainer.plan_compiles import count_compiles


@pytest.fixture
def g():
    graph = T.Graph()
    with graph.as_default():
        yield graph


def test_partial_execution_runs_only_what_fetches_need(g):
    x = T.placeholder(np.float32, (None, 2), name="x")
    unused = T.placeholder(np.float32, (3,), name="unused")  # never fed, never needed
    y = x * 2.0
    _ = unused + 1.0
    assert np.array_equal(T.Session(g).run(y, {x: np.ones((1, 2), np.float32)}), [[2, 2]])


def test_feed_any_tensor_overrides_it(g):
    a = T.constant(np.float32(3.0))
    b = a * 2.0
    c = b + 1.0
    sess = T.Session(g)
    assert sess.run(c) == 7.0
    assert sess.run(c, {b: np.float32(10.0)}) == 11.0


def test_fetch_structures(g):
    a = T.constant(np.float32(1.0))
    b = a + 1.0
    noop = T.no_op()
    sess = T.Session(g)
    assert sess.run([a, b]) == [1.0, 2.0]
    assert sess.run((a, b)) == (1.0, 2.0)
    assert sess.run({"a": a, "nested": [b, {"b": b}]}) == {"a": 1.0, "nested": [2.0, {"b": 2.0}]}
    assert sess.run(noop) is None
    assert sess.run([b, noop]) == [2.0, None]
    assert sess.run(b.name) == 2.0


def test_plan_is_cached_per_fetches_and_feeds(g, monkeypatch):
    compiles = count_compiles(monkeypatch)
    x = T.placeholder(np.float32, ())
    y = x + 1.0
    sess = T.Session(g)
    assert sess.run(y, {x: 1.0}) == 2.0 and sess.run(y, {x: 2.0}) == 3.0
    assert len(compiles) == 1  # the same fetches and feed keys: the plan is reused
    assert sess.run([y], {x: 2.0}) == [3.0]
    assert sess.run(y, {y: 5.0}) == 5.0
    assert len(compiles) == 3  # another fetch structure, another feed key: a plan each


def test_variables_update_in_place_and_fetch_is_a_copy(g):
    v = T.Variable(np.zeros(3, np.float32), name="v")
    inc = v.assign_add(np.ones(3, np.float32))
    sess = T.Session(g)
    sess.run(T.global_variables_initializer())
    before = sess.run(v)
    buf = sess.state.variables["v"]
    sess.run(inc)
    sess.run(inc)
    assert sess.state.variables["v"] is buf  # updated in place
    assert np.array_equal(before, [0, 0, 0]) and np.array_equal(sess.run(v), [2, 2, 2])


def test_uninitialized_variable_names_it(g):
    v = T.Variable(np.zeros(2, np.float32), name="weights")
    with pytest.raises(T.FailedPreconditionError, match="weights"):
        T.Session(g).run(v + 1.0)


def test_concurrent_runs_share_variables(g):
    v = T.Variable(np.zeros((), np.float64), name="counter")
    x = T.placeholder(np.float64, ())
    y = x * 3.0
    lock_free_inc = v.assign_add(np.float64(1.0))
    sess = T.Session(g)
    sess.run(T.global_variables_initializer())
    errors = []

    def work(i):
        try:
            for j in range(200):
                assert sess.run(y, {x: float(i * 1000 + j)}) == 3.0 * (i * 1000 + j)
                sess.run(lock_free_inc)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # Every thread's increments land in the one variable. None is lost: adding to a one-element
    # array holds the GIL (NumPy releases it only for large arrays), so "lock free" is still atomic.
    assert sess.run(v) == 800


def test_shape_error_at_build_names_op_and_shapes(g):
    a = T.placeholder(np.float32, (None, 3), name="a")
    b = T.placeholder(np.float32, (4, 5), name="b")
    with pytest.raises(ShapeError, match=r"MatMul.*\(None, 3\).*\(4, 5\)"):
        T.matmul(a, b)


def test_wrong_feed_shape_and_dtype(g):
    x = T.placeholder(np.float32, (None, 3), name="images")
    y = x + 1.0
    sess = T.Session(g)
    with pytest.raises(ValueError, match=r"shape \(2, 4\).*images:0.*\(\?, 3\)"):
        sess.run(y, {x: np.zeros((2, 4), np.float32)})
    with pytest.raises(TypeError, match=r"dtype bool.*images:0.*float32"):
        sess.run(y, {x: np.zeros((2, 3), bool)})
    # same-kind casts are fine (float64 -> float32), as are Python lists
    assert sess.run(y, {x: [[1.0, 2.0, 3.0]]}).dtype == np.float32


def test_missing_feed_names_the_placeholder(g):
    x = T.placeholder(np.float32, (2,), name="needed")
    y = x * 2.0
    with pytest.raises(T.GraphError, match="placeholder 'needed:0'.*must be fed"):
        T.Session(g).run(y)


def test_tensor_from_another_graph(g):
    other = T.Graph()
    with other.as_default():
        foreign = T.constant(1.0, name="foreign")
    with pytest.raises(T.GraphError, match="foreign:0.*another graph"):
        T.Session(g).run(foreign)
    with pytest.raises(T.GraphError, match="foreign:0.*another graph"):
        T.constant(2.0) + foreign


def test_cycle_without_loop_construct(g):
    a = T.placeholder(np.float32, (), name="a")
    b = T.add(a, 1.0, name="b")
    c = T.add(b, 1.0, name="c")
    b.node.inputs[0] = c  # wire a cycle by hand
    with pytest.raises(T.GraphError, match="cycle.*'b'"):
        T.Session(g).run(c)


def test_kernel_failure_names_node(g):
    x = T.placeholder(np.float32, (None,), name="x")
    idx = T.placeholder(np.int64, (None,), name="idx")
    y = T.gather(x, idx, name="lookup")
    with pytest.raises(Exception, match="lookup"):
        T.Session(g).run(y, {x: np.zeros(2, np.float32), idx: np.asarray([5])})


def test_name_scopes_and_collections(g):
    with T.name_scope("layer"):
        v = T.Variable(np.zeros(2, np.float32), name="w")
        c = T.constant(1.0, name="c")
    with T.name_scope("layer"):
        c2 = T.constant(1.0, name="c")
    assert v.name == "layer/w:0" and v.op.name == "layer/w" and c.node.name == "layer/c" and c2.node.name == "layer_1/c"
    assert T.trainable_variables() == [v]
    frozen = T.Variable(np.zeros(2, np.float32), trainable=False)
    assert frozen in T.global_variables() and frozen not in T.trainable_variables()


def test_control_dependencies_order_updates(g):
    v = T.Variable(np.float32(1.0), name="v")
    upd = v.assign(np.float32(5.0))
    with T.control_dependencies([upd]):
        read = T.identity(v.value())
    sess = T.Session(g)
    sess.run(T.global_variables_initializer())
    assert sess.run(read) == 5.0


def test_repeated_runs_compile_once(g, monkeypatch):
    # What keeps a run's overhead small (benchmarks/train_vs_peers.py reports the figure): after
    # the first run, a step only looks its plan up.
    compiles = count_compiles(monkeypatch)
    noop = T.no_op()
    v = T.Variable(np.float32(0.0), name="v")
    inc = v.assign_add(np.float32(1.0))
    sess = T.Session(g)
    sess.run(T.global_variables_initializer())
    for _ in range(50):
        assert sess.run(noop) is None
        sess.run(inc)
    assert sess.run(v) == 50.0
    assert len(compiles) == 4  # the initializer, noop, inc and v, once each


def test_parallel_ops_give_the_same_training_step():
    results = []
    for parallel in (False, True):
        g = T.Graph()
        with g.as_default():
            T.init.set_seed(0)
            x = T.placeholder(np.float32, (None, 1, 8, 8))
            y = T.placeholder(np.int64, (None,))
            h = T.layers.conv2d(x, 8, 3, padding="same", activation="relu", name="c1", data_format="channels_first")
            h = T.layers.conv2d(h, 8, 3, padding="same", activation="relu", name="c2", data_format="channels_first")
            logits = T.layers.dense(T.layers.flatten(h), 10)
            loss = T.losses.sparse_softmax_cross_entropy(y, logits)
            train = T.train.AdamOptimizer(0.01).minimize(loss)
            init = T.global_variables_initializer()
        s = T.Session(g, parallel_ops=parallel)
        s.run(init)
        rng = np.random.default_rng(0)
        feed = {x: rng.normal(size=(16, 1, 8, 8)).astype(np.float32), y: rng.integers(0, 10, 16)}
        for _ in range(3):
            s.run(train, feed)
        results.append(s.run(loss, feed))
    assert results[0] == results[1]


def test_with_session_makes_it_the_default_for_eval_and_run_as_tf1_scripts_expect(g):
    v = T.Variable(np.zeros(2, np.float32), name="v")
    bump = v.assign_add(np.ones(2, np.float32))
    with T.Session(g) as sess:
        assert T.get_default_session() is sess
        v.initializer.run()
        bump.op.run()
        np.testing.assert_array_equal(v.eval(), [1.0, 1.0])
        inner = T.Session(g)
        with inner.as_default():
            assert T.get_default_session() is inner
            v.initializer.run()  # runs in inner: its own variables
            np.testing.assert_array_equal(v.eval(), [0.0, 0.0])
        assert T.get_default_session() is sess and v.eval()[0] == 1.0
    assert T.get_default_session() is None
    with pytest.raises(ValueError, match="no default session"):
        v.eval()


def test_variables_made_under_control_dependencies_initialize_without_them(g):
    x = T.placeholder(np.float32, (2,), name="x")
    step = T.identity(x * 2.0)
    with T.control_dependencies([step]):  # TF's init_scope: creation ignores these
        v = T.Variable(np.ones(2, np.float32), name="v")
        with T.variable_scope("s"):
            u = T.get_variable("u", [2], initializer=T.random_normal_initializer())
        read = v + 1.0
    sess = T.Session(g)
    sess.run(T.global_variables_initializer())  # needs no feed of x
    assert not v.initializer.control_inputs and sess.run(u).shape == (2,)
    assert read.op.control_inputs == [step.op]  # ordinary ops still wait
