"""The rendezvous of cross-task Send/Recv: each task's table of sent values, keyed by (step, key).

A Send puts its value into its own task's ``StepTable``; a Recv on the same task takes it from
there, and a Recv on another task pulls it by a gRPC ``Recv`` call that waits on the sender's table
(``StepRendezvous.recv``). Step ids keep the values of concurrent steps apart; ``abort`` wakes every
waiter of a step with the first error, and values sent for an aborted step are dropped.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Callable, Mapping

from trainer.distributed.errors import AbortedError, DeadlineExceededError

__all__ = ["StepRendezvous", "StepTable"]

# How many aborted step ids a table remembers (so late Sends and Recvs of them fail fast).
_ABORTED_MEMORY = 4096
# How often a wait checks that the receiver is still there.
_ALIVE_CHECK_S = 0.5


class StepTable:
    """A task's mailbox of values sent in running steps."""

    def __init__(self, task: str):
        self.task = task
        self._values: dict[tuple[int, str], object] = {}
        self._aborted: OrderedDict[int, str] = OrderedDict()
        self._cv = threading.Condition()

    def put(self, step_id: int, key: str, value) -> None:
        with self._cv:
            if step_id in self._aborted:
                return
            self._values[(step_id, key)] = value
            self._cv.notify_all()

    def take(self, step_id: int, key: str, timeout: float, alive: Callable[[], bool] | None = None):
        """The value sent under ``key`` in step ``step_id``, waiting at most ``timeout`` seconds
        (and no longer than ``alive()`` stays true: a receiver that went away)."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                reason = self._aborted.get(step_id)
                if reason is not None:
                    raise AbortedError(f"step {step_id} was aborted while {self.task} waited for {key!r}: {reason}")
                value = self._values.pop((step_id, key), _MISSING)
                if value is not _MISSING:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DeadlineExceededError(f"{self.task}: no value for {key!r} in step {step_id} "
                                                f"after {timeout:.3g} s")
                if alive is not None and not alive():
                    raise AbortedError(f"{self.task}: the receiver of {key!r} in step {step_id} went away")
                self._cv.wait(left if alive is None else min(left, _ALIVE_CHECK_S))

    def abort(self, step_id: int, reason: str) -> None:
        with self._cv:
            if step_id in self._aborted:
                return
            self._aborted[step_id] = reason
            while len(self._aborted) > _ABORTED_MEMORY:
                self._aborted.popitem(last=False)
            for k in [k for k in self._values if k[0] == step_id]:
                del self._values[k]
            self._cv.notify_all()

    def pending(self) -> int:
        """How many sent values wait to be received (0 between steps)."""
        with self._cv:
            return len(self._values)


_MISSING = object()


class StepRendezvous:
    """What one step's kernels on one task see as ``rctx.rendezvous``.

    ``remote_sources`` maps each key this task receives from another task to a function that
    starts pulling it from its sender, ``start(step_id, key, timeout)``, returning a pending
    receive with ``result()`` and ``cancel()``. ``prefetch`` starts them all when the step starts,
    so a partition's Recvs travel concurrently, not one round trip after another.
    """

    __slots__ = ("table", "step_id", "remote_sources", "timeout", "pending")

    def __init__(self, table: StepTable, step_id: int, remote_sources: Mapping[str, Callable], timeout: float):
        self.table, self.step_id, self.remote_sources, self.timeout = table, step_id, remote_sources, timeout
        self.pending: dict = {}

    def prefetch(self) -> None:
        self.pending = {key: start(self.step_id, key, self.timeout) for key, start in self.remote_sources.items()}

    def cancel_pending(self) -> None:
        """Drop the receives the step did not use (a failed step), freeing the senders' waits."""
        pending, self.pending = self.pending, {}
        for receive in pending.values():
            receive.cancel()

    def send(self, key: str, value) -> None:
        self.table.put(self.step_id, key, value)

    def recv(self, key: str, timeout: float | None = None):
        receive = self.pending.pop(key, None)
        if receive is None:
            start = self.remote_sources.get(key)
            if start is None:
                return self.table.take(self.step_id, key, self.timeout if timeout is None else timeout)
            receive = start(self.step_id, key, self.timeout if timeout is None else timeout)
        return receive.result()

    def abort(self) -> None:
        self.table.abort(self.step_id, f"a partition failed on {self.table.task}")
