"""cond and while_loop: values, dead branches, frames, and gradients (a while-loop RNN against
the same RNN unrolled)."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T
from tests.trainer.plan_compiles import count_compiles


def test_cond_takes_one_branch_and_skips_the_other():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (), name="x")
        p = T.placeholder(np.bool_, (), name="p")
        counter = T.Variable(np.float32(0.0), name="side_effects")

        def true_fn():
            return x * 3.0

        def false_fn():
            with T.control_dependencies([counter.assign_add(np.float32(1.0))]):
                return x * x

        y = T.cond(p, true_fn, false_fn)
        (dy,) = T.gradients(y, [x])
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    assert s.run([y, dy], {x: 2.0, p: True}) == [6.0, 3.0]
    assert s.run(counter) == 0.0  # the untaken branch's update never ran
    assert s.run([y, dy], {x: 2.0, p: False}) == [4.0, 4.0]
    assert s.run(counter) == 1.0


def test_a_cond_under_control_dependencies_still_takes_one_branch():
    # Constants in the branches wait for the update outside and for their branch's pivot.
    g = T.Graph()
    with g.as_default():
        delta = T.placeholder(np.float32, (), name="delta")
        v = T.Variable(np.float32(0.0), name="v")
        with T.control_dependencies([v.assign_add(delta)]):
            y = T.cond(delta > 0, lambda: T.constant(1.0), lambda: T.constant(-1.0))
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    assert [float(s.run(y, {delta: d})) for d in (2.0, -0.5)] == [1.0, -1.0]
    assert float(s.run(v)) == 1.5


def _adam_model(guarded: bool):
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (2,), name="x")
        w = T.Variable(np.ones(2, np.float32), name="w")
        loss = T.reduce_sum(T.square(w * x - 1.0))
        opt = T.train.AdamOptimizer(0.1)
        if guarded:  # apply only finite gradients: the slots and Adam's beta powers are made in a branch
            grads = opt.compute_gradients(loss)

            def apply():
                with T.control_dependencies([opt.apply_gradients(grads)]):
                    return T.constant(True)
            train = T.cond(T.reduce_all(T.is_finite(grads[0][0])), apply, lambda: T.constant(False))
        else:
            train = opt.minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)  # (needs no feed: initializers are built outside the cond)
    return s, x, w, train


def test_an_optimizer_applied_inside_a_cond_matches_minimize_on_the_steps_it_takes():
    s, x, w, train = _adam_model(guarded=True)
    ref, ref_x, ref_w, ref_train = _adam_model(guarded=False)
    for xv in ([1, 2], [np.nan, 1], [3, -1]):
        xv = np.asarray(xv, np.float32)
        applied = bool(s.run(train, {x: xv}))
        assert applied == bool(np.isfinite(xv).all())
        if applied:
            ref.run(ref_train, {ref_x: xv})
        np.testing.assert_allclose(s.run(w), ref.run(ref_w), rtol=1e-6)


@pytest.fixture(params=[True, False], ids=["fused_loops", "dataflow_frames"])
def fuse(request):
    return request.param


def test_while_loop_value_and_gradient(fuse):
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        i, acc = T.while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, a * x),
                              [T.constant(0), T.constant(np.float64(1.0))])
        (dx,) = T.gradients(acc, [x])
    s = T.Session(g, fuse_loops=fuse)
    assert s.run([i, acc], {x: 2.0}) == [5, 32.0]
    assert s.run(dx, {x: 2.0}) == 80.0


def test_nested_cond_in_loop():
    g = T.Graph()
    with g.as_default():
        n = T.placeholder(np.int64, (), name="n")

        def body(i, total):
            step = T.cond(T.equal(T.make_op("Mod", [i, np.int64(2)]).outputs[0], np.int64(0)),
                          lambda: total + i, lambda: total - i)
            return i + np.int64(1), step

        _, total = T.while_loop(lambda i, t: i < n, body, [T.constant(np.int64(0)), T.constant(np.int64(0))])
    assert T.Session(g).run(total, {n: np.int64(6)}) == 0 - 1 + 2 - 3 + 4 - 5


def _rnn_graph(unrolled: bool, steps=4, batch=3, dim=2, hidden=5):
    rng = np.random.default_rng(1)
    g = T.Graph()
    with g.as_default():
        xs = T.placeholder(np.float64, (steps, batch, dim), name="xs")
        w = T.Variable(rng.normal(size=(dim, hidden)) * 0.5, name="w")
        u = T.Variable(rng.normal(size=(hidden, hidden)) * 0.5, name="u")
        h0 = T.constant(np.zeros((batch, hidden)))

        def cell(x, h):
            return T.tanh(T.matmul(x, w) + T.matmul(h, u))

        if unrolled:
            h = h0
            for t in range(steps):
                h = cell(xs[t], h)
        else:
            n = T.constant(np.int64(steps))
            _, h = T.while_loop(lambda t, h: T.less(t, n),
                                lambda t, h: (t + np.int64(1), cell(T.gather(xs, t, axis=0), h)),
                                [T.constant(np.int64(0)), h0])
        loss = T.reduce_sum(h * h)
        grads = T.gradients(loss, [w, u, xs])
        init = T.global_variables_initializer()
    return g, xs, loss, grads, init


def test_while_loop_rnn_gradient_matches_unrolled(fuse):
    feed = np.random.default_rng(2).normal(size=(4, 3, 2))
    results = []
    for unrolled in (True, False):
        g, xs, loss, grads, init = _rnn_graph(unrolled)
        s = T.Session(g, fuse_loops=fuse)
        s.run(init)
        results.append(s.run([loss] + grads, {xs: feed}))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_lstm_over_while_loop_trains():
    g = T.Graph()
    with g.as_default():
        T.init.set_seed(0)
        xs = T.placeholder(np.float32, (6, 8, 3), name="xs")
        y = T.placeholder(np.float32, (8, 1), name="y")
        cell = T.layers.MultiRNNCell([T.layers.LSTMCell(8, 3, name="l1"), T.layers.LSTMCell(8, 8, name="l2")])
        out, _ = T.layers.dynamic_rnn(cell, xs, cell.zero_state(8))
        pred = T.layers.dense(out, 1)
        loss = T.losses.mean_squared_error(y, pred)
        train = T.train.AdamOptimizer(0.05).minimize(loss)
        init = T.global_variables_initializer()
    rng = np.random.default_rng(0)
    data = rng.normal(size=(6, 8, 3)).astype(np.float32)
    target = data.sum(axis=(0, 2))[:, None].astype(np.float32) * 0.1
    s = T.Session(g)
    s.run(init)
    first = s.run(loss, {xs: data, y: target})
    for _ in range(60):
        s.run(train, {xs: data, y: target})
    assert s.run(loss, {xs: data, y: target}) < first * 0.2


def test_loop_structure_is_recorded_for_exporters():
    g = T.Graph()
    with g.as_default():
        T.while_loop(lambda i: i < 3, lambda i: i + 1, [T.constant(0)])
    (loop,) = g.loops
    d = loop.to_dict()
    assert d["loop_cond"].endswith("loop_cond") and len(d["enters"]) == 2  # the variable + the iteration counter


def test_while_loop_shape_change_is_reported():
    g = T.Graph()
    with g.as_default(), pytest.raises(T.GraphError, match=r"loop variable 0 enters the loop with shape \(2,\) but "
                                                          r"has shape \(4,\) after one iteration.*shape_invariants"):
        T.while_loop(lambda x: T.reduce_sum(x) < 10.0, lambda x: T.concat([x, x], axis=0),
                     [T.constant(np.ones(2, np.float32))])


def test_simple_loops_become_one_step_unless_asked_not_to(monkeypatch):
    g, xs, loss, grads, init = _rnn_graph(False)
    compiles = count_compiles(monkeypatch)
    kinds = []
    for fuse_loops in (True, False):
        s = T.Session(g, fuse_loops=fuse_loops)
        s.run(init)
        s.run(grads, {xs: np.zeros((4, 3, 2))})
        kinds.append(type(compiles[-1].plan).__name__)
    assert kinds == ["FlatPlan", "DataflowPlan"]


@pytest.mark.parametrize("input_grad", [True, False])
def test_fused_lstm_cell_matches_composed_cell(fuse, input_grad):
    # Without the input's gradient the first layer's cell gradient skips dx (need_dx=0).
    results = []
    rng = np.random.default_rng(3)
    data = rng.normal(size=(5, 4, 3))
    for fused in (True, False):
        g = T.Graph()
        with g.as_default():
            T.init.set_seed(7)
            xs = T.placeholder(np.float64, (5, 4, 3))
            cell = T.layers.MultiRNNCell([T.layers.LSTMCell(6, 3, name="a", dtype=np.float64, fused=fused),
                                          T.layers.LSTMCell(6, 6, name="b", dtype=np.float64, fused=fused)])
            out, ((h1, c1), (h2, c2)) = T.layers.dynamic_rnn(cell, xs, cell.zero_state(4, np.float64))
            loss = T.reduce_sum(out * out) + T.reduce_sum(c2) + T.reduce_sum(c1 * h1)
            grads = T.gradients(loss, T.trainable_variables() + ([xs] if input_grad else []))
            init = T.global_variables_initializer()
        if fused:
            need_dx = sorted(n.attrs["need_dx"] for n in g._nodes if n.op_type == "LSTMBlockCellGrad")
            assert need_dx == ([1, 1] if input_grad else [0, 1])
        s = T.Session(g, fuse_loops=fuse)
        s.run(init)
        results.append(s.run([loss] + grads, {xs: data}))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_control_flow_structure_survives_export(tmp_path):
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (), name="x")
        y = T.cond(T.less(x, 0.0), lambda: -x, lambda: x * 2.0)
        T.while_loop(lambda i: i < 3, lambda i: i + 1, [T.constant(0)])
    T.export_graph(g, str(tmp_path / "graph.npz"))
    g2 = T.import_graph(str(tmp_path))
    assert g2.imported_conds[0]["merges"] == [y.node.name]
    assert "x:0" in g2.imported_conds[0]["true_inputs"]
    assert g2.imported_loops[0]["loop_cond"] == g.loops[0].loop_cond.name
    s = T.Session(g2)
    assert s.run("cond/merge:0", {"x:0": -3.0}) == 3.0 and s.run("cond/merge:0", {"x:0": 3.0}) == 6.0
    assert s.run("while/exit:0") == 3  # the imported loop runs on the frame executor


def test_two_gradients_of_one_loop(fuse):
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, (), name="x")
        _, acc = T.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, T.make_op("Sin", [a * x]).outputs[0]),
                              [T.constant(0), T.constant(np.float64(0.7))])
        (d1,) = T.gradients(acc, [x])
        (d2,) = T.gradients(acc * 2.0, [x])
    s = T.Session(g, fuse_loops=fuse)
    v1, v2 = s.run([d1, d2], {x: 0.9})
    eps = 1e-6
    num = (s.run(acc, {x: 0.9 + eps}) - s.run(acc, {x: 0.9 - eps})) / (2 * eps)
    assert np.isclose(v1, num, rtol=1e-6) and np.isclose(v2, 2 * num, rtol=1e-6)


def test_non_differentiable_loop_says_so():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, ())
        _, y = T.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, a * x), [T.constant(0), x],
                            back_prop=False)
        with pytest.raises(T.GraphError, match="built with back_prop=False: nothing can be differentiated"):
            T.gradients(y, [x])
    assert T.Session(g).run(y, {x: 3.0}) == 27.0


def test_nested_loop_gradient_is_refused_not_wrong():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float64, ())

        def outer_body(i, a):
            _, inner = T.while_loop(lambda j, b: j < 2, lambda j, b: (j + 1, b * x), [T.constant(0), a])
            return i + 1, inner

        _, y = T.while_loop(lambda i, a: i < 2, outer_body, [T.constant(0), x])
        with pytest.raises(NotImplementedError, match="nested"):
            T.gradients(y, [x])
    assert T.Session(g).run(y, {x: 2.0}) == 32.0
