"""A small model with two sharded embedding tables (sparse Adagrad and LazyAdam) for the end-to-end tests.

``pred = emb_a[ids] + emb_l[ids] @ w``: ``emb_a`` is trained by Adagrad, ``emb_l`` and the dense
``w`` by LazyAdam; only rows ``< TOUCHED`` are ever looked up, so the others must never change.
"""

from __future__ import annotations

import numpy as np

import trainer as T

ROWS, WIDTH, TOUCHED = 40, 4, 30


def initial_table(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.5, (ROWS, WIDTH)).astype(np.float32)


def targets() -> np.ndarray:
    return np.random.default_rng(99).normal(0, 1.0, (ROWS, WIDTH)).astype(np.float32)


def batches(n: int, seed: int, size: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, TOUCHED, size).astype(np.int64) for _ in range(n)]


def lookup(table, ids):
    """Rows by id; "div" keeps ids in the shards' contiguous order, as the Saver stores them."""
    return T.nn.embedding_lookup(table, ids, partition_strategy="div")


def build(device_fn=None, shards: int = 2, sync: tuple[int, int] | None = None, sync_timeout: float = 5.0):
    """(graph, handles). ``sync=(m, n)`` wraps LazyAdam in SyncReplicasOptimizer (Adagrad is dropped)."""
    g = T.Graph()
    with g.as_default(), T.device(device_fn):
        ids = T.placeholder(np.int64, (None,), name="ids")
        target = T.placeholder(np.float32, (None, WIDTH), name="target")
        step = T.train.get_or_create_global_step()
        part = T.fixed_size_partitioner(shards)
        emb_a = T.partitioned_variables.partitioned_variable("emb_a", (ROWS, WIDTH), initializer=initial_table(1),
                                                             partitioner=part)
        emb_l = T.partitioned_variables.partitioned_variable("emb_l", (ROWS, WIDTH), initializer=initial_table(2),
                                                             partitioner=part)
        w = T.Variable(np.eye(WIDTH, dtype=np.float32), name="w")
        pred = lookup(emb_a, ids) + T.matmul(lookup(emb_l, ids), w)
        loss = T.reduce_mean(T.square(pred - target))
        lazy_vars = list(emb_l) + [w]
        handles = dict(ids=ids, target=target, step=step, emb_a=emb_a, emb_l=emb_l, w=w, loss=loss)
        if sync is None:
            adagrad = T.train.AdagradOptimizer(0.5).minimize(loss, var_list=list(emb_a))
            lazy = T.train.LazyAdamOptimizer(0.05)
            train = T.group(adagrad, lazy.minimize(loss, var_list=lazy_vars, global_step=step), name="train")
        else:
            lazy = T.train.SyncReplicasOptimizer(T.train.LazyAdamOptimizer(0.05), replicas_to_aggregate=sync[0],
                                                 total_num_replicas=sync[1], timeout_secs=sync_timeout)
            train = lazy.minimize(loss, var_list=lazy_vars + list(emb_a), global_step=step)
            handles["sync_opt"] = lazy
        handles["train"] = train
        handles["init"] = T.global_variables_initializer()
    return g, handles


def feed(m: dict, ids: np.ndarray) -> dict:
    return {m["ids"]: ids, m["target"]: targets()[ids]}


def values(sess, m: dict) -> dict[str, np.ndarray]:
    """The logical tables (shards concatenated) and ``w``."""
    return {"emb_a": sess.run(m["emb_a"].as_tensor()), "emb_l": sess.run(m["emb_l"].as_tensor()), "w": sess.run(m["w"])}
