"""Run a cluster's tasks as local processes on 127.0.0.1 and supervise them as one job.

``LocalJob(ps=1, workers=2).run(["python", "train.py"])`` picks free ports, starts every task with
``TF_CONFIG`` set for it (as the Kubeflow training operator would), prefixes each line a task
prints with its name (``[ps:0] ...``), and returns the job's exit status: the first failing
worker's code; 1 when a PS is still running ``grace`` seconds after every worker finished (it is
killed: a PS must end by itself once the workers are done); 124 when the job outlives ``timeout``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Sequence, TextIO

from trainer.distributed.cluster import SERVING_JOBS
from trainer.distributed.exit_codes import TIMED_OUT

__all__ = ["LocalJob"]


@dataclass
class _Task:
    job: str
    index: int
    proc: subprocess.Popen
    reader: threading.Thread

    @property
    def label(self) -> str:
        return f"{self.job}:{self.index}"


class LocalJob:
    """A cluster of ``ps`` PS tasks, ``workers`` workers and optionally a chief, all on 127.0.0.1."""

    def __init__(self, ps: int = 1, workers: int = 1, chief: bool = False, *, timeout: float | None = None,
                 grace: float = 15.0, out: TextIO | None = None, host: str = "127.0.0.1"):
        if ps < 0 or workers < 0 or (workers == 0 and not chief):
            raise ValueError(f"a job needs at least one worker or a chief (got --ps {ps} --workers {workers})")
        self.counts = {"chief": int(chief), "ps": ps, "worker": workers}
        self.timeout, self.grace, self.host = timeout, grace, host
        self.out = out or sys.stdout
        self._lock = threading.Lock()
        self.cluster = self._pick_addresses()

    def _pick_addresses(self) -> dict[str, list[str]]:
        socks = []
        cluster: dict[str, list[str]] = {}
        for job, n in self.counts.items():
            for _ in range(n):
                s = socket.socket()
                s.bind((self.host, 0))
                socks.append(s)
                cluster.setdefault(job, []).append(f"{self.host}:{s.getsockname()[1]}")
        for s in socks:
            s.close()
        return cluster

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
        tasks = [self._start(job, i, command) for job, n in self.counts.items() for i in range(n)]
        try:
            return self._supervise(tasks)
        finally:
            for t in tasks:
                if t.proc.poll() is None:
                    t.proc.kill()
            for t in tasks:
                try:
                    t.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                t.reader.join(timeout=5)

    def _start(self, job: str, index: int, command: Sequence[str]) -> _Task:
        env = dict(os.environ, TF_CONFIG=self.tf_config(job, index), PYTHONUNBUFFERED="1")
        proc = subprocess.Popen(list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, errors="replace")
        label = f"{job}:{index}"
        reader = threading.Thread(target=self._pump, args=(label, proc), daemon=True, name=f"log-{label}")
        reader.start()
        return _Task(job, index, proc, reader)

    def _pump(self, label: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            self.say(label, line)

    def _supervise(self, tasks: list[_Task]) -> int:
        start = time.monotonic()
        workers = [t for t in tasks if t.job not in SERVING_JOBS]
        servers = [t for t in tasks if t.job in SERVING_JOBS]
        workers_done_at = None
        while True:
            for t in tasks:
                code = t.proc.poll()
                if code not in (None, 0):
                    self.say("launcher", f"{t.label} failed with exit status {code}; stopping the job")
                    return code if code > 0 else 128 - code
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
