"""Session run hooks, TensorFlow 1.x's protocol for code that rides along an Estimator's loop.

A hook may define ``begin()``, ``after_create_session(session, coord)``, ``before_run(run_context)``
(returning ``SessionRunArgs`` of extra fetches and feeds, or None), ``after_run(run_context,
run_values)`` and ``end(session)``; any it lacks are skipped. ``run_context.request_stop()`` ends
the loop after the current step.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "FinalOpsHook", "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook", "SessionRunArgs",
    "SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook", "StopAtStepHook",
]

log = logging.getLogger("trainer.estimator")


class NanLossDuringTrainingError(RuntimeError):
    """The training loss became NaN or infinite."""


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


def _global_step():
    from trainer.train import get_or_create_global_step

    return get_or_create_global_step()


class StopAtStepHook(SessionRunHook):
    """Stop after ``num_steps`` more steps, or at global step ``last_step``."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("StopAtStepHook: give exactly one of num_steps and last_step")
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self):
        self._step = _global_step()

    def after_create_session(self, session, coord):
        if self._last_step is None:
            self._last_step = int(session.run(self._step)) + self._num_steps

    def before_run(self, run_context):
        return SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        if int(run_values.results) >= self._last_step:  # fetched values are read after the step's updates
            run_context.request_stop()


class NanTensorHook(SessionRunHook):
    """Fail (or only stop, with ``fail_on_nan_loss=False``) when ``loss_tensor`` is NaN or infinite."""

    def __init__(self, loss_tensor, fail_on_nan_loss: bool = True):
        self._loss, self._fail = loss_tensor, fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values):
        if not np.all(np.isfinite(run_values.results)):
            if self._fail:
                raise NanLossDuringTrainingError(f"the loss is {run_values.results}")
            log.error("the loss is %s: stopping", run_values.results)
            run_context.request_stop()


class LoggingTensorHook(SessionRunHook):
    """Log ``tensors`` (a dict of name -> tensor, or a list) every ``every_n_iter`` steps."""

    def __init__(self, tensors, every_n_iter: int | None = 100, every_n_secs=None, at_end: bool = False,
                 formatter=None):
        if every_n_secs is not None:
            raise ValueError("LoggingTensorHook: every_n_secs is not supported; use every_n_iter")
        self._tensors = tensors if isinstance(tensors, dict) else {getattr(t, "name", str(t)): t for t in tensors}
        self._every, self._formatter, self._iter = every_n_iter, formatter, 0

    def before_run(self, run_context):
        due = self._every is not None and self._iter % self._every == 0
        self._iter += 1
        return SessionRunArgs(self._tensors) if due else None

    def after_run(self, run_context, run_values):
        if run_values.results is not None:
            values = run_values.results
            log.info("%s", self._formatter(values) if self._formatter else
                     ", ".join(f"{k} = {v}" for k, v in values.items()))


class FinalOpsHook(SessionRunHook):
    """Runs ``final_ops`` when the session ends; their values are ``final_ops_values``."""

    def __init__(self, final_ops, final_ops_feed_dict=None):
        self._ops, self._feeds = final_ops, final_ops_feed_dict
        self.final_ops_values = None

    def end(self, session):
        self.final_ops_values = session.run(self._ops, self._feeds)


class StepCounterHook(SessionRunHook):
    """Logs global steps per second every ``every_n_steps`` steps."""

    def __init__(self, every_n_steps: int = 100, every_n_secs=None, output_dir=None, summary_writer=None):
        if every_n_secs is not None:
            raise ValueError("StepCounterHook: every_n_secs is not supported; use every_n_steps")
        self._every = every_n_steps
        self.steps_per_sec: float | None = None

    def begin(self):
        self._step = _global_step()
        self._last = None

    def before_run(self, run_context):
        return SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        import time

        step, now = int(run_values.results), time.monotonic()
        if self._last is None:
            self._last = (step, now)
        elif step - self._last[0] >= self._every:
            self.steps_per_sec = (step - self._last[0]) / max(now - self._last[1], 1e-9)
            log.info("global_step/sec: %.4g", self.steps_per_sec)
            self._last = (step, now)


class HookedRunner:
    """Runs ``fetches`` with every hook's extra fetches and feeds merged in, one Session.run per step."""

    def __init__(self, hooks):
        self.hooks = list(hooks)
        self.stop_requested = False

    def _each(self, method: str, *args):
        for hook in self.hooks:
            fn = getattr(hook, method, None)
            if fn is not None:
                fn(*args)

    def begin(self):
        self._each("begin")

    def after_create_session(self, session):
        self._each("after_create_session", session, None)

    def end(self, session):
        self._each("end", session)

    def run(self, run, fetches, feed_dict=None):
        """``run(fetches, feed_dict)`` (a session's run) with the hooks around it; returns the fetched ``fetches``."""
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), None)
        extra, feeds = [], dict(feed_dict or {})
        for hook in self.hooks:
            args = hook.before_run(context) if hasattr(hook, "before_run") else None
            extra.append(None if args is None else args.fetches)
            if args is not None and args.feed_dict:
                feeds.update(args.feed_dict)
        requested = [(i, f) for i, f in enumerate(extra) if f is not None]
        results = run([fetches, [f for _, f in requested]], feeds or None)
        per_hook = dict(zip((i for i, _ in requested), results[1]))
        for i, hook in enumerate(self.hooks):
            if hasattr(hook, "after_run"):
                hook.after_run(context, SessionRunValues(per_hook.get(i)))
        self.stop_requested = self.stop_requested or context.stop_requested
        return results[0]
