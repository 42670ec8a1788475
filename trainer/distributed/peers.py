"""The client side of the task service: one ``PeerClient`` per other task of the cluster.

Every request names its sender, the job it belongs to and the sender's own incarnation (so a
receiver recognises a task that restarted), and, once the peer has answered a handshake, the
peer's incarnation it expects: a peer that restarted since refuses it (``StaleIncarnationError``)
instead of running a step against partitions and variables it no longer has. Every call has a
deadline; gRPC failures come back as ``UnavailableError`` / ``DeadlineExceededError`` naming the
peer. Liveness is the standard ``grpc.health.v1`` check (``check_alive``); when a ``PeerWatcher``
finds a peer dead, ``mark_down`` cancels the calls in flight to it, so a step waiting on a hung task
fails within the watch interval instead of its full timeout.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import Counter

import grpc
from grpc_health.v1 import health_pb2

from trainer.dataflow_executor import DEAD
from trainer.distributed import wire
from trainer.distributed.errors import (DeadlineExceededError, DistributedError, UnavailableError,
                                        UnknownTaskError, error_from_wire)

__all__ = ["MONITOR_SERVICE", "PeerClient", "PendingRecv", "SERVICE", "channel_options"]

SERVICE = "flowstack.distributed.Task"
MONITOR_SERVICE = "flowstack.distributed.Monitor"  # a task's step statistics (for the chief's straggler report)
_HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def channel_options() -> list[tuple[str, int]]:
    return [("grpc.max_receive_message_length", wire.MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", wire.MAX_MESSAGE_BYTES),
            # A second process claiming the same task (same port) must fail to listen, not share it.
            ("grpc.so_reuseport", 0),
            # A peer that was down is retried within a second of coming back, not after gRPC's
            # default backoff of up to two minutes (calls fail fast while a channel backs off).
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.min_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000)]


class _Stubs:
    """One channel to a peer and the callables of its methods."""

    def __init__(self, address: str):
        self.channel = grpc.insecure_channel(address, options=channel_options())
        path = f"/{SERVICE}/"
        self.unary = {m: self.channel.unary_unary(path + m)
                      for m in ("Health", "RunStep", "Deregister", "Abort", "TaskDone", "Uninitialized")}
        self.register = self.channel.stream_unary(path + "Register")
        self.recv = self.channel.unary_stream(path + "Recv")
        self.check = self.channel.unary_unary(_HEALTH_CHECK, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                              response_deserializer=health_pb2.HealthCheckResponse.FromString)
        self.step_stats = self.channel.unary_unary(f"/{MONITOR_SERVICE}/StepStats")


class PeerClient:
    """Calls to the task ``peer`` at ``address`` on behalf of task ``own_task`` (incarnation
    ``own_incarnation``) of job ``job_id``."""

    def __init__(self, own_task: str, peer: str, address: str, timeout: float, *, job_id: str = "",
                 own_incarnation: int | None = None):
        self.own_task, self.peer, self.address, self.timeout = own_task, peer, address, timeout
        self.job_id, self.own_incarnation = job_id, own_incarnation
        self.incarnation: int | None = None
        self.bytes_received = 0  # tensor bytes pulled from the peer by Recv (a measure; headers not counted)
        self.rpc_errors: Counter[str] = Counter()  # failed calls by gRPC status code name
        self.down_reason: str | None = None  # set by mark_down while the peer fails its health checks
        self.answered = False  # the peer has answered a call (only such peers are watched)
        self._inflight: weakref.WeakSet = weakref.WeakSet()
        self._lock = threading.Lock()
        self._stubs = _Stubs(address)

    # -- calls -----------------------------------------------------------------------------------
    def health(self, timeout: float | None = None) -> dict:
        """The peer's health record; learns its incarnation on first contact."""
        header = self._call_unary("Health", {}, timeout)
        with self._lock:
            if self.incarnation is None:
                self.incarnation = header["incarnation"]
        return header

    def check_alive(self, timeout: float) -> None:
        """One standard ``grpc.health.v1`` check of the whole server; raises unless it is SERVING."""
        try:
            status = self._stubs.check(health_pb2.HealthCheckRequest(service=""), timeout=timeout).status
        except grpc.RpcError as e:
            raise self.rpc_error(e, "health check") from None
        if status != health_pb2.HealthCheckResponse.SERVING:
            raise UnavailableError(f"{self.peer} at {self.address} is not serving "
                                   f"({health_pb2.HealthCheckResponse.ServingStatus.Name(status)})")

    def mark_down(self, reason: str) -> None:
        """The peer failed its health check: fail the calls in flight to it now."""
        with self._lock:
            self.down_reason = reason
            calls = list(self._inflight)
        for call in calls:
            call.cancel()

    def mark_up(self) -> None:
        with self._lock:
            self.down_reason = None

    def learn_restart(self, incarnation: int) -> None:
        """The peer is a new incarnation (it called us as one): address it as that from now on.

        The channel is made afresh: the old one may still be backing off from the connections the
        dead incarnation refused, and would fail this step's calls to a peer that is up."""
        with self._lock:
            self.incarnation = incarnation
            self.down_reason = None
            old, self._stubs = self._stubs, _Stubs(self.address)
        old.channel.close()  # its calls went to the dead incarnation

    def step_stats(self, timeout: float) -> dict:
        """The peer's step-time statistics (``TaskMetrics.step_stats``)."""
        return self._decode_reply(self._call(self._stubs.step_stats, wire.encode_one(self._header()), timeout, "StepStats"))

    def wait_ready(self, timeout: float) -> None:
        """Health-check until the peer answers (tasks of a job start in any order)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.health(timeout=max(0.05, min(1.0, deadline - time.monotonic())))
                return
            except UnknownTaskError as e:
                raise UnknownTaskError(f"{e} (asked at {self.address})") from None
            except (UnavailableError, DeadlineExceededError) as e:
                if time.monotonic() >= deadline:
                    raise UnavailableError(f"{self.peer} at {self.address} did not answer within {timeout:.3g} s "
                                           f"(is it running?): {e}") from None
                time.sleep(0.05)

    def register(self, desc: dict, arrays: dict) -> str:
        header = self._decode_reply(self._call(self._stubs.register, iter(wire.encode(self._header(partition=desc), arrays)),
                                               self.timeout))
        return header["handle"]

    def run_step_future(self, handle: str, step_id: int):
        """A future of RunStep; ``result_of_step`` turns it into None or a raised error."""
        request = wire.encode_one(self._header(handle=handle, step_id=step_id))
        future = self._stubs.unary["RunStep"].future(request, timeout=self.timeout)  # no tensors: feeds stay local
        self._track(future)
        return future

    def result_of_step(self, future) -> None:
        try:
            reply = future.result()
        except grpc.RpcError as e:
            raise self.rpc_error(e, "RunStep") from None
        self._decode_reply(reply)

    def start_recv(self, step_id: int, key: str, timeout: float) -> "PendingRecv":
        """Start pulling the value task ``peer`` sends under ``key`` in step ``step_id``."""
        request = wire.encode_one(self._header(step_id=step_id, key=key, wait=timeout))
        call = self._stubs.recv(request, timeout=timeout + 5.0)
        self._track(call)
        return PendingRecv(self, key, call)

    def recv(self, step_id: int, key: str, timeout: float):
        """The value (streamed in chunks) task ``peer`` sends under ``key`` in step ``step_id``."""
        return self.start_recv(step_id, key, timeout).result()

    def deregister(self, handle: str) -> None:
        self._call_unary("Deregister", {"handle": handle}, min(self.timeout, 5.0))

    def abort(self, step_id: int, reason: str) -> None:
        self._call_unary("Abort", {"step_id": step_id, "reason": reason}, min(self.timeout, 5.0))

    def task_done(self) -> None:
        self._call_unary("TaskDone", {}, min(self.timeout, 5.0))

    def uninitialized(self, names: list[str]) -> list[str]:
        return self._call_unary("Uninitialized", {"names": names}, self.timeout)["names"]

    def count_received(self, nbytes: int) -> None:
        with self._lock:
            self.bytes_received += nbytes

    def close(self) -> None:
        self._stubs.channel.close()

    # -- plumbing --------------------------------------------------------------------------------
    def _track(self, call) -> None:
        with self._lock:
            self._inflight.add(call)

    def _header(self, **fields) -> dict:
        return {"from": self.own_task, "job": self.job_id, "from_incarnation": self.own_incarnation,
                "incarnation": self.incarnation, **fields}

    def _call_unary(self, method: str, fields: dict, timeout: float | None) -> dict:
        reply = self._call(self._stubs.unary[method], wire.encode_one(self._header(**fields)), timeout or self.timeout, method)
        return self._decode_reply(reply)

    def _call(self, stub, request, timeout: float, what: str = "call"):
        try:
            return stub(request, timeout=timeout)
        except grpc.RpcError as e:
            raise self.rpc_error(e, what) from None

    def _decode_reply(self, reply: bytes) -> dict:
        self.answered = True
        header, _ = wire.decode([reply])
        if "error" in header:
            raise error_from_wire(header["error"], self.peer)
        return header

    def rpc_error(self, e: grpc.RpcError, what: str) -> DistributedError:
        code = e.code() if hasattr(e, "code") else None
        detail = e.details() if hasattr(e, "details") else str(e)
        with self._lock:
            self.rpc_errors[getattr(code, "name", "UNKNOWN")] += 1
            down = self.down_reason
        if code == grpc.StatusCode.CANCELLED and down is not None:
            return UnavailableError(f"{self.peer} at {self.address} stopped answering health checks during {what}: {down}")
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return DeadlineExceededError(f"{self.peer} at {self.address}: {what} timed out ({detail})")
        if code == grpc.StatusCode.UNAVAILABLE:
            return UnavailableError(f"{self.peer} at {self.address} is unreachable during {what}: {detail}")
        return DistributedError(f"{self.peer} at {self.address}: {what} failed with {code}: {detail}")


class PendingRecv:
    """A Recv call in flight: ``result()`` waits for the value, ``cancel()`` gives it up."""

    __slots__ = ("peer", "key", "call")

    def __init__(self, peer: PeerClient, key: str, call):
        self.peer, self.key, self.call = peer, key, call

    def result(self):
        try:
            header, tensors = wire.decode(self.call)
        except grpc.RpcError as e:
            raise self.peer.rpc_error(e, f"Recv of {self.key!r}") from None
        if "error" in header:
            raise error_from_wire(header["error"], self.peer.peer)
        self.peer.answered = True
        if header.get("dead"):
            return DEAD  # a value of an untaken cond branch
        value = tensors["value"]
        self.peer.count_received(value.nbytes)
        return value

    def cancel(self) -> None:
        self.call.cancel()
