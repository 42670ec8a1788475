"""Session run hooks: TensorFlow 1.x's protocol for code that rides along a training loop.

A hook may define ``begin()``, ``after_create_session(session, coord)``, ``before_run(run_context)``
(returning ``SessionRunArgs`` of extra fetches and feeds, or None), ``after_run(run_context,
run_values)`` and ``end(session)``. ``run_context.request_stop()`` ends the loop after the current
step. ``MonitoredTrainingSession(hooks=[...])`` runs them; the extra fetches go into the same
``Session.run`` as the step (one step, also on a cluster).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["SessionRunArgs", "SessionRunContext", "SessionRunHook", "SessionRunValues", "StopAtStepHook"]


class SessionRunHook:
    """Base class with every method a no-op; subclass and override what you need."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


class SessionRunArgs(NamedTuple):
    fetches: Any
    feed_dict: Any = None
    options: Any = None


class SessionRunValues(NamedTuple):
    results: Any
    options: Any = None
    run_metadata: Any = None


class SessionRunContext:
    def __init__(self, original_args: SessionRunArgs, session):
        self.original_args = original_args
        self.session = session
        self.stop_requested = False

    def request_stop(self) -> None:
        self.stop_requested = True


class StopAtStepHook(SessionRunHook):
    """Stop after ``num_steps`` more steps, or at global step ``last_step`` (on a cluster the
    global step is shared, so every worker stops once together they reached it)."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("StopAtStepHook: give exactly one of num_steps and last_step")
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self):
        from trainer.train import get_or_create_global_step

        self._step = get_or_create_global_step()

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = int(session.run(self._step)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        if int(run_values.results) >= self._last_step:  # fetched values are read after the step's updates
            run_context.request_stop()
