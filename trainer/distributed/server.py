"""``Server``: the gRPC server of one task of a cluster (TF 1.x's ``tf.train.Server``).

    server = trainer.train.Server(cluster, job_name="ps", task_index=0)
    server.join()   # on a PS: returns once every worker said it is done (TF's never returned)

A worker passes ``server.target`` to ``Session(target=...)`` / ``MonitoredTrainingSession(master=...)``;
the session then runs the nodes placed on other tasks there. ``done()`` (called by
``MonitoredTrainingSession`` when it closes) tells every PS this worker is finished.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from trainer.distributed.cluster import SERVING_JOBS, ClusterConfigError, ClusterSpec, chief_task, task_name
from trainer.distributed.errors import DistributedError
from trainer.distributed.peers import PeerClient, channel_options
from trainer.distributed.task_service import TaskService

__all__ = ["DEFAULT_TIMEOUT_S", "Server", "server_for_target"]

DEFAULT_TIMEOUT_S = 60.0
_JOIN_POLL_S = 0.5  # how often a joined PS looks for dead workers once the chief is done
# Servers started in this process, by target, for Session(target=...).
_BY_TARGET: dict[str, "Server"] = {}
_BY_TARGET_LOCK = threading.Lock()


def server_for_target(target: str) -> "Server":
    """The server started in this process whose ``target`` is ``target``."""
    with _BY_TARGET_LOCK:
        server = _BY_TARGET.get(target)
    if server is None:
        known = ", ".join(sorted(_BY_TARGET)) or "none"
        raise DistributedError(f"no trainer.train.Server with target {target!r} runs in this process (running: {known}); "
                               "start one for this task and pass its .target")
    return server


class Server:
    """A task's server. ``timeout`` bounds every RPC and every wait of a step on this task;
    ``startup_timeout`` how long a session waits for the other tasks to come up.

    ``max_threads`` bounds the RPCs served at once. A step's Recvs are all started when it
    starts and each waits on a thread of the sending task until its value is sent (the digits
    CNN's worker holds 15 on the PS per step), so a PS needs about that many per worker, plus
    one per RunStep; threads are made only as needed.
    """

    def __init__(self, cluster, job_name: str | None = None, task_index: int = 0, *, start: bool = True,
                 timeout: float = DEFAULT_TIMEOUT_S, startup_timeout: float = DEFAULT_TIMEOUT_S,
                 max_threads: int = 512):
        self.cluster = ClusterSpec(cluster)
        if job_name is None:
            jobs = self.cluster.jobs
            if len(jobs) != 1:
                raise ClusterConfigError(f"job_name is required for a cluster with several jobs ({', '.join(jobs)})")
            job_name = jobs[0]
        address = self.cluster.task_address(job_name, int(task_index))
        self.job_name, self.task_index = job_name, int(task_index)
        self.task = task_name(job_name, task_index)
        self.timeout, self.startup_timeout = float(timeout), float(startup_timeout)
        host, _, port = address.rpartition(":")
        self._grpc = grpc.server(ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix=f"grpc-{self.task}"),
                                 options=channel_options() + [("grpc.so_reuseport", 0)])
        self._peers: dict[str, PeerClient] = {}
        self._peers_lock = threading.Lock()
        self.service = TaskService(self.cluster, self.task, timeout=self.timeout, receive_from=self._receiver)
        self._grpc.add_generic_rpc_handlers((self.service.handler(),))
        bind_host = host if host in ("127.0.0.1", "localhost", "[::1]") else "[::]"
        # (gRPC's default SO_REUSEPORT let a second server share a taken port, and a peer could
        # then reach a task of another job: a bind must fail instead)
        try:
            self.port = self._grpc.add_insecure_port(f"{bind_host}:{port}")
        except RuntimeError:
            self.port = 0
        if self.port == 0:
            raise DistributedError(f"{self.task} cannot listen on {address} (port in use?)")
        self.target = f"grpc://{host}:{self.port}"
        self._started = False
        self._stopped = threading.Event()
        if start:
            self.start()

    @property
    def is_ps(self) -> bool:
        return self.job_name in SERVING_JOBS

    def start(self) -> None:
        if self._started:
            return
        self._grpc.start()
        self._started = True
        with _BY_TARGET_LOCK:
            _BY_TARGET[self.target] = self

    def peer(self, task: str) -> PeerClient:
        """The client for another task (one channel per task, made on first use)."""
        with self._peers_lock:
            client = self._peers.get(task)
            if client is None:
                address = self.cluster.address_of(task)
                client = self._peers[task] = PeerClient(self.task, task, address, self.timeout)
            return client

    def bytes_moved(self) -> int:
        """Tensor bytes this task has sent to and received from other tasks so far (a Recv pulls
        a value from its sender, so both directions are counted on this side)."""
        with self._peers_lock:
            received = sum(client.bytes_received for client in self._peers.values())
        return self.service.bytes_sent + received

    def _receiver(self, task: str):
        return self.peer(task).start_recv

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the job to end: on a PS until every worker is done, elsewhere until ``stop``.

        A worker that died never says it is done: once the chief is done, a PS also ends the job
        when every worker still missing no longer answers (so a PS exits after a SIGKILLed worker).
        Returns True once the job ended (the server is then stopped), False on ``timeout``.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopped.is_set():
            if self.is_ps and (self.service.job_done.is_set() or self._only_dead_workers_left()):
                break
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            ended = self.service.job_done if self.is_ps else self._stopped
            ended.wait(_JOIN_POLL_S if left is None else min(_JOIN_POLL_S, left))
        self.stop()
        return True

    def _only_dead_workers_left(self) -> bool:
        """The chief is done and none of the workers not done yet answers a health check."""
        missing = self.service.workers_not_done()
        if chief_task(self.cluster) in missing:
            return False
        for task in missing:
            try:
                self.peer(task).health(timeout=_JOIN_POLL_S)
                return False
            except DistributedError:
                continue
        return True

    def done(self) -> None:
        """Tell every PS task this worker is finished (a PS's ``join`` returns when all are)."""
        for job in self.cluster.jobs:
            if job not in SERVING_JOBS:
                continue
            for index in self.cluster.task_indices(job):
                try:
                    self.peer(task_name(job, index)).task_done()
                except DistributedError:
                    pass  # a PS that is already gone has nothing left to wait for

    def stop(self, grace: float = 1.0) -> None:
        self._stopped.set()
        self._grpc.stop(grace).wait(grace + 1.0)
        with _BY_TARGET_LOCK:
            if _BY_TARGET.get(self.target) is self:
                del _BY_TARGET[self.target]
        with self._peers_lock:
            for client in self._peers.values():
                client.close()
            self._peers.clear()
        self.service.pool.shutdown(wait=False)

    def __repr__(self) -> str:
        return f"<Server {self.task} {self.target}>"
