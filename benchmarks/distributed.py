"""The distributed runtime on 127.0.0.1, every task its own process, peers in the same run.

(a) null step (the paper's Figure 7): a scalar variable on 1 PS, each step adds to it and fetches
    the result; median step time with 1 and with 2 workers stepping at once (target <= 1.8 ms),
    next to one raw grpcio unary round trip of the same 4 bytes.
(b) dense: 100 MB of float32 parameters on the PS, each step fetches them to the worker and sends
    an update of the same size back; bytes per second against a raw grpcio bidirectional stream
    echoing the same 200 MB per step in 4 MB chunks between the same two processes (target >= 0.7x).
(f) async against sync throughput: needs SyncReplicasOptimizer (not on this branch); skipped.

    python benchmarks/distributed.py                 # about a minute
    python benchmarks/distributed.py --null-steps 500 --dense-steps 5 --dense-mb 100
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ECHO = "/bench.Echo/"


# -- the PS process: our Server plus a raw grpcio echo server -----------------------------------
def run_ps(echo_port: int) -> int:
    import grpc

    import trainer as T
    from trainer.distributed.peers import channel_options

    def echo_stream(chunks, context):
        yield from chunks

    def echo_unary(request, context):
        return request

    raw = grpc.server(ThreadPoolExecutor(max_workers=8), options=channel_options())
    raw.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", {
        "Stream": grpc.stream_stream_rpc_method_handler(echo_stream),
        "Unary": grpc.unary_unary_rpc_method_handler(echo_unary)}),))
    raw.add_insecure_port(f"127.0.0.1:{echo_port}")
    raw.start()
    r = T.train.TFConfigClusterResolver()
    server = T.train.Server(r.cluster_spec(), r.task_type, r.task_id, timeout=120.0)
    server.join(timeout=600)
    raw.stop(0.5)
    return 0


# -- a worker process: time our steps, then the raw peer ------------------------------------------
def run_worker(case: str, steps: int, dense_mb: int, echo_port: int) -> int:
    import grpc

    import trainer as T
    from trainer.distributed.peers import channel_options

    r = T.train.TFConfigClusterResolver()
    server = T.train.Server(r.cluster_spec(), r.task_type, r.task_id, timeout=120.0, startup_timeout=60.0)
    channel = grpc.insecure_channel(f"127.0.0.1:{echo_port}", options=channel_options())
    g = T.Graph()
    result: dict = {"task": f"{r.task_type}:{r.task_id}"}
    if case == "null":
        with g.as_default(), T.device("/job:ps/task:0"):
            w = T.Variable(np.zeros((), np.float32), name="w")
            step = w.assign_add(np.float32(1.0))
        sess = T.Session(g, target=server.target)
        if r.task_id == 0:
            sess.run(w.initializer)
        while sess.runtime.uninitialized_variables([w]):
            time.sleep(0.01)
        times = timed(lambda: sess.run(step), steps)
        unary = channel.unary_unary(ECHO + "Unary")
        payload = np.float32(1.0).tobytes()
        raw = timed(lambda: unary(payload, timeout=10), steps)
        result.update(ours_ms=statistics.median(times), raw_ms=statistics.median(raw))
    else:
        n = dense_mb * (1 << 20) // 4
        with g.as_default():
            with T.device("/job:ps/task:0"):
                w = T.Variable(np.zeros(n, np.float32), name="w")
            fetched = T.identity(w)  # on the worker: 100 MB PS -> worker
            with T.device("/job:ps/task:0"):
                step = T.group(w.assign(fetched))  # 100 MB worker -> PS, written into the variable
        sess = T.Session(g, target=server.target)
        sess.run(w.initializer)
        stream = channel.stream_stream(ECHO + "Stream")
        data = np.ones(n, np.float32).view(np.uint8)
        chunk = 4 << 20
        chunks = [bytes(data[i:i + chunk]) for i in range(0, data.nbytes, chunk)]

        def echo():
            out = np.empty(data.nbytes, np.uint8)
            pos = 0
            for piece in stream(iter(chunks), timeout=120):
                out[pos:pos + len(piece)] = np.frombuffer(piece, np.uint8)
                pos += len(piece)
            assert pos == data.nbytes

        times, raw = timed_pair(lambda: sess.run(step), echo, steps)  # alternating: same load on both
        moved = 2 * data.nbytes
        result.update(ours_mb_s=moved / 1e6 / (statistics.median(times) / 1e3),
                      raw_mb_s=moved / 1e6 / (statistics.median(raw) / 1e3),
                      ours_ms=statistics.median(times), raw_ms=statistics.median(raw))
    print("RESULT " + json.dumps(result), flush=True)
    server.done()
    server.stop(0.5)
    return 0


def timed_pair(ours, peer, steps: int) -> tuple[list[float], list[float]]:
    ours()
    peer()
    a, b = [], []
    for _ in range(steps):
        a += timed(ours, 1, warmup=0)
        b += timed(peer, 1, warmup=0)
    return a, b


def timed(fn, steps: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


# -- the orchestrator --------------------------------------------------------------------------------
def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def run_job(workers: int, case: str, args) -> list[dict]:
    ports = free_ports(2 + workers)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{p}" for p in ports[2:]]}
    procs = []
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))

    def start(job, index, extra):
        e = dict(env, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": job, "index": index}}))
        return subprocess.Popen([sys.executable, __file__, "--role", job, "--echo-port", str(ports[1]), *extra],
                                env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    procs.append(start("ps", 0, []))
    extra = ["--case", case, "--steps", str(args.null_steps if case == "null" else args.dense_steps),
             "--dense-mb", str(args.dense_mb)]
    procs += [start("worker", i, extra) for i in range(workers)]
    results = []
    try:
        for p in procs[1:]:
            out, _ = p.communicate(timeout=300)
            lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
            if p.returncode != 0 or not lines:
                raise RuntimeError(f"worker failed ({p.returncode}):\n{out[-3000:]}")
            results.append(json.loads(lines[-1][len("RESULT "):]))
        procs[0].communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=("main", "ps", "worker"), default="main")
    p.add_argument("--case", choices=("null", "dense"), default="null")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--echo-port", type=int, default=0)
    p.add_argument("--null-steps", type=int, default=500)
    p.add_argument("--dense-steps", type=int, default=5)
    p.add_argument("--dense-mb", type=int, default=100)
    args = p.parse_args()
    if args.role == "ps":
        return run_ps(args.echo_port)
    if args.role == "worker":
        return run_worker(args.case, args.steps, args.dense_mb, args.echo_port)

    print("(a) null step: scalar variable on 1 PS, assign_add + fetch per step; median ms per step")
    print(f"{'workers':>8} {'task':>10} {'ours ms':>9} {'raw grpc unary ms':>18} {'ratio':>7}")
    for workers in (1, 2):
        for r in run_job(workers, "null", args):
            print(f"{workers:>8} {r['task']:>10} {r['ours_ms']:>9.3f} {r['raw_ms']:>18.3f} "
                  f"{r['ours_ms'] / r['raw_ms']:>7.2f}")
    print(f"\n(b) dense: {args.dense_mb} MB of parameters fetched and updated per step (2x{args.dense_mb} MB moved)")
    print(f"{'ours MB/s':>10} {'raw echo MB/s':>14} {'ours/raw':>9} {'ours ms/step':>13} {'raw ms':>8}")
    for r in run_job(1, "dense", args):
        print(f"{r['ours_mb_s']:>10.0f} {r['raw_mb_s']:>14.0f} {r['ours_mb_s'] / r['raw_mb_s']:>9.2f} "
              f"{r['ours_ms']:>13.1f} {r['raw_ms']:>8.1f}")
    print("\n(f) async vs sync: skipped (SyncReplicasOptimizer is not on this branch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
