"""Train the digits CNN of train_digits.py on a cluster: PS tasks hold the variables, workers train
asynchronously (between-graph replication, each worker reads, computes and applies on its own).

    flowstack cluster launch --ps 1 --workers 2 -- python examples/distributed_digits.py

Every task runs this script; ``TF_CONFIG`` (set by the launcher, or by the Kubeflow training
operator on a cluster) says which task it is. A PS serves until every worker is done, then exits
0; worker 0 (or the chief, if the cluster has one) initializes the variables, writes checkpoints
to --logdir and prints the test accuracy at the end. A task that dies is restarted by the launcher
(or the Kubeflow operator) and the job resumes from the last checkpoint: nothing here handles it.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import trainer as T  # noqa: E402
from train_digits import build_model, load_data  # noqa: E402


def place_variables_on_ps(graph, cluster) -> None:
    """Every variable (and, by colocation, its initializer and updates) on a PS task, round robin.

    (``trainer.train.replica_device_setter`` does this balanced by bytes where it is available.)
    """
    ps_tasks = cluster.num_tasks("ps")
    for i, v in enumerate(T.global_variables(graph)):
        v.node.device = f"/job:ps/task:{i % ps_tasks}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default=None, help="the chief's checkpoint directory (default: none)")
    p.add_argument("--epochs", type=int, default=12, help="epochs of the training set, over all workers together")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--timeout", type=float, default=60.0, help="seconds any RPC or wait of a step may take")
    p.add_argument("--save-steps", type=int, default=200,
                   help="the chief checkpoints every this many global steps (a restarted task resumes from the last)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # the chief's straggler reports

    resolver = T.train.TFConfigClusterResolver()
    cluster = resolver.cluster_spec()
    server = T.train.Server(cluster, resolver.task_type, resolver.task_id, timeout=args.timeout,
                            startup_timeout=args.timeout)
    if resolver.task_type == "ps":
        server.join()  # returns once every worker is done
        print("all workers done; exiting")
        return 0

    is_chief = resolver.task_type == "chief" or ("chief" not in cluster.jobs and resolver.task_id == 0)
    (xtr, ytr), (xte, yte) = load_data()
    g, m = build_model()
    place_variables_on_ps(g, cluster)
    total = args.epochs * -(-len(xtr) // args.batch)
    rng = np.random.default_rng(100 + resolver.task_id)
    done = 0
    with T.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, graph=g, checkpoint_dir=args.logdir,
                                          max_steps=total, save_secs=None, save_steps=args.save_steps) as sess:
        while not sess.should_stop():
            b = rng.integers(0, len(xtr), args.batch)
            _, loss = sess.run([m["train"], m["loss"]], {m["x"]: xtr[b], m["y"]: ytr[b], m["training"]: True})
            done += 1
            if done % 50 == 0:
                print(f"global step {sess.step}, loss {float(loss):.4f}", flush=True)
        print(f"{resolver.task_type}:{resolver.task_id} ran {done} of {sess.step} steps", flush=True)
        if is_chief:
            acc = float(sess.session.run(m["accuracy"], {m["x"]: xte, m["y"]: yte}))
            print(f"test accuracy {acc:.4f} after {sess.step} global steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
