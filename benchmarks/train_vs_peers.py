"""Training-step time of the flowstack trainer side by side with PyTorch CPU and TensorFlow CPU.

    python benchmarks/train_vs_peers.py [--threads 2] [--repeats 5] [--cases mlp,cnn,lstm]

One step = forward, backward and the optimizer update, same shapes and optimizer for every
framework, BLAS/intra-op threads pinned to the same number. Cases (issue 3):
  mlp   784-512-512-10, batch 128, Momentum(0.01, 0.9)
  cnn   28x28x1: conv 32 3x3, conv 64 3x3, max-pool 2, dense 128, dense 10; batch 64, Adam
  lstm  2-layer LSTM, sequence 32, batch 32, hidden 128 (input 64), loss on the last output, Adam;
        ours is two LSTMBlockFusedCells (one op per layer over the sequence, as nn.LSTM), printed
        with the while_loop variant (dynamic_rnn over LSTMCells) as lstm_dynamic_rnn beside it
Also: the overhead of an empty Session.run and the per-op cost of a 100-op chain of tiny ops.
Prints ours, peer and ours/peer (lower is better). Timings alone mean little on a shared
machine: compare the ratios, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


SESSION_OPTIONS: dict = {}


def _time(step, iters, repeats):
    step()
    step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


def _interleaved(steps: dict, iters: int, repeats: int) -> dict:
    """Median seconds per step for each framework, timed in alternation so load changes hit all alike."""
    for step in steps.values():
        step()
        step()
    samples = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                step()
            samples[name].append((time.perf_counter() - t0) / iters)
    return {name: statistics.median(v) for name, v in samples.items()}


# -- flowstack ---------------------------------------------------------------------------------
def ours_mlp(rng):
    import trainer as T

    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 784))
        y = T.placeholder(np.int64, (None,))
        h = T.layers.dense(x, 512, activation="relu", name="fc1")
        h = T.layers.dense(h, 512, activation="relu", name="fc2")
        logits = T.layers.dense(h, 10, name="out")
        loss = T.losses.sparse_softmax_cross_entropy(y, logits)
        train = T.train.MomentumOptimizer(0.01, 0.9).minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g, **SESSION_OPTIONS)
    s.run(init)
    feed = {x: rng.standard_normal((128, 784)).astype(np.float32), y: rng.integers(0, 10, 128)}
    return lambda: s.run(train, feed)


def ours_cnn(rng):
    import trainer as T

    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 1, 28, 28))
        y = T.placeholder(np.int64, (None,))
        h = T.layers.conv2d(x, 32, 3, padding="valid", activation="relu", name="c1", data_format="channels_first")
        h = T.layers.conv2d(h, 64, 3, padding="valid", activation="relu", name="c2", data_format="channels_first")
        h = T.layers.flatten(T.layers.max_pooling2d(h, 2, data_format="channels_first"))
        h = T.layers.dense(h, 128, activation="relu", name="fc")
        logits = T.layers.dense(h, 10, name="out")
        loss = T.losses.sparse_softmax_cross_entropy(y, logits)
        train = T.train.AdamOptimizer(1e-3).minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g, **SESSION_OPTIONS)
    s.run(init)
    feed = {x: rng.standard_normal((64, 1, 28, 28)).astype(np.float32), y: rng.integers(0, 10, 64)}
    return lambda: s.run(train, feed)


def ours_lstm(rng, seq=32, batch=32, hidden=128, dim=64):
    """Two LSTMBlockFusedCells: one op per layer over the whole sequence, as nn.LSTM."""
    import trainer as T

    def build(xs):
        l1 = T.layers.LSTMBlockFusedCell(hidden, dim, name="l1")
        l2 = T.layers.LSTMBlockFusedCell(hidden, hidden, name="l2")
        seq1, _ = l1(xs, l1.zero_state(batch))
        _, (h, _) = l2(seq1, l2.zero_state(batch))
        return h

    return _ours_lstm_step(rng, build, seq, batch, hidden, dim)


def ours_lstm_dynamic_rnn(rng, seq=32, batch=32, hidden=128, dim=64):
    """The same network as a while_loop: dynamic_rnn over a MultiRNNCell of LSTMCells (an
    LSTMBlockCell op per layer and step)."""
    import trainer as T

    def build(xs):
        cell = T.layers.MultiRNNCell([T.layers.LSTMCell(hidden, dim, name="l1"),
                                      T.layers.LSTMCell(hidden, hidden, name="l2")])
        out, _ = T.layers.dynamic_rnn(cell, xs, cell.zero_state(batch))
        return out

    return _ours_lstm_step(rng, build, seq, batch, hidden, dim)


def _ours_lstm_step(rng, build, seq, batch, hidden, dim):
    import trainer as T

    g = T.Graph()
    with g.as_default():
        xs = T.placeholder(np.float32, (seq, batch, dim))
        target = T.placeholder(np.float32, (batch, hidden))
        loss = T.losses.mean_squared_error(target, build(xs))
        train = T.train.AdamOptimizer(1e-3).minimize(loss)
        init = T.global_variables_initializer()
    s = T.Session(g, **SESSION_OPTIONS)
    s.run(init)
    feed = {xs: rng.standard_normal((seq, batch, dim)).astype(np.float32),
            target: rng.standard_normal((batch, hidden)).astype(np.float32)}
    return lambda: s.run(train, feed)


def ours_overheads():
    import trainer as T

    g = T.Graph()
    with g.as_default():
        noop = T.no_op()
        x = T.placeholder(np.float32, (4,))
        y = x
        for _ in range(100):
            y = T.add(y, np.float32(1.0))
    s = T.Session(g)
    feed = {x: np.zeros(4, np.float32)}
    empty = _time(lambda: s.run(noop), 5000, 5)
    chain = _time(lambda: s.run(y, feed), 500, 5) / 100
    return empty, chain


# -- PyTorch -----------------------------------------------------------------------------------
def torch_mlp(rng):
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.from_numpy(rng.standard_normal((128, 784)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 128))
    return _torch_step(model, opt, x, y, torch.nn.functional.cross_entropy)


def torch_cnn(rng):
    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.Conv2d(32, 64, 3),
                                torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                                torch.nn.Linear(9216, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.from_numpy(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, 64))
    return _torch_step(model, opt, x, y, torch.nn.functional.cross_entropy)


def torch_lstm(rng, seq=32, batch=32, hidden=128, dim=64):
    import torch

    lstm = torch.nn.LSTM(dim, hidden, num_layers=2)
    opt = torch.optim.Adam(lstm.parameters(), lr=1e-3)
    x = torch.from_numpy(rng.standard_normal((seq, batch, dim)).astype(np.float32))
    t = torch.from_numpy(rng.standard_normal((batch, hidden)).astype(np.float32))

    def step():
        opt.zero_grad()
        out, _ = lstm(x)
        loss = torch.nn.functional.mse_loss(out[-1], t)
        loss.backward()
        opt.step()

    return step


def _torch_step(model, opt, x, y, loss_fn):
    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    return step


# -- TensorFlow (graph mode through tf.function) ----------------------------------------------
def tf_models(rng, case, seq=32, batch=32, hidden=128, dim=64):
    import tensorflow as tf

    k = tf.keras
    if case == "mlp":
        model = k.Sequential([k.Input((784,)), k.layers.Dense(512, activation="relu"),
                              k.layers.Dense(512, activation="relu"), k.layers.Dense(10)])
        opt = k.optimizers.SGD(0.01, momentum=0.9)
        x = tf.constant(rng.standard_normal((128, 784)).astype(np.float32))
        y = tf.constant(rng.integers(0, 10, 128))
        loss_fn = k.losses.SparseCategoricalCrossentropy(from_logits=True)
    elif case == "cnn":
        model = k.Sequential([k.Input((28, 28, 1)), k.layers.Conv2D(32, 3, activation="relu"),
                              k.layers.Conv2D(64, 3, activation="relu"), k.layers.MaxPooling2D(2),
                              k.layers.Flatten(), k.layers.Dense(128, activation="relu"), k.layers.Dense(10)])
        opt = k.optimizers.Adam(1e-3)
        x = tf.constant(rng.standard_normal((64, 28, 28, 1)).astype(np.float32))  # TF CPU convs want NHWC
        y = tf.constant(rng.integers(0, 10, 64))
        loss_fn = k.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        model = k.Sequential([k.Input((seq, dim)), k.layers.LSTM(hidden, return_sequences=True),
                              k.layers.LSTM(hidden)])
        opt = k.optimizers.Adam(1e-3)
        x = tf.constant(rng.standard_normal((batch, seq, dim)).astype(np.float32))
        y = tf.constant(rng.standard_normal((batch, hidden)).astype(np.float32))
        loss_fn = k.losses.MeanSquaredError()

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return lambda: step()


def tf_overheads():
    import tensorflow as tf

    @tf.function
    def empty():
        return tf.constant(0.0)

    x = tf.constant(np.zeros(4, np.float32))

    @tf.function
    def chain(v):
        for _ in range(100):
            v = v + 1.0
        return v

    return _time(empty, 2000, 5), _time(lambda: chain(x), 500, 5) / 100


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # One thread by default: on a shared machine, multithreaded BLAS on small matrices waits for
    # busy cores far longer than it computes (measured 10-30x slower per LSTM Gemm at 2 threads).
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cases", default="mlp,cnn,lstm")
    p.add_argument("--no-tensorflow", action="store_true")
    p.add_argument("--parallel-ops", action="store_true",
                   help="ours runs independent ops on --threads threads, each op with single-threaded BLAS")
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

    from threadpoolctl import threadpool_limits

    threadpool_limits(1 if args.parallel_ops else args.threads)
    global SESSION_OPTIONS
    SESSION_OPTIONS = {"parallel_ops": True, "inter_op_threads": args.threads} if args.parallel_ops else {}
    peers = {}
    try:
        import torch

        torch.set_num_threads(args.threads)
        peers["torch"] = {"mlp": torch_mlp, "cnn": torch_cnn, "lstm": torch_lstm}
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    tf_version = None
    if not args.no_tensorflow:
        try:
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(args.threads)
            tf.config.threading.set_inter_op_parallelism_threads(args.threads)
            tf_version = tf.__version__
            peers["tensorflow"] = {c: (lambda rng, c=c: tf_models(rng, c)) for c in ("mlp", "cnn", "lstm")}
        except ImportError:
            print("TensorFlow CPU is not installed here (pip install tensorflow-cpu); skipping that peer")
    ours = {"mlp": ours_mlp, "cnn": ours_cnn, "lstm": ours_lstm, "lstm_dynamic_rnn": ours_lstm_dynamic_rnn}
    iters = {"mlp": 20, "cnn": 5, "lstm": 3, "lstm_dynamic_rnn": 3}
    print(f"threads={args.threads} parallel_ops={args.parallel_ops} numpy={np.__version__} torch={torch_version} tensorflow={tf_version}")
    print(f"{'case':16} {'peer':11} {'ours ms':>9} {'peer ms':>9} {'ours/peer':>9}")
    for case in args.cases.split(","):
        # lstm is timed with its while_loop variant beside it, against the same peers, in one rotation.
        variants = [case] + (["lstm_dynamic_rnn"] if case == "lstm" else [])
        steps = {v: ours[v](np.random.default_rng(0)) for v in variants}
        steps.update({name: fns[case](np.random.default_rng(0)) for name, fns in peers.items()})
        times = _interleaved(steps, iters[case], args.repeats)
        for variant in variants:
            for name in peers:
                t_ours, t_peer = times[variant], times[name]
                print(f"{variant:16} {name:11} {t_ours * 1e3:9.2f} {t_peer * 1e3:9.2f} {t_ours / t_peer:9.2f}")
    empty, chain = ours_overheads()
    line = f"empty Session.run: {empty * 1e6:.1f} us; 100-op chain: {chain * 1e6:.2f} us/op"
    if "tensorflow" in peers:
        tf_empty, tf_chain = tf_overheads()
        line += f"  (TensorFlow tf.function: {tf_empty * 1e6:.1f} us empty, {tf_chain * 1e6:.2f} us/op)"
    print(line)


if __name__ == "__main__":
    main()
