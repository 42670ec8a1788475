"""Session run hooks (TF 1.x's ``tf.train.SessionRunHook``) for ``MonitoredTrainingSession``.

A hook sees the session created, each ``run`` (after it, with the global step it reached) and the
end; it may ask the session to stop. ``StopAtStepHook`` stops at a global step, which in
between-graph replicated training all workers share (it lives on a PS task).
"""

from __future__ import annotations

__all__ = ["SessionRunContext", "SessionRunHook", "StopAtStepHook"]


class SessionRunContext:
    """What ``after_run`` gets: the values the run returned, the global step, and ``request_stop``."""

    def __init__(self, results, global_step: int):
        self.results, self.global_step = results, global_step
        self.stop_requested = False

    def request_stop(self) -> None:
        self.stop_requested = True


class SessionRunHook:
    """Override what you need; every method is a no-op by default."""

    def begin(self) -> None:
        """Called once before the session is created (the graph may still change)."""

    def after_create_session(self, session, global_step: int) -> None:
        """Called once the variables are initialized or restored."""

    def after_run(self, run_context: SessionRunContext) -> None:
        """Called after every ``run``."""

    def end(self, session) -> None:
        """Called when the monitored session closes."""


class StopAtStepHook(SessionRunHook):
    """Stop after ``num_steps`` more steps, or once the global step reaches ``last_step``."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("StopAtStepHook needs exactly one of num_steps and last_step")
        self.num_steps, self.last_step = num_steps, last_step

    def after_create_session(self, session, global_step: int) -> None:
        if self.last_step is None:
            self.last_step = global_step + self.num_steps

    def after_run(self, run_context: SessionRunContext) -> None:
        if run_context.global_step >= self.last_step:
            run_context.request_stop()
