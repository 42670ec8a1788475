"""A worker of the distributed RNN tests (``rnn_model``): TF_CONFIG says which one.

Every variable lives on the PS (``replica_device_setter``); the RNN's loop, and the gradient loop
reading the variables, run on this worker. Trains under a MonitoredTrainingSession until the
global step reaches ``--last-step``; the chief prints the test set's loss and accuracy before and
after.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rnn_model as R  # noqa: E402

import trainer as T  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=sorted(R.MODELS), default="cond")
    p.add_argument("--last-step", type=int, default=150)
    p.add_argument("--sync", action="store_true", help="SyncReplicasOptimizer aggregating every worker")
    p.add_argument("--skip-nonfinite", action="store_true", help="apply only finite gradients (in a tf.cond)")
    p.add_argument("--timeout", type=float, default=10.0)
    args = p.parse_args()
    r = T.train.TFConfigClusterResolver()
    cluster = r.cluster_spec()
    workers = cluster.num_tasks("worker")
    server = T.train.Server(cluster, r.task_type, r.task_id, timeout=args.timeout, startup_timeout=30.0)
    device_fn = T.train.replica_device_setter(cluster=cluster, worker_device=f"/job:worker/task:{r.task_id}")
    g, m = R.build(device_fn, args.model, sync=(workers, workers) if args.sync else None, sync_timeout=args.timeout,
                   skip_nonfinite=args.skip_nonfinite)
    is_chief = r.task_id == 0
    with g.as_default():
        hooks = [T.train.StopAtStepHook(last_step=args.last_step)]
        if args.sync:
            hooks.append(m["opt"].make_session_run_hook(is_chief))
    train, test = R.load_digits()
    with T.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, graph=g, hooks=hooks,
                                          ready_timeout=30.0) as sess:
        if is_chief:
            print("before: test loss %.4f accuracy %.4f" % R.evaluate(sess.session, m, test), flush=True)
        ran = 0
        for x, y in R.batches(10 * args.last_step, seed=r.task_id, train=(train, test)):
            if sess.should_stop():
                break
            _, loss = sess.run([m["train"], m["loss"]], {m["x"]: x, m["y"]: y})
            ran += 1
            if ran % 25 == 0:
                print(f"step {sess.step} loss {float(loss):.4f}", flush=True)
        print(f"ran {ran} steps", flush=True)
        if is_chief:
            print("after: test loss %.4f accuracy %.4f" % R.evaluate(sess.session, m, test), flush=True)
    print("finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
