"""The fused whole-sequence LSTM (LSTMBlockFused, trainer.layers.LSTMBlockFusedCell) against the
per-step graph it replaces (dynamic_rnn over LSTMCells) and against finite differences."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as T
from schemas.registry import ShapeError

STEPS, BATCH, INPUT, HIDDEN = 5, 4, 3, 6


def _two_layers(fused: bool, input_grad: bool):
    """Loss, its gradients (variables, initial states[, input]) and the feeds' placeholders."""
    g = T.Graph()
    with g.as_default():
        T.init.set_seed(7)
        xs = T.placeholder(np.float64, (STEPS, BATCH, INPUT), name="xs")
        states = [tuple(T.placeholder(np.float64, (BATCH, HIDDEN), name=f"s{k}") for k in range(j, j + 2))
                  for j in (0, 2)]
        if fused:
            l1 = T.layers.LSTMBlockFusedCell(HIDDEN, INPUT, name="a", dtype=np.float64)
            l2 = T.layers.LSTMBlockFusedCell(HIDDEN, HIDDEN, name="b", dtype=np.float64)
            y1, (h1, c1) = l1(xs, states[0])
            y2, (h2, c2) = l2(y1, states[1])
            out = h2
        else:
            cell = T.layers.MultiRNNCell([T.layers.LSTMCell(HIDDEN, INPUT, name="a", dtype=np.float64),
                                          T.layers.LSTMCell(HIDDEN, HIDDEN, name="b", dtype=np.float64)])
            out, ((h1, c1), (h2, c2)) = T.layers.dynamic_rnn(cell, xs, tuple(states))
        loss = T.reduce_sum(out * out) + T.reduce_sum(c2) + T.reduce_sum(c1 * h1) + T.reduce_sum(h1)
        wrt = T.trainable_variables() + [t for s in states for t in s] + ([xs] if input_grad else [])
        grads = T.gradients(loss, wrt)
        init = T.global_variables_initializer()
    return g, init, xs, states, [loss, out, h1, c1, h2, c2] + grads


@pytest.mark.parametrize("input_grad", [True, False])
def test_fused_layer_matches_dynamic_rnn_of_lstm_cells(input_grad):
    rng = np.random.default_rng(3)
    data = rng.normal(size=(STEPS, BATCH, INPUT))
    initial = rng.normal(size=(4, BATCH, HIDDEN)) * 0.5
    results = []
    for fused in (True, False):
        g, init, xs, states, fetches = _two_layers(fused, input_grad)
        s = T.Session(g)
        s.run(init)
        feed = {xs: data, **{t: initial[k] for k, t in enumerate(t for st in states for t in st)}}
        results.append(s.run(fetches, feed))
    assert len(results[0]) == len(results[1])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("steps", [1, STEPS])
def test_whole_sequence_and_final_state_gradients_match_finite_differences(steps):
    rng = np.random.default_rng(5)
    values = [rng.uniform(-1, 1, size=s) for s in
              [(steps, 2, INPUT), (2, HIDDEN), (2, HIDDEN), (INPUT + HIDDEN, 4 * HIDDEN), (4 * HIDDEN,)]]
    weights = [rng.uniform(-1, 1, size=s) for s in [(steps, 2, HIDDEN), (2, HIDDEN), (2, HIDDEN)]]
    g = T.Graph()
    with g.as_default():
        phs = [T.placeholder(np.float64, v.shape) for v in values]
        y, h, c = T.make_op("LSTMBlockFused", phs, {"forget_bias": 0.5}, domain="flowstack").outputs[:3]
        loss = T.add_n([T.reduce_sum(t * w) for t, w in zip((y, h, c), weights)])
        grads = T.gradients(loss, phs)
    s = T.Session(g)
    feed = dict(zip(phs, values))
    analytic = s.run(grads, feed)
    for k, v in enumerate(values):
        num = np.zeros_like(v)
        for j in range(v.size):
            bumped = []
            for eps in (1e-6, -1e-6):
                x = v.copy()
                x.reshape(-1)[j] += eps
                bumped.append(s.run(loss, {**feed, phs[k]: x}))
            num.reshape(-1)[j] = (bumped[0] - bumped[1]) / 2e-6
        np.testing.assert_allclose(analytic[k], num, rtol=1e-5, atol=1e-7, err_msg=f"input {k}")


