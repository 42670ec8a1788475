"""The distributed runtime on 127.0.0.1, every task its own process, peers in the same run.

(a) null step (the paper's Figure 7): a scalar variable on 1 PS, each step adds to it and fetches
    the result; median step time with 1 and with 2 workers stepping at once (target <= 1.8 ms),
    next to one raw grpcio unary round trip of the same 4 bytes.
(b) dense: 100 MB of float32 parameters on the PS, each step fetches them to the worker and sends
    an update of the same size back; bytes per second against a raw grpcio bidirectional stream
    echoing the same 200 MB per step, in chunks of our wire's size (wire.CHUNK_BYTES), between the
    same two processes (target >= 0.7x).
(c) sparse: embedding tables (64 float32 wide) of 100 MB and 1 GB, each in two shards on 2 PS
    tasks; each of 2 workers looks up 32 random rows per step and applies their SGD update on the
    PS, steps alternating between the tables; median step times (target: within 1.2x, the
    paper's "independent of size").
(d) DistBelief get/put against ours on the same model (a 12.8 MB embedding table over 2 PS tasks,
    batch 64): median step time and tensor bytes moved per step (Server.bytes_moved()), both
    modes on the same processes, steps alternating.
(e) sync with 4 workers, one a 3x straggler (each step's compute is a sleep, 3x as long on
    worker 3): SyncReplicasOptimizer aggregating 4 of 4 (no backup) against 3 of 4 (one backup);
    wall time per global step (target: >= 20% lower with the backup; the paper's Figure 8c).
(f) async against sync (m = n) throughput at 1, 2 and 4 workers on a small dense model: batches
    applied per second over the whole job.
(g) recovery after a PS is SIGKILLed (1 PS + 2 workers under the launcher, benchmarks/chaos.py):
    seconds from the kill until a worker reports the failure (target <= 5), the launcher restarts
    the PS, the chief has restored the last checkpoint, and the chief's first step after it
    (target <= 10).
(h) the steady-state cost of health checks and metrics: the null step of (a) in alternating blocks
    with a PeerWatcher running and each step's time recorded in TaskMetrics, and with neither;
    median ms per step of each, with the spread of the block medians.

    python benchmarks/distributed.py                 # about two to three minutes
    python benchmarks/distributed.py --only c,e --sparse-big-mb 1024
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
    if echo_port:
        raw.add_insecure_port(f"127.0.0.1:{echo_port}")
        raw.start()
    r = T.train.TFConfigClusterResolver()
    server = T.train.Server(r.cluster_spec(), r.task_type, r.task_id, timeout=120.0)
    server.join(timeout=600)
    raw.stop(0.5)
    return 0


# -- a worker process: time our steps, then the raw peer ------------------------------------------
def run_worker(args) -> int:
    import trainer as T

    r = T.train.TFConfigClusterResolver()
    watch = None if args.case == "overhead" else 1.0  # (h) starts and stops its own watchers
    server = T.train.Server(r.cluster_spec(), r.task_type, r.task_id, timeout=120.0, startup_timeout=60.0,
                            watch_interval=watch)
    result = {"task": f"{r.task_type}:{r.task_id}", **CASES[args.case](server, r, args)}
    print("RESULT " + json.dumps(result), flush=True)
    server.done()
    server.stop(0.5)
    return 0


def wait_initialized(sess, variables, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while sess.runtime.uninitialized_variables(variables):
        if time.monotonic() > deadline:
            raise TimeoutError("the chief did not initialize the variables")
        time.sleep(0.01)


def null_case(server, r, args) -> dict:
    import grpc

    import trainer as T
    from trainer.distributed.peers import channel_options

    g = T.Graph()
    with g.as_default(), T.device("/job:ps/task:0"):
        w = T.Variable(np.zeros((), np.float32), name="w")
        step = w.assign_add(np.float32(1.0))
    sess = T.Session(g, target=server.target)
    if r.task_id == 0:
        sess.run(w.initializer)
    wait_initialized(sess, [w])
    times = timed(lambda: sess.run(step), args.steps)
    unary = grpc.insecure_channel(f"127.0.0.1:{args.echo_port}", options=channel_options()).unary_unary(ECHO + "Unary")
    payload = np.float32(1.0).tobytes()
    raw = timed(lambda: unary(payload, timeout=10), args.steps)
    return dict(ours_ms=statistics.median(times), raw_ms=statistics.median(raw))


def dense_case(server, r, args) -> dict:
    import grpc

    import trainer as T
    from trainer.distributed import wire
    from trainer.distributed.peers import channel_options

    n = args.dense_mb * (1 << 20) // 4
    g = T.Graph()
    with g.as_default():
        with T.device("/job:ps/task:0"):
            w = T.Variable(np.zeros(n, np.float32), name="w")
        fetched = T.identity(w)  # on the worker: 100 MB PS -> worker
        with T.device("/job:ps/task:0"):
            step = T.group(w.assign(fetched))  # 100 MB worker -> PS, written into the variable
    sess = T.Session(g, target=server.target)
    sess.run(w.initializer)
    channel = grpc.insecure_channel(f"127.0.0.1:{args.echo_port}", options=channel_options())
    stream = channel.stream_stream(ECHO + "Stream")
    data = np.ones(n, np.float32).view(np.uint8)
    chunk = wire.CHUNK_BYTES  # the same message sizes as ours
    chunks = [bytes(data[i:i + chunk]) for i in range(0, data.nbytes, chunk)]

    def echo():
        out = np.empty(data.nbytes, np.uint8)
        pos = 0
        for piece in stream(iter(chunks), timeout=120):
            out[pos:pos + len(piece)] = np.frombuffer(piece, np.uint8)
            pos += len(piece)
        assert pos == data.nbytes

    times, raw = timed_pair(lambda: sess.run(step), echo, args.steps)  # alternating: same load on both
    moved = 2 * data.nbytes
    return dict(ours_mb_s=moved / 1e6 / (statistics.median(times) / 1e3),
                raw_mb_s=moved / 1e6 / (statistics.median(raw) / 1e3),
                ours_ms=statistics.median(times), raw_ms=statistics.median(raw))


SPARSE_WIDTH, SPARSE_ROWS_PER_STEP = 64, 32


def sparse_table(name: str, megabytes: int, ids):
    """(shards, train op): a two-shard table of ``megabytes`` on PS tasks 0 and 1, and an SGD step
    on the rows ``ids`` picks."""
    import trainer as T
    from trainer.ops import constant, make_op

    rows = megabytes * (1 << 20) // (SPARSE_WIDTH * 4)
    shards = []
    for i, size in enumerate((rows - rows // 2, rows // 2)):
        with T.device(f"/job:ps/task:{i}"):  # zeros made on the PS: the table never crosses
            zeros = make_op("Expand", [constant(np.zeros((1, SPARSE_WIDTH), np.float32)),
                                       constant(np.asarray([size, SPARSE_WIDTH], np.int64))]).outputs[0]
            shards.append(T.Variable(zeros, name=f"{name}/part_{i}"))
    looked_up = T.nn.embedding_lookup(shards, ids, partition_strategy="div")
    loss = T.reduce_sum(T.square(looked_up - 1.0))
    return shards, T.train.GradientDescentOptimizer(0.01).minimize(loss, var_list=shards)


def sparse_case(server, r, args) -> dict:
    """32 random rows per step of a small and of a big table (steps alternating, so both see the
    same load), looked up and updated (sparse SGD) on the PS tasks."""
    import trainer as T

    sizes = (args.sparse_small_mb, args.sparse_big_mb)
    g = T.Graph()
    with g.as_default():
        ids = T.placeholder(np.int64, (SPARSE_ROWS_PER_STEP,), name="ids")
        tables = [sparse_table(f"table_{mb}mb", mb, ids) for mb in sizes]
        variables = [v for shards, _ in tables for v in shards]
        init = T.group(*[v.initializer for v in variables])
    sess = T.Session(g, target=server.target)
    if r.task_id == 0:
        sess.run(init)
    wait_initialized(sess, variables)
    rng = np.random.default_rng(r.task_id)
    rows = [mb * (1 << 20) // (SPARSE_WIDTH * 4) for mb in sizes]
    steps = [lambda train=train, n=n: sess.run(train, {ids: rng.integers(0, n, SPARSE_ROWS_PER_STEP)})
             for (_, train), n in zip(tables, rows)]
    for _ in range(10):
        steps[0]()
        steps[1]()
    small, big = timed_pair(steps[0], steps[1], args.steps)
    return dict(small_ms=statistics.median(small), big_ms=statistics.median(big), rows=rows)


def distbelief_case(server, r, args) -> dict:
    """The same model trained by our dataflow step and by DistBelief get/put, steps alternating."""
    import trainer as T
    from benchmarks import distributed_modes as modes

    g, ids, y, loss, train, init = modes.build("ours")
    gd, ids_d, y_d, _, db, _ = modes.build("distbelief")  # the same variables, by name, on the same PS tasks
    ours, theirs = T.Session(g, target=server.target), T.Session(gd, target=server.target)
    ours.run(init)
    rng = np.random.default_rng(1)

    def feeds(i, yy):
        return {i: rng.integers(0, modes.USERS, modes.BATCH), yy: rng.normal(0, 1, modes.BATCH).astype(np.float32)}

    moved = {"ours": 0, "distbelief": 0}

    def counted(name, fn):
        def step():
            before = server.bytes_moved()
            fn()
            moved[name] += server.bytes_moved() - before
        return step

    ours_step = counted("ours", lambda: ours.run(train, feeds(ids, y)))
    db_step = counted("distbelief", lambda: db.step(theirs, feeds(ids_d, y_d)))
    a, b = timed_pair(ours_step, db_step, args.steps)
    steps = args.steps + 1  # timed_pair warms each up once
    return dict(ours_ms=statistics.median(a), db_ms=statistics.median(b), ours_bytes=moved["ours"] / steps,
                db_bytes=moved["distbelief"] / steps, db_model_bytes=db.bytes_per_step)


def small_dense_model(device_fn, sync: tuple[int, int] | None, timeout: float = 30.0):
    """A 256-wide two-layer regression on 1 PS; ``sync=(m, n)`` wraps SGD in SyncReplicasOptimizer."""
    import trainer as T

    g = T.Graph()
    rng = np.random.default_rng(0)
    with g.as_default(), T.device(device_fn):
        x = T.placeholder(np.float32, (64, 256), name="x")
        y = T.placeholder(np.float32, (64, 1), name="y")
        step = T.train.get_or_create_global_step()
        w1 = T.Variable(rng.normal(0, 0.05, (256, 256)).astype(np.float32), name="w1")
        w2 = T.Variable(rng.normal(0, 0.05, (256, 1)).astype(np.float32), name="w2")
        loss = T.reduce_mean(T.square(T.matmul(T.nn.relu(T.matmul(x, w1)), w2) - y))
        opt = T.train.GradientDescentOptimizer(0.01)
        if sync is not None:
            opt = T.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=sync[0], total_num_replicas=sync[1],
                                                timeout_secs=timeout)
        train = opt.minimize(loss, global_step=step)
    feed = {x: rng.normal(0, 1, (64, 256)).astype(np.float32), y: rng.normal(0, 1, (64, 1)).astype(np.float32)}
    return g, train, opt, feed


def training_case(server, r, args) -> dict:
    """Train ``small_dense_model`` (async, or sync m of n) under a MonitoredTrainingSession until the
    global step reaches ``--steps``; worker ``--straggler`` sleeps 3x ``--sleep`` before each step,
    the others 1x. Returns this worker's step times and the wall-clock span of its steps."""
    import trainer as T

    sync = (args.aggregate, args.replicas) if args.aggregate else None
    device_fn = T.train.replica_device_setter(cluster=r.cluster_spec(), worker_device=f"/job:worker/task:{r.task_id}")
    g, train, opt, feed = small_dense_model(device_fn, sync)
    is_chief = r.task_id == 0
    with g.as_default():
        hooks = [T.train.StopAtStepHook(last_step=args.steps)]
        if sync is not None:
            hooks.append(opt.make_session_run_hook(is_chief))
    sleep = args.sleep * (3 if r.task_id == args.straggler else 1)
    times: list[float] = []
    with T.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief, graph=g, hooks=hooks,
                                          ready_timeout=60.0) as sess:
        start, first_step = time.time(), sess.step
        while not sess.should_stop():
            t0 = time.perf_counter()
            time.sleep(sleep)
            sess.run(train, feed)
            times.append((time.perf_counter() - t0) * 1e3)
        end, global_steps = time.time(), sess.step - first_step
    # the job's step time as this worker saw it: wall time per global step
    return dict(ms=statistics.median(times), runs=len(times), start=start, end=end,
                step_ms=(end - start) * 1e3 / max(global_steps, 1))


