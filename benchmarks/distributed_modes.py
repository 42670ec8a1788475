"""Training modes in one process (issue 22, measurements d and e, graph side).

    python benchmarks/distributed_modes.py [--steps 30]

(d) DistBelief get/put against the dataflow version on the same model, placed by
    ``replica_device_setter`` on 2 PS tasks and a worker: bytes that cross between worker and PS
    per step and step time. Ours finds every tensor on a worker<->PS edge of the placed step's
    subgraph, once per (tensor, receiving task) as the runtime's Send/Recv moves it, and measures
    it by fetching it in a step of the same graph built unplaced (one process); DistBelief moves
    every parameter and every (dense) gradient. Step times have no network in them: the bytes
    are the point.
(e) Synchronous training with 4 replicas (threads on one Session) of which one is a 3x
    straggler: median step time aggregating all 4 (no backup) against the first 3 of 4 (one
    backup worker). The compute is a sleep per step, so the figure is the protocol's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trainer as T  # noqa: E402
from trainer.devices import DeviceSpec  # noqa: E402

USERS, EMB, BATCH = 100_000, 32, 64


def build(mode: str, placed: bool = True):
    """The model trained by SGD ("ours" or "distbelief"), under a 2-PS replica_device_setter when
    ``placed``; the unplaced build has the same node names and runs in one process."""
    g = T.Graph()
    setter = T.train.replica_device_setter(ps_tasks=2, worker_device="/job:worker/task:0") if placed else None
    rng = np.random.default_rng(0)
    with g.as_default(), T.device(setter):
        ids = T.placeholder(np.int64, (BATCH,), name="ids")
        y = T.placeholder(np.float32, (BATCH,), name="y")
        table = T.partitioned_variables.partitioned_variable(
            "emb", (USERS, EMB), initializer=lambda s, dtype=np.float32: rng.normal(0, 0.1, s).astype(dtype),
            partitioner=T.fixed_size_partitioner(2))
        h = T.layers.dense(T.nn.embedding_lookup(table, ids, partition_strategy="div"), 64, activation="relu", name="h")
        pred = T.reshape(T.layers.dense(h, 1, name="out"), [-1])
        loss = T.reduce_mean(T.square(pred - y))
        if mode == "ours":
            handle = T.train.GradientDescentOptimizer(0.05).minimize(loss)
        else:
            handle = T.train.DistBeliefTrainer(loss, 0.05)
        init = T.global_variables_initializer()
    return g, ids, y, loss, handle, init


def _task(node) -> tuple:
    """(job, task) a node runs in; nodes with no device run in the worker."""
    spec = DeviceSpec.parse(node.device or "")
    return (spec.job or "worker", spec.task or 0)


def crossing_tensors(target) -> list:
    """Tensors on an edge between tasks in ``target``'s subgraph, one per (tensor, receiving task)."""
    needed, stack = set(), [target]
    while stack:
        n = stack.pop()
        if n not in needed:
            needed.add(n)
            stack.extend(t.node for t in n.inputs if t is not None)
            stack.extend(n.control_inputs)
    seen, out = set(), []
    for n in sorted(needed, key=lambda n: n.id):
        for t in n.inputs:
            if t is None or _task(t.node) == _task(n) or (t, _task(n)) in seen:
                continue
            seen.add((t, _task(n)))
            out.append(t)
    return out


def _time(step, steps):
    step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure_d(steps: int) -> dict:
    rng = np.random.default_rng(1)
    feeds_of = lambda ids, y: {ids: rng.integers(0, USERS, BATCH), y: rng.normal(0, 1, BATCH).astype(np.float32)}  # noqa: E731
    out = {}
    placed = build("ours")[4]
    g, ids, y, loss, train, init = build("ours", placed=False)
    crossing = [g.tensor(t.name) for t in crossing_tensors(placed)]
    with T.Session(g) as sess:
        sess.run(init)
        values = sess.run([train, crossing], feeds_of(ids, y))[1]
        moved = sum(np.asarray(v).nbytes for v in values)
        out["ours"] = (moved, _time(lambda: sess.run(train, feeds_of(ids, y)), steps))
    g, ids, y, loss, db, init = build("distbelief", placed=False)
    with T.Session(g) as sess:
        sess.run(init)
        out["distbelief"] = (db.bytes_per_step, _time(lambda: db.step(sess, feeds_of(ids, y)), steps))
    return out


def measure_e(steps: int, base: float = 0.02) -> dict:
    """Median sync step time with 4 replicas, replica 3 a 3x straggler, aggregating m of 4."""
    out = {}
    for m in (4, 3):
        g = T.Graph()
        with g.as_default():
            gstep = T.train.get_or_create_global_step()
            x = T.placeholder(np.float32, (8,), name="x")
            w = T.Variable(np.zeros(8, np.float32), name="w")
            opt = T.train.SyncReplicasOptimizer(T.train.GradientDescentOptimizer(0.1), replicas_to_aggregate=m,
                                                total_num_replicas=4, timeout_secs=5.0)
            train = opt.minimize(T.reduce_sum(w * x), global_step=gstep)
            init = T.global_variables_initializer()
        sess = T.Session(g)
        sess.run(init)
        hook = opt.make_session_run_hook(is_chief=True, num_tokens=0)
        hook.after_create_session(sess)
        stop = threading.Event()

        def replica(i):
            while not stop.is_set():
                time.sleep(base * (3 if i == 3 else 1))  # the step's compute; replica 3 is a 3x straggler
                try:
                    sess.run(train, {x: np.ones(8, np.float32)})
                except T.DeadlineExceededError:
                    return

        threads = [threading.Thread(target=replica, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        stamps = []
        last = int(sess.run(gstep))
        deadline = time.monotonic() + 60
        while len(stamps) < steps + 1 and time.monotonic() < deadline:
            now = int(sess.run(gstep))
            if now != last:
                stamps.append(time.perf_counter())
                last = now
            time.sleep(0.001)
        stop.set()
        hook.end(sess)
        for t in threads:
            t.join(10)
        sess.close()
        out[m] = statistics.median(np.diff(stamps))
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args(argv)
    d = measure_d(args.steps)
    (ob, ot), (db, dt) = d["ours"], d["distbelief"]
    print(f"(d) {USERS}x{EMB} table on 2 PS, batch {BATCH}:")
    print(f"    bytes moved per step   ours {ob / 1e6:8.3f} MB   DistBelief {db / 1e6:8.3f} MB   ours/peer {ob / db:.4f}")
    print(f"    step time (1 process)  ours {ot * 1e3:8.2f} ms   DistBelief {dt * 1e3:8.2f} ms   ours/peer {ot / dt:.3f}")
    e = measure_e(args.steps)
    print("(e) sync, 4 replicas (threads), one 3x straggler:")
    print(f"    median step  first 3 of 4 (1 backup) {e[3] * 1e3:.1f} ms   all 4 (no backup) {e[4] * 1e3:.1f} ms   "
          f"ratio {e[3] / e[4]:.3f} (target <= 0.8)")
    return {"d": d, "e": e}


if __name__ == "__main__":
    main()
