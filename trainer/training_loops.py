"""``tf.train.LooperThread`` and ``tf.train.basic_train_loop``: TensorFlow 1.15's helper threads and
the simplest supervised training loop.

A ``LooperThread`` calls ``run_loop`` (its ``target``) every ``timer_interval_secs`` (back to back
with None) until its ``Coordinator`` is asked to stop; an exception it raises stops the coordinator
and is re-raised by ``coord.join()``. ``basic_train_loop`` runs ``train_step_fn(sess, ...)`` in a
``Supervisor``'s managed session until the supervisor should stop, starting over when a step is
aborted because a task of the cluster restarted.
"""

from __future__ import annotations

import threading
import time

from trainer.distributed.errors import AbortedError
from trainer.queues import Coordinator

__all__ = ["LooperThread", "basic_train_loop"]


class LooperThread(threading.Thread):
    """A daemon thread that runs ``target(*args, **kwargs)`` (or ``run_loop``) periodically."""

    def __init__(self, coord: Coordinator, timer_interval_secs: float | None, target=None, args=None, kwargs=None):
        if not isinstance(coord, Coordinator):
            raise ValueError(f"'coord' argument must be a Coordinator: {coord!r}")
        if timer_interval_secs is not None and timer_interval_secs < 0:
            raise ValueError(f"LooperThread: timer_interval_secs must be >= 0 or None, got {timer_interval_secs}")
        super().__init__(daemon=True)
        self._coord = coord
        self._timer_interval_secs = timer_interval_secs
        self._loop_target = target
        if target is not None:
            self._loop_args, self._loop_kwargs = tuple(args or ()), dict(kwargs or {})
        elif args or kwargs:
            raise ValueError("'args' and 'kwargs' argument require that you also pass 'target'")
        coord.register_thread(self)

    @staticmethod
    def loop(coord: Coordinator, timer_interval_secs: float | None, target, args=None, kwargs=None) -> "LooperThread":
        """Start a LooperThread calling ``target`` and return it."""
        looper = LooperThread(coord, timer_interval_secs, target=target, args=args, kwargs=kwargs)
        looper.start()
        return looper

    def run(self) -> None:
        try:
            self.start_loop()
            if self._timer_interval_secs is None:
                while not self._coord.should_stop():
                    self.run_loop()
            else:
                next_time = time.monotonic()
                while not self._coord.wait_for_stop(max(0.0, next_time - time.monotonic())):
                    next_time += self._timer_interval_secs
                    self.run_loop()
            self.stop_loop()
        except Exception as e:  # noqa: BLE001 - handed to the coordinator, re-raised by join()
            self._coord.request_stop(e)

    def start_loop(self) -> None:
        """Called once when the thread starts (subclasses override)."""

    def stop_loop(self) -> None:
        """Called once when the loop ends on a stop request (subclasses override)."""

    def run_loop(self) -> None:
        """One iteration: calls ``target`` (subclasses override)."""
        if self._loop_target is not None:
            self._loop_target(*self._loop_args, **self._loop_kwargs)


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None, master: str = "") -> None:
    """Run ``train_step_fn(sess, *args, **kwargs)`` until ``supervisor.should_stop()``, in the
    supervisor's managed session; an AbortedError (a restarted task) starts a new session."""
    args, kwargs = list(args or ()), dict(kwargs or {})
    while True:
        try:
            with supervisor.managed_session(master) as sess:
                while not supervisor.should_stop():
                    train_step_fn(sess, *args, **kwargs)
            return
        except AbortedError:
            continue
