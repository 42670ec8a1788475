"""Cluster descriptions: which tasks exist and where they listen.

``ClusterSpec`` maps job names to task addresses (TF 1.x's class of the same name);
``TFConfigClusterResolver`` reads the ``TF_CONFIG`` environment variable exactly as the Kubeflow
training operator (and ``flowstack cluster launch``) sets it::

    TF_CONFIG='{"cluster": {"ps": ["10.0.0.1:2222"], "worker": ["10.0.0.2:2222", "10.0.0.3:2222"]},
                "task": {"type": "worker", "index": 1}}'

A task is named ``/job:<job>/task:<index>`` everywhere in the runtime (``task_name``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Mapping

__all__ = ["JOB_ID_ENV", "ClusterConfigError", "ClusterSpec", "TFConfigClusterResolver", "chief_task", "job_id_of",
           "split_task_name", "task_name"]

# Jobs whose tasks run training steps (the job is done when all of them are); "ps" tasks serve.
SERVING_JOBS = frozenset({"ps"})
_JOB_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
# Names the job a task belongs to (the launcher sets a fresh one per job; on Kubernetes, the TFJob's
# name and uid). Requests between tasks carry it, so a task left over from another job is refused.
JOB_ID_ENV = "FLOWSTACK_JOB_ID"


class ClusterConfigError(ValueError):
    """A cluster description or TF_CONFIG that cannot be used; names the field at fault."""


def task_name(job: str, index: int) -> str:
    """``task_name("ps", 0) == "/job:ps/task:0"``."""
    return f"/job:{job}/task:{int(index)}"


class ClusterSpec:
    """Jobs and their task addresses: ``ClusterSpec({"ps": ["h:1"], "worker": ["h:2", "h:3"]})``.

    A job's tasks are a list (indices 0..n-1) or a dict {index: address} (sparse, as TF allows).

    >>> c = ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]})
    >>> c.jobs, c.num_tasks("worker"), c.task_address("worker", 1)
    (['ps', 'worker'], 2, '127.0.0.1:2224')
    """

    def __init__(self, cluster: "ClusterSpec | Mapping[str, object]"):
        if isinstance(cluster, ClusterSpec):
            cluster = cluster.as_dict()
        if not isinstance(cluster, Mapping):
            raise ClusterConfigError(f"cluster must be a dict of job name -> addresses, not {type(cluster).__name__}")
        self._jobs: dict[str, dict[int, str]] = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str) or not _JOB_NAME.match(job):
                raise ClusterConfigError(f"cluster job name {job!r} is not a valid name (letters, digits, _ and -)")
            self._jobs[job] = _tasks_of(job, tasks)

    @property
    def jobs(self) -> list[str]:
        return sorted(self._jobs)

    def as_dict(self) -> dict[str, list[str] | dict[int, str]]:
        """Lists for dense jobs, {index: address} for sparse ones (what TF returns)."""
        out: dict = {}
        for job in self.jobs:
            tasks = self._jobs[job]
            out[job] = [tasks[i] for i in range(len(tasks))] if sorted(tasks) == list(range(len(tasks))) else dict(tasks)
        return out

    def job_tasks(self, job: str) -> list[str]:
        """Addresses of ``job``'s tasks in index order."""
        return [self._job(job)[i] for i in sorted(self._job(job))]

    def task_indices(self, job: str) -> list[int]:
        return sorted(self._job(job))

    def num_tasks(self, job: str) -> int:
        return len(self._job(job))

    def task_address(self, job: str, index: int) -> str:
        tasks = self._job(job)
        if index not in tasks:
            raise ClusterConfigError(f"task index {index} is out of range for job {job!r} (indices {sorted(tasks)})")
        return tasks[index]

    def tasks(self) -> list[str]:
        """Every task's name, ``/job:<job>/task:<i>``, jobs in name order."""
        return [task_name(job, i) for job in self.jobs for i in sorted(self._jobs[job])]

    def address_of(self, task: str) -> str:
        """Address of a task named ``/job:<job>/task:<i>``; a clear error for tasks outside the cluster."""
        job, index = split_task_name(task)
        if job not in self._jobs or index not in self._jobs[job]:
            raise ClusterConfigError(f"task {task} is not in this cluster (tasks: {', '.join(self.tasks())})")
        return self._jobs[job][index]

    def has_task(self, task: str) -> bool:
        try:
            job, index = split_task_name(task)
        except ClusterConfigError:
            return False
        return index in self._jobs.get(job, {})

    def _job(self, job: str) -> dict[int, str]:
        try:
            return self._jobs[job]
        except KeyError:
            raise ClusterConfigError(f"job {job!r} is not in this cluster (jobs: {', '.join(self.jobs)})") from None

    def __eq__(self, other) -> bool:
        return isinstance(other, ClusterSpec) and other._jobs == self._jobs

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"


