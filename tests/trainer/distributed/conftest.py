"""Clusters of real processes on 127.0.0.1 for the distributed runtime's tests."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PS_TASK = Path(__file__).with_name("ps_task.py")


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def make_cluster(ps: int = 1, workers: int = 1) -> dict:
    ports = free_ports(ps + workers)
    return {"ps": [f"127.0.0.1:{p}" for p in ports[:ps]],
            "worker": [f"127.0.0.1:{p}" for p in ports[ps:]]}


def task_env(cluster: dict, job: str, index: int) -> dict:
    env = dict(os.environ)
    env["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": job, "index": index}})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Processes:
    """Started task processes, killed at the end of the test whatever happens."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start_ps(self, cluster: dict, index: int = 0, timeout: float = 10.0, max_seconds: float = 60.0) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, str(PS_TASK), "--timeout", str(timeout), "--max-seconds", str(max_seconds)],
                             env=task_env(cluster, "ps", index), cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def start(self, args: list[str], cluster: dict, job: str, index: int) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, *args], env=task_env(cluster, job, index), cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.procs.append(p)
        return p

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            try:
                p.communicate(timeout=10)
            except (subprocess.TimeoutExpired, ValueError):
                pass


@pytest.fixture
def processes():
    procs = Processes()
    yield procs
    procs.kill_all()


def wait_exit(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def wait_listening(address: str, timeout: float = 20.0) -> None:
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on {address} after {timeout} s")
