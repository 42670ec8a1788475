"""A worker of the SyncReplicasOptimizer end-to-end test: TF_CONFIG says which one.

Trains ``sparse_model`` with ``SyncReplicasOptimizer(m of n)`` under a MonitoredTrainingSession
until the global step reaches ``--last-step``, printing each step's global step and duration.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import sparse_model as S  # noqa: E402

import trainer as T  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--aggregate", type=int, default=2)
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--last-step", type=int, default=30)
    p.add_argument("--timeout", type=float, default=5.0)
    args = p.parse_args()
    r = T.train.TFConfigClusterResolver()
    cluster = r.cluster_spec()
    server = T.train.Server(cluster, r.task_type, r.task_id, timeout=10.0, startup_timeout=30.0)
    device_fn = T.train.replica_device_setter(cluster=cluster, worker_device=f"/job:worker/task:{r.task_id}")
    g, m = S.build(device_fn, sync=(args.aggregate, args.replicas), sync_timeout=args.timeout)
    is_chief = r.task_id == 0
    with g.as_default():
        hooks = [m["sync_opt"].make_session_run_hook(is_chief), T.train.StopAtStepHook(last_step=args.last_step)]
    batches = S.batches(10_000, seed=r.task_id)
    with T.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, graph=g, hooks=hooks,
                                          ready_timeout=30.0) as sess:
        print("ready", flush=True)
        for ids in batches:
            if sess.should_stop():
                break
            t0 = time.monotonic()
            _, loss = sess.run([m["train"], m["loss"]], S.feed(m, ids))
            print(f"step {sess.step} took {time.monotonic() - t0:.3f} loss {float(loss):.4f}", flush=True)
    print("finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