def chief_task(cluster: ClusterSpec) -> str:
    """The chief: ``/job:chief/task:0`` when the cluster has that job, else worker 0 (TF's rule)."""
    return task_name("chief", 0) if "chief" in cluster.jobs else task_name("worker", 0)


def job_id_of(cluster: ClusterSpec, environ: Mapping[str, str] | None = None) -> str:
    """This job's id: ``$FLOWSTACK_JOB_ID`` when set, else one derived from the cluster's addresses
    (every task reading the same TF_CONFIG agrees on it without being told)."""
    env = os.environ if environ is None else environ
    given = env.get(JOB_ID_ENV, "").strip()
    if given:
        return given
    digest = hashlib.sha256(json.dumps(cluster.as_dict(), sort_keys=True, default=str).encode()).hexdigest()
    return f"cluster-{digest[:12]}"


def split_task_name(task: str) -> tuple[str, int]:
    """("ps", 0) from "/job:ps/task:0"."""
    m = re.match(r"^/job:([^/]+)/task:(\d+)$", task or "")
    if not m:
        raise ClusterConfigError(f"{task!r} is not a task name like '/job:ps/task:0'")
    return m.group(1), int(m.group(2))


def _tasks_of(job: str, tasks) -> dict[int, str]:
    if isinstance(tasks, str):
        raise ClusterConfigError(f"cluster job {job!r}: expected a list of 'host:port' addresses, got the string {tasks!r}")
    if isinstance(tasks, Mapping):
        items = []
        for k, v in tasks.items():
            try:
                items.append((int(k), v))
            except (TypeError, ValueError):
                raise ClusterConfigError(f"cluster job {job!r}: task index {k!r} is not an integer") from None
    elif isinstance(tasks, (list, tuple)):
        items = list(enumerate(tasks))
    else:
        raise ClusterConfigError(f"cluster job {job!r}: expected a list of addresses, got {type(tasks).__name__}")
    out = {}
    for i, addr in items:
        if i < 0:
            raise ClusterConfigError(f"cluster job {job!r}: task index {i} is negative")
        if not isinstance(addr, str) or ":" not in addr:
            raise ClusterConfigError(f"cluster job {job!r} task {i}: address {addr!r} is not 'host:port'")
        out[i] = addr
    return out


class TFConfigClusterResolver:
    """The cluster and this process's task, from ``TF_CONFIG`` (Kubeflow training operator format).

    ``environ`` defaults to ``os.environ``; pass a dict to resolve another configuration.
    """

    def __init__(self, environ: Mapping[str, str] | None = None, rpc_layer: str = "grpc"):
        env = os.environ if environ is None else environ
        self.rpc_layer = rpc_layer
        raw = env.get("TF_CONFIG")
        if raw is None or not raw.strip():
            raise ClusterConfigError("TF_CONFIG is not set: expected {\"cluster\": {...}, \"task\": {\"type\": ..., \"index\": ...}}")
        try:
            config = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ClusterConfigError(f"TF_CONFIG is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        if not isinstance(config, dict):
            raise ClusterConfigError(f"TF_CONFIG must be a JSON object, got {type(config).__name__}")
        if "cluster" not in config:
            raise ClusterConfigError("TF_CONFIG.cluster is missing")
        try:
            self._cluster = ClusterSpec(config["cluster"])
        except ClusterConfigError as e:
            raise ClusterConfigError(f"TF_CONFIG.cluster: {e}") from None
        task = config.get("task")
        if not isinstance(task, dict):
            raise ClusterConfigError("TF_CONFIG.task is missing (expected {\"type\": <job>, \"index\": <n>})")
        if "type" not in task:
            raise ClusterConfigError("TF_CONFIG.task.type is missing")
        job = task["type"]
        if job not in self._cluster.jobs:
            raise ClusterConfigError(f"TF_CONFIG.task.type {job!r} is not a job of TF_CONFIG.cluster "
                                     f"(jobs: {', '.join(self._cluster.jobs)})")
        index = task.get("index", 0)
        if isinstance(index, bool) or not isinstance(index, int):
            raise ClusterConfigError(f"TF_CONFIG.task.index {index!r} is not an integer")
        if index not in self._cluster.task_indices(job):
            raise ClusterConfigError(f"TF_CONFIG.task.index {index} is out of range for job {job!r}, which has "
                                     f"{self._cluster.num_tasks(job)} task(s)")
        self.task_type: str = job
        self.task_id: int = index
        self.environment = config.get("environment", "")

    def cluster_spec(self) -> ClusterSpec:
        return self._cluster

    def master(self, task_type: str | None = None, task_id: int | None = None, rpc_layer: str | None = None) -> str:
        """``grpc://host:port`` of a task (this one by default)."""
        address = self._cluster.task_address(task_type or self.task_type,
                                             self.task_id if task_id is None else task_id)
        layer = self.rpc_layer if rpc_layer is None else rpc_layer
        return f"{layer}://{address}" if layer else address
