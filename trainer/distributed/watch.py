"""Peers watching each other: a thread that health-checks every task this one has talked to.

Each ``interval`` seconds the ``PeerWatcher`` sends the standard ``grpc.health.v1`` check (bounded by
``timeout``) to every peer its server holds a client for and that has answered it once. A peer that
misses ``misses`` checks in a row (one slow answer on a loaded host is not a failure) is marked
down, which fails the calls in flight to it at once (a step blocked on a hung task fails within
about ``misses * interval + timeout`` seconds, not after the step's whole timeout); one that
answers again is marked up. A killed process is usually seen sooner still: its connections close,
and gRPC fails the calls on them right away.
"""

from __future__ import annotations

import threading
from typing import Callable

from trainer.distributed.errors import DistributedError

__all__ = ["PeerWatcher"]


class PeerWatcher:
    """Health-checks ``peers()`` (task -> PeerClient) every ``interval`` seconds on a daemon thread."""

    def __init__(self, peers: Callable[[], dict], interval: float = 1.0, timeout: float = 1.0, name: str = "watch",
                 misses: int = 2):
        self.peers, self.interval, self.timeout, self.misses = peers, interval, timeout, misses
        self.down: set[str] = set()
        self._missed: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name=f"peer-watch-{name}")

    def start(self) -> None:
        self._thread.start()

    def check_once(self) -> None:
        for task, client in self.peers().items():
            if not client.answered:
                continue  # not up yet as far as this task knows: startup waits have their own bounds
            try:
                client.check_alive(self.timeout)
            except DistributedError as e:
                self._missed[task] = self._missed.get(task, 0) + 1
                if self._missed[task] >= self.misses:
                    self.down.add(task)
                    client.mark_down(str(e))
                continue
            self._missed.pop(task, None)
            if task in self.down:
                self.down.discard(task)
                client.mark_up()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.check_once()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(self.interval + self.timeout + 1.0)
