"""The task every process of a chaos run executes (TF_CONFIG says which): softmax regression on
scikit-learn's digits, variables on the PS, async or sync (with backup workers) training under
``MonitoredTrainingSession``. Nothing here handles failures: that is the point.

Lines the chaos runner reads: ``global step N`` (progress), ``saving checkpoint at step N``,
``restored step N; values equal the checkpoint: True``, ``test accuracy A after N global steps``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trainer as T  # noqa: E402
from trainer.checkpoint_format import load_checkpoint  # noqa: E402


class AnnouncingSaver(T.train.Saver):
    """A Saver that says when a save starts (so a chaos run can kill the chief in the middle)."""

    def save(self, sess, save_path, global_step=None, write_graph=True):
        print(f"saving checkpoint at step {global_step}", flush=True)
        return super().save(sess, save_path, global_step=global_step, write_graph=write_graph)


def load_digits():
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[360:], y[360:]), (x[:360], y[:360])


class RestoreCheck(T.train.SessionRunHook):
    """On the chief, right after it restored: do the PS tasks hold exactly the checkpoint's values?

    Checked as the session is created, before the other workers (which wait for the variables to
    be initialized, and a restore is what initializes them) can have taken a step on them."""

    def __init__(self, logdir: str, variables, step):
        self.logdir, self.variables, self.step = logdir, variables, step

    def after_create_session(self, session, coord) -> None:
        path = T.train.latest_checkpoint(self.logdir)
        if path is None:
            return
        _, saved = load_checkpoint(path)
        *now, step = session.run(self.variables + [self.step])
        equal = all(np.array_equal(v, saved[n]) for v, n in zip(now, ("w", "b")))
        print(f"restored step {step}; values equal the checkpoint: {equal}", flush=True)


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    p = argparse.ArgumentParser()
    p.add_argument("--logdir", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--save-steps", type=int, default=40)
    p.add_argument("--sync-backups", type=int, default=None, help="sync training with this many backup workers")
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds each worker sleeps after a step")
    args = p.parse_args()

    r = T.train.TFConfigClusterResolver()
    cluster = r.cluster_spec()
    server = T.train.Server(cluster, r.task_type, r.task_id, timeout=args.timeout, startup_timeout=60.0)
    if r.task_type == "ps":
        server.join()
        print("ps done", flush=True)
        return 0
    is_chief = r.task_id == 0
    (xtr, ytr), (xte, yte) = load_digits()
    g = T.Graph()
    with g.as_default():
        x = T.placeholder(np.float32, (None, 64), name="x")
        y = T.placeholder(np.int64, (None,), name="y")
        with T.device("/job:ps/task:0"):
            w = T.Variable(np.zeros((64, 10), np.float32), name="w")
            b = T.Variable(np.zeros(10, np.float32), name="b")
            step = T.train.get_or_create_global_step()
        logits = T.matmul(x, w) + b
        loss = T.losses.sparse_softmax_cross_entropy(y, logits)
        accuracy = T.reduce_mean(T.cast(T.equal(T.argmax(logits, -1), y), np.float32))
        opt = T.train.GradientDescentOptimizer(0.5)
        hooks = []
        if args.sync_backups is not None:
            n = cluster.num_tasks("worker")
            opt = T.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=n - args.sync_backups, total_num_replicas=n,
                                                timeout_secs=args.timeout)
            train = opt.minimize(loss, global_step=step)
            hooks.append(opt.make_session_run_hook(is_chief))
        else:
            train = opt.minimize(loss, global_step=step)
        saver = AnnouncingSaver(max_to_keep=3) if is_chief else None
        if is_chief:
            hooks.append(RestoreCheck(args.logdir, [w, b], step))
    ran = 0
    with T.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, graph=g, checkpoint_dir=args.logdir,
                                          max_steps=args.steps, save_steps=args.save_steps, save_secs=None,
                                          hooks=hooks, saver=saver, report_steps=100) as sess:
        while not sess.should_stop():
            sess.run(train, {x: xtr, y: ytr})
            ran += 1
            if ran == 1 and sess.restored_from:
                print(f"first step after restore at global step {sess.step}", flush=True)
            if ran % 10 == 0:
                print(f"global step {sess.step}", flush=True)
            if args.step_sleep:
                time.sleep(args.step_sleep)
        print(f"ran {ran} steps", flush=True)
        if is_chief:
            acc = float(sess.session.run(accuracy, {x: xte, y: yte}))
            print(f"test accuracy {acc:.4f} after {sess.step} global steps", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
