"""Run a cluster's tasks as local processes on 127.0.0.1 and supervise them as one job.

``LocalJob(ps=1, workers=2).run(["python", "train.py"])`` picks free ports, starts every task with
``TF_CONFIG`` set for it (as the Kubeflow training operator would), plus ``FLOWSTACK_JOB_ID`` (one
per job), ``FLOWSTACK_METRICS_PORT`` (its Prometheus ``/metrics``) and ``FLOWSTACK_RESTARTS``,
prefixes each line a task prints with its name (``[ps:0] ...``), and returns the job's exit status.

The tasks share this host's cores, and each one's BLAS and OpenMP would otherwise start a thread per
core: three tasks on two cores then run six busy threads, and a GEMM waits on its own threads being
descheduled. Unless the environment already sets one of them, each task gets ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS`` and ``MKL_NUM_THREADS`` of ``cores // tasks`` (at least 1), as ``torchrun``
sets ``OMP_NUM_THREADS``.

Failed tasks are restarted as the operator's ``restartPolicy: ExitCode`` would: a task that exits
with a retryable status (``exit_codes.is_retryable``: killed by a signal, or 128-255 such as
``PEER_UNAVAILABLE``) is started again, with the same TF_CONFIG, up to ``max_restarts`` times; the
job then fails with that task's status. A permanent status (1-127) fails the job at once. The job
also fails with 1 when a PS is still running ``grace`` seconds after every worker finished (it is
killed: a PS must end by itself once the workers are done), and with 124 when it outlives ``timeout``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Sequence, TextIO

from trainer.distributed.cluster import JOB_ID_ENV, SERVING_JOBS
from trainer.distributed.exit_codes import TIMED_OUT, is_retryable
from trainer.distributed.metrics import RESTARTS_ENV
from trainer.distributed.server import METRICS_PORT_ENV

__all__ = ["DEFAULT_MAX_RESTARTS", "LocalJob"]

DEFAULT_MAX_RESTARTS = 3
THREAD_COUNT_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass
class _Task:
    job: str
    index: int
    proc: subprocess.Popen
    reader: threading.Thread
    restarts: int = 0

    @property
    def label(self) -> str:
        return f"{self.job}:{self.index}"


def _status(code: int) -> int:
    """A process's exit status as a shell reports it (killed by signal n: 128 + n)."""
    return code if code >= 0 else 128 - code


