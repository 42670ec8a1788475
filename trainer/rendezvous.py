"""The per-step mailbox Send and Recv kernels meet in.

A key names one transfer: ``"<send device>;<recv device>;<tensor name>"``. In one process the
mailbox is a dict behind a condition variable; the distributed runtime's remote rendezvous
keeps the same ``send``/``recv``/``abort`` interface over gRPC.
"""

from __future__ import annotations

import threading

__all__ = ["Rendezvous", "rendezvous_key"]


def rendezvous_key(tensor_name: str, send_device: str, recv_device: str) -> str:
    return f"{send_device};{recv_device};{tensor_name}"


class Rendezvous:
    """Per-step mailbox: ``send(key, value)`` and blocking ``recv(key)``; ``abort`` wakes everyone."""

    def __init__(self):
        self._values: dict[str, object] = {}
        self._cv = threading.Condition()
        self._aborted = False

    def send(self, key: str, value) -> None:
        with self._cv:
            self._values[key] = value
            self._cv.notify_all()

    def recv(self, key: str, timeout: float | None = None):
        with self._cv:
            ok = self._cv.wait_for(lambda: key in self._values or self._aborted, timeout)
            if self._aborted:
                raise RuntimeError(f"step aborted while receiving {key!r} (another partition failed)")
            if not ok:
                raise TimeoutError(f"no value arrived for {key!r}")
            return self._values.pop(key)

    def abort(self) -> None:
        with self._cv:
            self._aborted = True
            self._cv.notify_all()
