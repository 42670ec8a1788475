"""The server side of the task service: what one task of a cluster answers.

Methods (raw bytes in ``trainer.distributed.wire``'s format, gRPC generic handlers):

========== ================ ===============================================================
Register   stream -> unary  a partition (graph + arrays); answers its handle
Deregister unary            drop a partition (its session closed)
RunStep    unary            run a registered partition for a step id
Recv       unary -> stream  the value sent under a key in a step (waits, with a deadline)
Abort      unary            abort a step: its waiters fail with the first error
Health     unary            task name and incarnation
TaskDone   unary            a worker finished; a PS's ``join`` returns once all have
Uninitialized unary         which of the named variables this task has no value for
========== ================ ===============================================================

Every request carries its sender's task name (refused unless it is in the cluster), its job id
(refused unless it is this task's job), the sender's own incarnation (a new one means the sender
restarted: ``on_restart`` is told) and the receiver's incarnation the sender expects (refused if
the task restarted since).
"""

from __future__ import annotations

import itertools
import secrets
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import grpc

from trainer.dataflow_executor import DEAD
from trainer.distributed import wire
from trainer.distributed.cluster import SERVING_JOBS, ClusterSpec, split_task_name
from trainer.distributed.errors import (StaleIncarnationError, UnknownHandleError, UnknownTaskError,
                                        error_to_wire)
from trainer.distributed.partitions import RegisteredPartition
from trainer.distributed.peers import SERVICE
from trainer.distributed.rendezvous import StepTable
from trainer.state import SessionState

__all__ = ["TaskService"]