def overhead_case(server, r, args) -> dict:
    """Null steps in blocks: with a PeerWatcher (1 s interval) and a TaskMetrics record per step,
    and without either, alternating, so both see the same load."""
    import trainer as T
    from trainer.distributed.watch import PeerWatcher

    g = T.Graph()
    with g.as_default(), T.device("/job:ps/task:0"):
        w = T.Variable(np.zeros((), np.float32), name="w")
        step = w.assign_add(np.float32(1.0))
    sess = T.Session(g, target=server.target)
    sess.run(w.initializer)
    timed(lambda: sess.run(step), 50)
    blocks: dict[str, list[float]] = {"with": [], "without": []}
    for block in range(2 * args.overhead_blocks):
        watched = block % 2 == 0
        watcher = PeerWatcher(server.peers, 1.0, 1.0, "bench") if watched else None
        if watcher is not None:
            watcher.start()

        def one_step():
            t0 = time.perf_counter()
            sess.run(step)
            if watched:
                server.metrics.observe_step(time.perf_counter() - t0)

        blocks["with" if watched else "without"].append(statistics.median(timed(one_step, args.steps, warmup=5)))
        if watcher is not None:
            watcher.stop()
    return {k: v for k, v in blocks.items()}


CASES = {"overhead": overhead_case, "null": null_case, "dense": dense_case, "sparse": sparse_case, "distbelief": distbelief_case,
         "train": training_case}


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