def test_checkpoint_of_lstm_cells_restores_into_fused_layer(tmp_path):
    data = np.random.default_rng(0).standard_normal((STEPS, BATCH, INPUT)).astype(np.float32)
    finals, path = [], str(tmp_path / "m")
    for fused in (False, True):
        g = T.Graph()
        with g.as_default():
            xs = T.placeholder(np.float32, (STEPS, BATCH, INPUT))
            if fused:
                cell = T.layers.LSTMBlockFusedCell(HIDDEN, INPUT, name="rnn_cell")
                _, (h, _) = cell(xs, cell.zero_state(BATCH))
            else:
                cell = T.layers.LSTMCell(HIDDEN, INPUT, name="rnn_cell")
                h, _ = T.layers.dynamic_rnn(cell, xs, cell.zero_state(BATCH))
            init, saver = T.global_variables_initializer(), T.Saver()
        s = T.Session(g)
        s.run(init)
        if fused:
            saver.restore(s, path)
        else:
            path = saver.save(s, path, global_step=1)
        finals.append(s.run(h, {xs: data}))
    np.testing.assert_allclose(finals[1], finals[0], rtol=1e-5, atol=1e-6)


def test_fused_layer_trains():
    g = T.Graph()
    with g.as_default():
        T.init.set_seed(0)
        xs = T.placeholder(np.float32, (6, 8, 3))
        y = T.placeholder(np.float32, (8, 1))
        l1, l2 = T.layers.LSTMBlockFusedCell(8, 3, name="l1"), T.layers.LSTMBlockFusedCell(8, 8, name="l2")
        seq, _ = l1(xs, l1.zero_state(8))
        _, (h, _) = l2(seq, l2.zero_state(8))
        loss = T.losses.mean_squared_error(y, T.layers.dense(h, 1))
        train = T.train.AdamOptimizer(0.05).minimize(loss)
        init = T.global_variables_initializer()
    rng = np.random.default_rng(0)
    data = rng.normal(size=(6, 8, 3)).astype(np.float32)
    feed = {xs: data, y: data.sum(axis=(0, 2))[:, None] * 0.1}
    s = T.Session(g)
    s.run(init)
    first = s.run(loss, feed)
    for _ in range(60):
        s.run(train, feed)
    assert s.run(loss, feed) < first * 0.2


@pytest.mark.parametrize("shape, message", [
    ((BATCH, INPUT), r"x must be \[time, batch, input\], got shape \(4, 3\)"),
    ((STEPS, BATCH, INPUT + 2), r"W has 9 rows but x \(5, 4, 5\) \(input size 5\) and hidden size 6 need 11"),
])
def test_bad_input_is_refused_at_build_time_naming_the_shapes(shape, message):
    g = T.Graph()
    with g.as_default():
        cell = T.layers.LSTMBlockFusedCell(HIDDEN, INPUT)
        with pytest.raises(ShapeError, match=message):
            cell(T.placeholder(np.float32, shape), cell.zero_state(BATCH))


def test_initial_state_of_another_batch_is_refused():
    g = T.Graph()
    with g.as_default():
        cell = T.layers.LSTMBlockFusedCell(HIDDEN, INPUT)
        with pytest.raises(ShapeError, match=r"h0 of shape \(2, 6\) does not match x \(5, 4, 3\)"):
            cell(T.placeholder(np.float32, (STEPS, BATCH, INPUT)), cell.zero_state(2))


def test_saved_outputs_are_not_differentiable():
    g = T.Graph()
    with g.as_default():
        cell = T.layers.LSTMBlockFusedCell(HIDDEN, INPUT)
        xs = T.placeholder(np.float32, (STEPS, BATCH, INPUT))
        y, _ = cell(xs, cell.zero_state(BATCH))
        gates = y.node.outputs[3]
        with pytest.raises(T.GraphError, match="gates, cs and co are saved for the gradient"):
            T.gradients(T.reduce_sum(gates), [xs])