class TaskService:
    """One task's state (variables, sent values, partitions) and its request handlers."""

    def __init__(self, cluster: ClusterSpec, task: str, *, timeout: float, receive_from: Callable[[str], Callable],
                 job_id: str = "", on_restart: Callable[[str, int], None] | None = None):
        self.cluster, self.task, self.timeout, self.job_id = cluster, task, timeout, job_id
        self.incarnation = secrets.randbits(63)
        self._on_restart = on_restart
        self.sender_incarnations: dict[str, int] = {}
        self.state = SessionState()
        self.table = StepTable(task)
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"flowstack-{task}")
        self._receive_from = receive_from
        self._partitions: dict[str, RegisteredPartition] = {}
        self._handles = itertools.count()
        self._lock = threading.Lock()
        self.workers = [t for t in cluster.tasks() if split_task_name(t)[0] not in SERVING_JOBS]
        self._done: set[str] = set()
        self.job_done = threading.Event()
        self.bytes_sent = 0  # tensor bytes other tasks pulled from this one by Recv (a measure)
        self.bytes_sent_to: dict[str, int] = {}  # the same, by the task that pulled them

    # -- used in-process by the task's own sessions ------------------------------------------------
    def mark_done(self, task: str) -> None:
        with self._lock:
            self._done.add(task)
            if set(self.workers) <= self._done:
                self.job_done.set()

    def workers_not_done(self) -> list[str]:
        """The worker (and chief) tasks that have not said they are done."""
        with self._lock:
            return [t for t in self.workers if t not in self._done]

    # -- handlers ----------------------------------------------------------------------------------
    def handler(self) -> grpc.GenericRpcHandler:
        unary = {"Health": self._health, "RunStep": self._run_step, "Deregister": self._deregister, "Abort": self._abort,
                 "TaskDone": self._task_done, "Uninitialized": self._uninitialized}
        methods = {name: grpc.unary_unary_rpc_method_handler(self._guard_unary(fn)) for name, fn in unary.items()}
        methods["Register"] = grpc.stream_unary_rpc_method_handler(self._guard_stream(self._register))
        methods["Recv"] = grpc.unary_stream_rpc_method_handler(self._recv)
        return grpc.method_handlers_generic_handler(SERVICE, methods)

    def _check(self, header: dict) -> None:
        sender = header.get("from")
        if not isinstance(sender, str) or not self.cluster.has_task(sender):
            raise UnknownTaskError(f"{self.task} refused a request from {sender!r}, which is not a task of its cluster "
                                   f"(tasks: {', '.join(self.cluster.tasks())})")
        job = header.get("job")
        if job and self.job_id and job != self.job_id:
            raise UnknownTaskError(f"{self.task} (job {self.job_id!r}) refused a request from {sender} at "
                                   f"{self.cluster.address_of(sender)} of another job, {job!r} (a task left over from "
                                   "another job, or two jobs given the same addresses)")
        self._note_sender(sender, header.get("from_incarnation"))
        expected = header.get("incarnation")
        if expected is not None and expected != self.incarnation:
            raise StaleIncarnationError(
                f"{self.task} refused a request from {sender} meant for its incarnation {expected:x}; it is now "
                f"incarnation {self.incarnation:x} (the task restarted: partitions and variables of the old one are gone)")

    def _note_sender(self, sender: str, incarnation) -> None:
        if not isinstance(incarnation, int):
            return
        with self._lock:
            known = self.sender_incarnations.get(sender)
            self.sender_incarnations[sender] = incarnation
            restarted = known is not None and known != incarnation
            if restarted:
                self._done.discard(sender)  # a restarted worker is not done, whatever its last incarnation said
        if restarted and self._on_restart is not None:
            self._on_restart(sender, incarnation)

    def _guard_unary(self, fn):
        def handle(request: bytes, context) -> bytes:
            try:
                header, tensors = wire.decode([request])
                self._check(header)
                return wire.encode_one(fn(header, tensors))
            except Exception as e:  # noqa: BLE001 - every failure goes back to the caller as a value
                return wire.encode_one({"error": error_to_wire(e)})
        return handle

    def _guard_stream(self, fn):
        def handle(chunks, context) -> bytes:
            try:
                header, tensors = wire.decode(chunks)
                self._check(header)
                return wire.encode_one(fn(header, tensors))
            except Exception as e:  # noqa: BLE001
                return wire.encode_one({"error": error_to_wire(e)})
        return handle

    def _health(self, header, tensors) -> dict:
        return {"task": self.task, "incarnation": self.incarnation, "job": self.job_id}

    def _register(self, header, tensors) -> dict:
        partition = RegisteredPartition(header["partition"], tensors, state=self.state, table=self.table,
                                        receive_from=self._receive_from, pool=self.pool, timeout=self.timeout)
        with self._lock:
            handle = f"{self.task}#{next(self._handles)}"
            self._partitions[handle] = partition
        return {"handle": handle}

    def _run_step(self, header, tensors) -> dict:
        handle = header.get("handle")
        partition = self._partitions.get(handle)
        if partition is None:
            raise UnknownHandleError(f"{self.task} holds no partition {handle!r} (registered partitions: {len(self._partitions)})")
        partition.run(int(header["step_id"]))
        return {}

    def _recv(self, request: bytes, context):
        try:
            header, _ = wire.decode([request])
            self._check(header)
            left = context.time_remaining()
            wait = min(float(header.get("wait", self.timeout)), left if left is not None else self.timeout)
            value = self.table.take(int(header["step_id"]), str(header["key"]), wait, alive=context.is_active)
        except Exception as e:  # noqa: BLE001
            yield wire.encode_one({"error": error_to_wire(e)})
            return
        if value is DEAD:  # a value of an untaken cond branch
            yield wire.encode_one({"dead": True})
            return
        with self._lock:
            nbytes = getattr(value, "nbytes", 0)
            self.bytes_sent += nbytes
            self.bytes_sent_to[header["from"]] = self.bytes_sent_to.get(header["from"], 0) + nbytes
        yield from wire.encode({}, {"value": value})

    def _deregister(self, header, tensors) -> dict:
        with self._lock:
            self._partitions.pop(header.get("handle"), None)
        return {}

    def partition_count(self) -> int:
        return len(self._partitions)

    def _abort(self, header, tensors) -> dict:
        self.table.abort(int(header["step_id"]), str(header.get("reason", "aborted")))
        return {}

    def _task_done(self, header, tensors) -> dict:
        self.mark_done(header["from"])
        return {}

    def _uninitialized(self, header, tensors) -> dict:
        names = header.get("names", [])
        return {"names": [n for n in names if n not in self.state.variables]}
