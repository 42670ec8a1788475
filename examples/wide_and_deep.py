"""A wide-and-deep click model with sharded embedding tables, on synthetic user/item data.

    python examples/wide_and_deep.py [--steps 1000] [--batch 128] [--logdir DIR]

Wide part: one weight per user id and per item id (embedding tables of width 1), trained by
Adagrad. Deep part: 8-wide user and item embeddings, concatenated with 6 dense features, through
a 32-unit ReLU layer, trained by LazyAdam. Every table is partitioned in two shards
(``fixed_size_partitioner(2)``) and read with ``nn.embedding_lookup(..., partition_strategy="div")``,
so each step gathers only the rows of its batch and updates only those rows.

The labels come from a known logistic model (user and item biases, a user-item affinity and a
linear term in the dense features), so the script prints the held-out accuracy of the true
model beside ours.

One process by default. When ``TF_CONFIG`` is set (as ``flowstack cluster launch`` or the
Kubeflow operator set it), the same script is one task of a cluster: a PS task serves its
shards, a worker builds the graph under ``replica_device_setter`` (tables and shards on the PS
tasks by bytes) and trains against its server. That path needs the distributed runtime
(``trainer.train.TFConfigClusterResolver``, ``Server``): only ``cluster_setup`` touches it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trainer as T  # noqa: E402

USERS, ITEMS, DENSE, FACTORS = 2000, 400, 6, 4


def make_data(n: int, seed: int = 0):
    """(user ids, item ids, dense features, labels, true logits) from a fixed random logistic model."""
    truth = np.random.default_rng(1234)
    user_bias, item_bias = truth.normal(0, 1.0, USERS), truth.normal(0, 1.0, ITEMS)
    user_vec, item_vec = truth.normal(0, 1.0, (USERS, FACTORS)), truth.normal(0, 1.0, (ITEMS, FACTORS))
    dense_w = truth.normal(0, 1.0, DENSE)
    rng = np.random.default_rng(seed)
    users = rng.zipf(1.3, n) % USERS  # popular users and items recur, as in click logs
    items = rng.zipf(1.3, n) % ITEMS
    dense = rng.normal(0, 1, (n, DENSE)).astype(np.float32)
    logits = user_bias[users] + item_bias[items] + (user_vec[users] * item_vec[items]).sum(1) + dense @ dense_w
    labels = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(np.float32)
    return users.astype(np.int64), items.astype(np.int64), dense, labels, logits


def sigmoid_cross_entropy(labels, logits):
    """Mean of max(z, 0) - z * y + log(1 + exp(-|z|)) (stable for any logit z)."""
    z = logits
    return T.reduce_mean(T.maximum(z, 0.0) - z * labels + T.log(1.0 + T.exp(-T.abs(z))))


def table(name: str, rows: int, width: int, scale: float):
    init = lambda shape, dtype=np.float32: (np.random.default_rng(len(name)).normal(0, scale, shape)).astype(dtype)  # noqa: E731
    return T.partitioned_variables.partitioned_variable(name, (rows, width), initializer=init,
                                                        partitioner=T.fixed_size_partitioner(2))


def build_model(device_fn=None):
    """(graph, handles): the wide and deep parts, their optimizers and an accuracy op."""
    g = T.Graph()
    with g.as_default(), T.device(device_fn):
        T.init.set_seed(0)
        users = T.placeholder(np.int64, (None,), name="users")
        items = T.placeholder(np.int64, (None,), name="items")
        dense = T.placeholder(np.float32, (None, DENSE), name="dense")
        labels = T.placeholder(np.float32, (None,), name="labels")
        step = T.train.get_or_create_global_step()

        def lookup(params, ids):
            return T.nn.embedding_lookup(params, ids, partition_strategy="div")

        with T.name_scope("wide"):
            wide_user, wide_item = table("user_weights", USERS, 1, 0.0), table("item_weights", ITEMS, 1, 0.0)
            wide = T.reshape(lookup(wide_user, users) + lookup(wide_item, items), [-1])
        with T.variable_scope("deep"):  # its layers' variables are deep/hidden/..., as in TF1
            deep_user, deep_item = table("user_embedding", USERS, 8, 0.1), table("item_embedding", ITEMS, 8, 0.1)
            h = T.concat([lookup(deep_user, users), lookup(deep_item, items), dense], axis=1)
            h = T.layers.dense(h, 32, activation="relu", name="hidden")
            deep = T.reshape(T.layers.dense(h, 1, name="out"), [-1])
        logits = T.identity(wide + deep, name="logits")
        loss = sigmoid_cross_entropy(labels, logits)
        wide_vars = list(wide_user) + list(wide_item)
        deep_vars = [v for v in T.trainable_variables() if v not in wide_vars]
        wide_train = T.train.AdagradOptimizer(0.2).minimize(loss, var_list=wide_vars)
        deep_train = T.train.LazyAdamOptimizer(0.01).minimize(loss, var_list=deep_vars, global_step=step)
        train = T.group(wide_train, deep_train, name="train")
        accuracy = T.reduce_mean(T.cast(T.equal(T.greater(logits, 0.0), T.greater(labels, 0.5)), np.float32))
        init = T.global_variables_initializer()
    return g, dict(users=users, items=items, dense=dense, labels=labels, loss=loss, train=train,
                   accuracy=accuracy, step=step, init=init, tables=[wide_user, wide_item, deep_user, deep_item])


def cluster_setup():
    """(device function, session keyword arguments, is_chief). One process without TF_CONFIG."""
    if "TF_CONFIG" not in os.environ:
        return None, {}, True
    resolver = T.train.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    server = T.train.Server(cluster, resolver.task_type, resolver.task_id)
    if resolver.task_type == "ps":
        server.join()  # returns when the job ends
        sys.exit(0)
    worker = f"/job:{resolver.task_type}/task:{resolver.task_id}"
    is_chief = resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                                   and "chief" not in cluster.as_dict())
    return T.train.replica_device_setter(cluster=cluster, worker_device=worker), {"master": server.target}, is_chief


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--logdir", default=None, help="restore from and save checkpoints here (by logical names)")
    args = p.parse_args(argv)

    device_fn, session_kwargs, is_chief = cluster_setup()
    users, items, dense, labels, logits = make_data(60_000)
    n_train = 50_000
    g, m = build_model(device_fn)
    rng = np.random.default_rng(1)
    t0 = time.perf_counter()
    # On a cluster the chief initializes (others wait for it) and closing tells the PS tasks this
    # worker is done, so they exit by themselves; in one process it is a plain session.
    with T.train.MonitoredTrainingSession(checkpoint_dir=args.logdir, is_chief=is_chief, graph=g, save_secs=None,
                                          **session_kwargs) as sess:
        for i in range(args.steps):
            b = rng.integers(0, n_train, args.batch)
            _, loss = sess.run([m["train"], m["loss"]], {m["users"]: users[b], m["items"]: items[b],
                                                         m["dense"]: dense[b], m["labels"]: labels[b]})
            if i % 100 == 0:
                print(f"step {i:4d} loss {float(loss):.4f}")
        test = slice(n_train, None)
        acc = float(sess.run(m["accuracy"], {m["users"]: users[test], m["items"]: items[test],
                                             m["dense"]: dense[test], m["labels"]: labels[test]}))
    best = float(((logits[test] > 0) == (labels[test] > 0.5)).mean())
    print(f"held-out accuracy {acc:.4f} (the true model's: {best:.4f}) after {args.steps} steps "
          f"in {time.perf_counter() - t0:.1f}s")
    return {"accuracy": acc, "true_model_accuracy": best}


if __name__ == "__main__":
    main()
