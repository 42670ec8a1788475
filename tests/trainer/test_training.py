"""Optimizers against NumPy references, clipping, schedules, layers (batch norm, dropout,
embedding), losses, metrics, and the package layering."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import trainer as T

ROOT = Path(__file__).resolve().parents[2]


def _quadratic(opt_factory, steps=3):
    g = T.Graph()
    with g.as_default():
        w = T.Variable(np.asarray([1.0, -2.0, 3.0]), name="w")
        target = T.constant(np.asarray([0.5, 0.5, 0.5]))
        loss = T.reduce_sum(T.square(w - target))
        train = opt_factory().minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    for _ in range(steps):
        s.run(train)
    return s.run(w)


def _reference(update, steps=3):
    w = np.asarray([1.0, -2.0, 3.0])
    state = {}
    for t in range(1, steps + 1):
        g = 2 * (w - 0.5)
        w = update(w, g, state, t)
    return w


@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "adam", "adagrad", "rmsprop"])
def test_optimizer_matches_reference(name):
    lr = 0.1

    def sgd(w, g, s, t):
        return w - lr * g

    def momentum(w, g, s, t, nesterov=False):
        s["a"] = 0.9 * s.get("a", 0) + g
        return w - lr * (g + 0.9 * s["a"]) if nesterov else w - lr * s["a"]

    def adam(w, g, s, t):
        s["m"] = 0.9 * s.get("m", 0) + 0.1 * g
        s["v"] = 0.999 * s.get("v", 0) + 0.001 * g * g
        alpha = lr * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        return w - alpha * s["m"] / (np.sqrt(s["v"]) + 1e-8)

    def adagrad(w, g, s, t):
        s["a"] = s.get("a", 0.1) + g * g
        return w - lr * g / np.sqrt(s["a"])

    def rmsprop(w, g, s, t):
        s["ms"] = 0.9 * s.get("ms", 1.0) + 0.1 * g * g
        s["mom"] = 0.0 * s.get("mom", 0) + lr * g / np.sqrt(s["ms"] + 1e-10)
        return w - s["mom"]

    cases = {
        "sgd": (lambda: T.train.GradientDescentOptimizer(lr), sgd),
        "momentum": (lambda: T.train.MomentumOptimizer(lr, 0.9), momentum),
        "nesterov": (lambda: T.train.MomentumOptimizer(lr, 0.9, use_nesterov=True),
                     lambda w, g, s, t: momentum(w, g, s, t, True)),
        "adam": (lambda: T.train.AdamOptimizer(lr), adam),
        "adagrad": (lambda: T.train.AdagradOptimizer(lr), adagrad),
        "rmsprop": (lambda: T.train.RMSPropOptimizer(lr), rmsprop),
    }
    factory, ref = cases[name]
    np.testing.assert_allclose(_quadratic(factory), _reference(ref), rtol=1e-6)


def test_clip_by_global_norm_and_compute_apply():
    g = T.Graph()
    with g.as_default():
        w = T.Variable(np.asarray([3.0, 4.0]), name="w")
        loss = T.reduce_sum(w * w) * 0.5  # gradient = w, norm 5
        opt = T.train.GradientDescentOptimizer(1.0)
        grads, variables = zip(*opt.compute_gradients(loss))
        clipped, norm = T.train.clip_by_global_norm(list(grads), 1.0)
        step = T.train.get_or_create_global_step()
        train = opt.apply_gradients(zip(clipped, variables), global_step=step)
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    assert np.isclose(s.run(norm), 5.0)
    s.run(train)
    np.testing.assert_allclose(s.run(w), [3 - 0.6, 4 - 0.8])
    assert s.run(step) == 1


def test_learning_rate_schedules_are_graph_values():
    g = T.Graph()
    with g.as_default():
        step = T.train.get_or_create_global_step()
        lr = T.train.exponential_decay(0.1, step, 10, 0.5, staircase=True)
        pw = T.train.piecewise_constant(step, [5, 10], [1.0, 0.5, 0.1])
        inc = step.assign_add(np.int64(6))
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    assert np.isclose(s.run(lr), 0.1) and s.run(pw) == 1.0
    s.run(inc)
    assert np.isclose(s.run(lr), 0.1) and s.run(pw) == 0.5
    s.run(inc)
    assert np.isclose(s.run(lr), 0.05) and np.isclose(s.run(pw), 0.1)


def test_batch_norm_training_updates_moving_averages_and_inference_uses_them():
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 2, 3, 3))
        y_train = T.layers.batch_normalization(x, axis=1, training=True, momentum=0.5, name="bn")
        updates = T.group(*g.get_collection(T.GraphKeys.UPDATE_OPS))
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    data = np.random.default_rng(0).normal(3.0, 2.0, size=(8, 2, 3, 3)).astype(np.float32)
    out, _ = s.run([y_train, updates], {x: data})
    np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-5)
    mm = s.run(g.tensor("bn/moving_mean:0"))
    np.testing.assert_allclose(mm, 0.5 * data.mean(axis=(0, 2, 3)), rtol=1e-5)
    with g.as_default():
        y_inf = T.make_op("BatchNormalization", [x, g.tensor("bn/gamma:0"), g.tensor("bn/beta:0"),
                                                 g.tensor("bn/moving_mean:0"), g.tensor("bn/moving_variance:0")],
                          {"epsilon": 1e-3}, num_outputs=1).outputs[0]
    mv = s.run(g.tensor("bn/moving_variance:0"))
    np.testing.assert_allclose(s.run(y_inf, {x: data}), (data - mm[None, :, None, None]) /
                               np.sqrt(mv[None, :, None, None] + 1e-3), rtol=1e-4, atol=1e-5)


def test_dropout_is_fresh_each_step_and_scaled():
    g = T.Graph()
    with g.as_default():
        x = T.constant(np.ones((1000,), np.float32))
        y = T.layers.dropout(x, 0.5, training=True)
    s = T.Session(g)
    a, b = s.run(y), s.run(y)
    assert set(np.unique(a)) <= {0.0, 2.0} and not np.array_equal(a, b)
    assert 0.4 < (a > 0).mean() < 0.6


def test_embedding_trains_only_the_looked_up_rows():
    g = T.Graph()
    with g.as_default():
        ids = T.placeholder(np.int64, (None,))
        emb = T.layers.embedding(ids, 50, 4)
        loss = T.reduce_sum(emb)
        train = T.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g)
    s.run(init)
    table = g.tensor("embedding/embeddings:0")
    before = s.run(table)
    s.run(train, {ids: np.asarray([1, 3, 3])})
    after = s.run(table)
    changed = np.nonzero(np.any(before != after, axis=1))[0]
    assert list(changed) == [1, 3]
    np.testing.assert_allclose(before[3] - after[3], 0.2, rtol=1e-5)
    assert g.get_collection(T.GraphKeys.TRAINABLE_VARIABLES)[0].name == "embedding/embeddings:0"
    assert any(n.op_type == "ScatterSub" for n in g.nodes)


def test_losses_and_accuracy():
    g = T.Graph()
    with g.as_default():
        logits = T.constant(np.asarray([[2.0, 0.0], [0.0, 3.0], [1.0, 0.0]], np.float32))
        labels = T.constant(np.asarray([0, 1, 1]))
        onehot = T.constant(np.eye(2, dtype=np.float32)[[0, 1, 1]])
        sparse = T.losses.sparse_softmax_cross_entropy(labels, logits)
        dense = T.losses.softmax_cross_entropy(onehot, logits)
        acc, acc_update = T.metrics.accuracy(labels, logits)
        mse = T.losses.mean_squared_error(T.constant(np.zeros(3, np.float32)), T.constant(np.ones(3, np.float32)))
        local_init = T.local_variables_initializer()
    s = T.Session(g)
    s.run(local_init)
    s.run(acc_update)
    lv, dv, av, mv = s.run([sparse, dense, acc, mse])
    logp = np.log(np.exp([[2, 0], [0, 3], [1, 0]]) / np.exp([[2, 0], [0, 3], [1, 0]]).sum(1, keepdims=True))
    assert np.isclose(lv, -(logp[0, 0] + logp[1, 1] + logp[2, 1]) / 3) and np.isclose(lv, dv)
    assert np.isclose(av, 2 / 3) and mv == 1.0


def test_trainer_imports_only_lower_layers():
    bad = []
    for path in (ROOT / "trainer").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for n in names:
                if n.split(".")[0] in ("exporter", "serving", "examples", "benchmarks", "tests"):
                    bad.append(f"{path.relative_to(ROOT)} imports {n}")
    assert not bad, bad