class LocalJob:
    """A cluster of ``ps`` PS tasks, ``workers`` workers and optionally a chief, all on 127.0.0.1."""

    def __init__(self, ps: int = 1, workers: int = 1, chief: bool = False, *, timeout: float | None = None,
                 grace: float = 15.0, out: TextIO | None = None, host: str = "127.0.0.1",
                 max_restarts: int = DEFAULT_MAX_RESTARTS, env: dict[str, str] | None = None):
        if ps < 0 or workers < 0 or (workers == 0 and not chief):
            raise ValueError(f"a job needs at least one worker or a chief (got --ps {ps} --workers {workers})")
        if max_restarts < 0:
            raise ValueError(f"--max-restarts must be >= 0, got {max_restarts}")
        self.counts = {"chief": int(chief), "ps": ps, "worker": workers}
        self.timeout, self.grace, self.host, self.max_restarts = timeout, grace, host, max_restarts
        self.out = out or sys.stdout
        self.env = dict(env or {})
        self.job_id = f"local-{secrets.token_hex(6)}"
        self._lock = threading.Lock()
        self.tasks: dict[str, _Task] = {}
        self.cluster = {}
        self.metrics_ports: dict[str, int] = {}
        ports = iter(self._free_ports(2 * sum(self.counts.values())))
        for job, n in self.counts.items():
            for i in range(n):
                self.cluster.setdefault(job, []).append(f"{self.host}:{next(ports)}")
                self.metrics_ports[f"{job}:{i}"] = next(ports)

    def _free_ports(self, n: int) -> list[int]:
        socks = []
        for _ in range(n):
            s = socket.socket()
            s.bind((self.host, 0))
            socks.append(s)
        ports = [s.getsockname()[1] for s in socks]
        for s in socks:
            s.close()
        return ports

    def threads_per_task(self) -> int:
        """This host's cores shared out over the job's tasks, at least one each."""
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            cores = os.cpu_count() or 1
        return max(1, cores // sum(self.counts.values()))

    def tf_config(self, job: str, index: int) -> str:
        return json.dumps({"cluster": self.cluster, "task": {"type": job, "index": index}, "environment": "cloud"})

    def say(self, label: str, line: str) -> None:
        with self._lock:
            self.out.write(f"[{label}] {line}" if line.endswith("\n") else f"[{label}] {line}\n")
            self.out.flush()

    def run(self, command: Sequence[str]) -> int:
        """Start every task running ``command`` and wait for the job's end; its exit status."""
        if not command:
            raise ValueError("no command to run: flowstack cluster launch ... -- python script.py ARGS")
        self.say("launcher", f"job {self.job_id}: metrics at " + ", ".join(
            f"{label} http://{self.host}:{port}/metrics" for label, port in self.metrics_ports.items()))
        for job, n in self.counts.items():
            for i in range(n):
                self._start(job, i, command)
        try:
            return self._supervise(command)
        finally:
            tasks = self.all_tasks()
            for t in tasks:
                if t.proc.poll() is None:
                    t.proc.kill()
            for t in tasks:
                try:
                    t.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                t.reader.join(timeout=5)
                t.proc.stdout.close()

    def all_tasks(self) -> list[_Task]:
        with self._lock:
            return list(self.tasks.values())

    def kill(self, label: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the running task ``label`` (``"ps:0"``): what chaos tests do."""
        with self._lock:
            task = self.tasks[label]
        if task.proc.poll() is None:
            task.proc.send_signal(sig)

    def _start(self, job: str, index: int, command: Sequence[str], restarts: int = 0) -> _Task:
        label = f"{job}:{index}"
        env = dict(os.environ, **self.env, TF_CONFIG=self.tf_config(job, index), PYTHONUNBUFFERED="1")
        if not any(name in env for name in THREAD_COUNT_VARIABLES):
            env.update(dict.fromkeys(THREAD_COUNT_VARIABLES, str(self.threads_per_task())))
        env.update({JOB_ID_ENV: self.job_id, METRICS_PORT_ENV: str(self.metrics_ports[label]),
                    RESTARTS_ENV: str(restarts)})
        proc = subprocess.Popen(list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace")
        reader = threading.Thread(target=self._pump, args=(label, proc), daemon=True, name=f"log-{label}")
        reader.start()
        task = _Task(job, index, proc, reader, restarts)
        with self._lock:
            self.tasks[label] = task
        return task

    def _restart_or_fail(self, task: _Task, code: int, command: Sequence[str]) -> int | None:
        """Restart ``task`` (exited with ``code``) if its status says a restart can help and it has
        restarts left: None; else the job's exit status."""
        status = _status(code)
        if not is_retryable(code):
            self.say("launcher", f"{task.label} failed with exit status {status} (permanent: a restart would fail "
                                 "the same way); stopping the job")
            return status
        if task.restarts >= self.max_restarts:
            self.say("launcher", f"{task.label} failed with exit status {status} after {task.restarts} restart(s) "
                                 f"(--max-restarts {self.max_restarts}); stopping the job")
            return status
        task.reader.join(timeout=5)
        task.proc.stdout.close()
        self.say("launcher", f"{task.label} exited with status {status} (retryable); restarting it "
                             f"(restart {task.restarts + 1} of {self.max_restarts})")
        self._start(task.job, task.index, command, task.restarts + 1)
        return None

    def _pump(self, label: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.say(label, line)

    def _supervise(self, command: Sequence[str]) -> int:
        start = time.monotonic()
        workers_done_at = None
        while True:
            tasks = self.all_tasks()
            workers = [t for t in tasks if t.job not in SERVING_JOBS]
            servers = [t for t in tasks if t.job in SERVING_JOBS]
            for t in tasks:
                code = t.proc.poll()
                if code not in (None, 0):
                    status = self._restart_or_fail(t, code, command)
                    if status is not None:
                        return status
                    workers_done_at = None
            if workers_done_at is None and all(t.proc.poll() == 0 for t in workers):
                workers_done_at = time.monotonic()
            if workers_done_at is not None:
                running = [t for t in servers if t.proc.poll() is None]
                if not running:
                    self.say("launcher", f"job finished in {time.monotonic() - start:.1f} s")
                    return 0
                if time.monotonic() - workers_done_at > self.grace:
                    names = ", ".join(t.label for t in running)
                    self.say("launcher", f"{names} still running {self.grace:g} s after every worker finished; "
                                         "killing it (a PS task must end by itself: Server.join returns when the "
                                         "workers are done)")
                    return 1
            if self.timeout is not None and time.monotonic() - start > self.timeout:
                running = ", ".join(t.label for t in tasks if t.proc.poll() is None)
                self.say("launcher", f"job still running after --timeout {self.timeout:g} s ({running}); killing it")
                for t in tasks:
                    if t.proc.poll() is None:
                        t.proc.send_signal(signal.SIGTERM)
                return TIMED_OUT
            time.sleep(0.05)