def run_job(case: str, ps: int, workers: int, extra: list[str], timeout: float = 300.0) -> list[dict]:
    """Start ``ps`` PS tasks and ``workers`` worker tasks of ``case``; the workers' results."""
    ports = free_ports(1 + ps + workers)
    cluster = {"ps": [f"127.0.0.1:{p}" for p in ports[1:1 + ps]],
               "worker": [f"127.0.0.1:{p}" for p in ports[1 + ps:]]}
    # one BLAS thread per task: several tasks share the cores, as tasks of one machine would
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")

    def start(job, index, more):
        e = dict(env, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": job, "index": index}}))
        return subprocess.Popen([sys.executable, __file__, "--role", job, "--echo-port", str(ports[0]), *more],
                                env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    procs = [start("ps", i, ["--echo" if i == 0 else "--no-echo"]) for i in range(ps)]
    procs += [start("worker", i, ["--case", case, *extra]) for i in range(workers)]
    results = []
    try:
        for p in procs[ps:]:
            out, _ = p.communicate(timeout=timeout)
            lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
            if p.returncode != 0 or not lines:
                raise RuntimeError(f"worker failed ({p.returncode}):\n{out[-3000:]}")
            results.append(json.loads(lines[-1][len("RESULT "):]))
        for p in procs[:ps]:
            p.communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return results


def report_null(args) -> None:
    print("(a) null step: scalar variable on 1 PS, assign_add + fetch per step; median ms per step")
    print(f"{'workers':>8} {'task':>10} {'ours ms':>9} {'raw grpc unary ms':>18} {'ratio':>7}")
    for workers in (1, 2):
        for r in run_job("null", 1, workers, ["--steps", str(args.null_steps)]):
            print(f"{workers:>8} {r['task']:>10} {r['ours_ms']:>9.3f} {r['raw_ms']:>18.3f} "
                  f"{r['ours_ms'] / r['raw_ms']:>7.2f}")


def report_dense(args) -> None:
    print(f"(b) dense: {args.dense_mb} MB of parameters fetched and updated per step (2x{args.dense_mb} MB moved)")
    print(f"{'ours MB/s':>10} {'raw echo MB/s':>14} {'ours/raw':>9} {'ours ms/step':>13} {'raw ms':>8}")
    for r in run_job("dense", 1, 1, ["--steps", str(args.dense_steps), "--dense-mb", str(args.dense_mb)]):
        print(f"{r['ours_mb_s']:>10.0f} {r['raw_mb_s']:>14.0f} {r['ours_mb_s'] / r['raw_mb_s']:>9.2f} "
              f"{r['ours_ms']:>13.1f} {r['raw_ms']:>8.1f}")


def report_sparse(args) -> None:
    small, big = args.sparse_small_mb, args.sparse_big_mb
    print(f"(c) sparse: {SPARSE_ROWS_PER_STEP} random rows x {SPARSE_WIDTH} float32 per worker per step, tables "
          f"of {small} MB and {big} MB, each in 2 shards on 2 PS, 2 workers, steps alternating; median ms per step")
    res = run_job("sparse", 2, 2, ["--steps", str(args.sparse_steps), "--sparse-small-mb", str(small),
                                   "--sparse-big-mb", str(big)])
    print(f"{'task':>10} {f'{small} MB ms':>11} {f'{big} MB ms':>11} {'ratio':>7}")
    for r in res:
        print(f"{r['task']:>10} {r['small_ms']:>11.3f} {r['big_ms']:>11.3f} {r['big_ms'] / r['small_ms']:>7.2f}")
    ratio = statistics.median(r["big_ms"] for r in res) / statistics.median(r["small_ms"] for r in res)
    print(f"ratio {big} MB / {small} MB: {ratio:.2f} (target <= 1.2; rows {res[0]['rows'][0]:,} and "
          f"{res[0]['rows'][1]:,})")


def report_distbelief(args) -> None:
    print("(d) DistBelief get/put vs ours: 100000x32 embedding + 64-unit layer over 2 PS, batch 64, 1 worker")
    (r,) = run_job("distbelief", 2, 1, ["--steps", str(args.db_steps)])
    print(f"{'mode':>11} {'ms/step':>9} {'bytes moved/step':>17}")
    print(f"{'ours':>11} {r['ours_ms']:>9.2f} {r['ours_bytes']:>17,.0f}")
    print(f"{'distbelief':>11} {r['db_ms']:>9.2f} {r['db_bytes']:>17,.0f}   (model: {r['db_model_bytes']:,} "
          "= every parameter and gradient)")
    ratio = r["db_bytes"] / max(r["ours_bytes"], 1)
    print(f"distbelief/ours: {r['db_ms'] / r['ours_ms']:.1f}x time, {ratio:.0f}x bytes")


def report_sync(args) -> None:
    print(f"(e) sync, 4 workers, worker 3 a 3x straggler (sleep {args.sleep * 1e3:.0f} ms, 3x on worker 3), "
          f"{args.sync_steps} global steps; wall ms per global step")
    medians = {}
    for backups in (0, 1):
        res = run_job("train", 1, 4, ["--steps", str(args.sync_steps), "--aggregate", str(4 - backups),
                                      "--replicas", "4", "--sleep", str(args.sleep), "--straggler", "3"])
        medians[backups] = res[0]["step_ms"]
        print(f"  {backups} backup ({4 - backups} of 4): {res[0]['step_ms']:.1f} ms per global step; median run: "
              f"chief {res[0]['ms']:.1f} ms, straggler {res[3]['ms']:.1f} ms")
    print(f"with the backup: {100 * (1 - medians[1] / medians[0]):.0f}% lower (target >= 20%)")


def report_modes(args) -> None:
    print(f"(f) async vs sync (m = n) throughput, 256x256 two-layer model on 1 PS, {args.mode_steps} global steps; "
          "batches applied per second")
    print(f"{'workers':>8} {'async':>9} {'sync':>9} {'sync/async':>11}")
    for workers in (1, 2, 4):
        rates = []
        for aggregate in (0, workers):
            res = run_job("train", 1, workers, ["--steps", str(args.mode_steps), "--aggregate", str(aggregate),
                                                "--replicas", str(workers), "--sleep", "0"])
            span = max(r["end"] for r in res) - min(r["start"] for r in res)
            rates.append(sum(r["runs"] for r in res) / span)
        print(f"{workers:>8} {rates[0]:>9.1f} {rates[1]:>9.1f} {rates[1] / rates[0]:>11.2f}")


def report_recovery(args) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.chaos import Kill
    from benchmarks.chaos import run_job as chaos_job

    print("(g) recovery after SIGKILL of the PS at global step 100 (1 PS + 2 workers, launcher, checkpoint every "
          "40 steps); seconds after the kill")
    print(f"{'run':>4} {'failure seen':>13} {'PS restarted':>13} {'restored':>9} {'first step':>11} {'lost steps':>11} "
          f"{'status':>7}")
    for run in range(args.recovery_runs):
        r = chaos_job([Kill("ps:0", 100)], workers=2)
        killed = r.killed_at[0]

        def first(task_prefix: str, text: str) -> float:
            times = [t - killed for t, task, msg in r.events if t >= killed and task.startswith(task_prefix) and text in msg]
            return times[0] if times else float("nan")

        seen = first("worker", "a peer task failed or restarted")
        restarted = first("launcher", "ps:0 exited")
        restored = first("worker:0", "restored step")
        stepped = first("worker:0", "first step after restore")
        print(f"{run:>4} {seen:>13.2f} {restarted:>13.2f} {restored:>9.2f} {stepped:>11.2f} "
              f"{str(r.lost_steps):>11} {r.code:>7}")


def report_overhead(args) -> None:
    print(f"(h) null step (1 PS, 1 worker) with health checks + metrics and without: median ms per step over "
          f"{args.overhead_blocks} alternating blocks of {args.steps} steps each")
    (r,) = run_job("overhead", 1, 1, ["--steps", str(args.steps), "--overhead-blocks", str(args.overhead_blocks)])
    on, off = statistics.median(r["with"]), statistics.median(r["without"])
    spread = max(r["without"]) - min(r["without"])
    print(f"with {on:.3f} ms, without {off:.3f} ms, ratio {on / off:.3f}; block medians without: "
          f"{' '.join(f'{x:.3f}' for x in r['without'])} (spread {spread:.3f} ms); with: "
          f"{' '.join(f'{x:.3f}' for x in r['with'])}")


REPORTS = {"a": report_null, "b": report_dense, "c": report_sparse, "d": report_distbelief, "e": report_sync,
           "f": report_modes, "g": report_recovery, "h": report_overhead}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--role", choices=("main", "ps", "worker"), default="main")
    p.add_argument("--case", choices=sorted(CASES), default="null")
    p.add_argument("--only", default=",".join(REPORTS), help="which parts to run, e.g. 'a,c,e'")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--echo-port", type=int, default=0)
    p.add_argument("--echo", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--null-steps", type=int, default=500)
    p.add_argument("--dense-steps", type=int, default=30)
    p.add_argument("--dense-mb", type=int, default=100)
    p.add_argument("--sparse-steps", type=int, default=200)
    p.add_argument("--sparse-small-mb", type=int, default=100)
    p.add_argument("--sparse-big-mb", type=int, default=1024)
    p.add_argument("--db-steps", type=int, default=10)
    p.add_argument("--sync-steps", type=int, default=30)
    p.add_argument("--mode-steps", type=int, default=60)
    p.add_argument("--sleep", type=float, default=0.03)
    p.add_argument("--aggregate", type=int, default=0, help="(worker) sync m; 0 trains asynchronously")
    p.add_argument("--replicas", type=int, default=1)
    p.add_argument("--straggler", type=int, default=-1)
    p.add_argument("--recovery-runs", type=int, default=2)
    p.add_argument("--overhead-blocks", type=int, default=6)
    args = p.parse_args()
    if args.role == "ps":
        return run_ps(args.echo_port if args.echo else 0)
    if args.role == "worker":
        return run_worker(args)
    for part in args.only.split(","):
        REPORTS[part.strip()](args)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
