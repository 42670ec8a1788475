"""A small RNN classifier of scikit-learn's digits for the distributed control-flow tests.

Each 8x8 image is a sequence of 8 rows of 8 pixels. ``build(device_fn, model=...)`` makes the
graph under ``device_fn`` (``replica_device_setter``: every variable on a PS, the loop on the
worker):

- ``"cond"``: a ``while_loop`` whose body reads the PS variables inside a ``tf.cond`` (the first
  row has no state to read), so the loop keeps control flow after loop fusion;
- ``"dynamic_rnn"``: ``tf.nn.dynamic_rnn`` over a ``BasicRNNCell``.

``skip_nonfinite`` applies the gradients in a ``tf.cond`` only when they are all finite (a
common guard against a bad batch), so the PS's updates sit in a cond branch.
"""

from __future__ import annotations

import numpy as np

import trainer as T

UNITS, ROWS, CLASSES, BATCH = 32, 8, 10, 32


def load_digits() -> tuple:
    """((train x, train y), (test x, test y)): pixels scaled to [0, 1], as [N, 8 rows, 8]."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = (d.images / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1500], y[:1500]), (x[1500:], y[1500:])


def _cond_rnn(x):
    xs = T.transpose(x, [1, 0, 2])  # [rows, batch, 8]
    init = T.glorot_uniform_initializer(seed=1)
    w = T.get_variable("w", [8, UNITS], initializer=init)
    u = T.get_variable("u", [UNITS, UNITS], initializer=T.glorot_uniform_initializer(seed=2))
    b = T.get_variable("b", [UNITS], initializer=T.zeros_initializer())

    def body(t, h):
        x_w = T.matmul(T.gather(xs, t), w) + b
        h = T.cond(t > 0, lambda: T.tanh(x_w + T.matmul(h, u)), lambda: T.tanh(x_w))
        return t + 1, h

    h0 = T.zeros_like(T.matmul(xs[0], w))
    return T.while_loop(lambda t, h: t < ROWS, body, [T.constant(0), h0])[1]


def _dynamic_rnn(x):
    cell = T.nn.rnn_cell.BasicRNNCell(UNITS)
    with T.variable_scope("rnn", initializer=T.glorot_uniform_initializer(seed=1)):
        _, h = T.nn.dynamic_rnn(cell, x, dtype=np.float32)
    return h


MODELS = {"cond": _cond_rnn, "dynamic_rnn": _dynamic_rnn}


def build(device_fn, model: str = "cond", sync: tuple[int, int] | None = None, learning_rate: float = 0.01,
          sync_timeout: float = 10.0, skip_nonfinite: bool = False):
    """(graph, tensors by name). ``sync=(m, n)`` wraps the optimizer in SyncReplicasOptimizer."""
    g = T.Graph()
    with g.as_default(), T.device(device_fn):
        x = T.placeholder(np.float32, (BATCH, ROWS, 8), name="x")
        y = T.placeholder(np.int64, (BATCH,), name="y")
        h = MODELS[model](x)
        v = T.get_variable("v", [UNITS, CLASSES], initializer=T.glorot_uniform_initializer(seed=3))
        c = T.get_variable("c", [CLASSES], initializer=T.zeros_initializer())
        logits = T.matmul(h, v) + c
        loss = T.reduce_mean(T.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        accuracy = T.reduce_mean(T.cast(T.equal(T.argmax(logits, 1), y), np.float32))
        step = T.train.get_or_create_global_step()
        opt = T.train.AdamOptimizer(learning_rate)
        if sync is not None:
            opt = T.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=sync[0], total_num_replicas=sync[1],
                                                timeout_secs=sync_timeout)
        if skip_nonfinite:
            grads = opt.compute_gradients(loss)
            finite = T.reduce_all(T.stack([T.reduce_all(T.is_finite(gr)) for gr, _ in grads]))

            def apply():
                with T.control_dependencies([opt.apply_gradients(grads, global_step=step)]):
                    return T.constant(True)
            train = T.cond(finite, apply, lambda: T.constant(False))
        else:
            train = opt.minimize(loss, global_step=step)
        init = T.global_variables_initializer()
    return g, {"x": x, "y": y, "loss": loss, "accuracy": accuracy, "train": train, "init": init, "step": step,
               "opt": opt}


def batches(n: int, seed: int, train=None):
    """``n`` random training batches (x, y) of ``BATCH`` rows."""
    (x, y), _ = train or load_digits()
    rng = np.random.default_rng(seed)
    for _ in range(n):
        rows = rng.integers(0, len(x), BATCH)
        yield x[rows], y[rows]


def evaluate(sess, m, test) -> tuple[float, float]:
    """(mean loss, accuracy) over the whole batches of the test set."""
    x, y = test
    results = [sess.run([m["loss"], m["accuracy"]], {m["x"]: x[i:i + BATCH], m["y"]: y[i:i + BATCH]})
               for i in range(0, len(x) - BATCH + 1, BATCH)]
    loss, acc = np.mean(results, axis=0)
    return float(loss), float(acc)
