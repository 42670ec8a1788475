"""A task for the launcher's tests: every task runs it, TF_CONFIG says which one it is.

--mode ok: workers read a PS variable through a session and say done; the PS exits when they are.
--mode fail-worker: worker 1 exits with status 3.  --mode stuck-ps: the PS never exits.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import trainer as T


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=("ok", "fail-worker", "stuck-ps"), default="ok")
    args = p.parse_args()
    r = T.train.TFConfigClusterResolver()
    if r.task_type == "ps" and args.mode == "stuck-ps":
        print("sleeping forever", flush=True)
        time.sleep(600)
    if r.task_type == "worker" and r.task_id == 1 and args.mode == "fail-worker":
        print("failing on purpose", flush=True)
        return 3
    server = T.train.Server(r.cluster_spec(), r.task_type, r.task_id, timeout=10.0, startup_timeout=20.0)
    if r.task_type == "ps":
        server.join()
        print("ps done", flush=True)
        return 0
    g = T.Graph()
    with g.as_default(), T.device("/job:ps/task:0"):
        w = T.Variable(np.full(3, 2.0, np.float32), name="w")
        doubled = w * 2.0
    sess = T.Session(g, target=server.target)
    if r.task_id == 0:
        sess.run(w.initializer)
    deadline = time.monotonic() + 20
    while sess.runtime.uninitialized_variables([w]) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("value", sess.run(doubled).tolist(), flush=True)
    if args.mode == "fail-worker":
        time.sleep(600)  # worker 0 waits: the launcher must stop it when worker 1 fails
    server.done()
    return 0


if __name__ == "__main__":
    sys.exit(main())
