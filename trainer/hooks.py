"""Session run hooks: TensorFlow 1.x's protocol for code that rides along a training loop.

One protocol for every loop: ``MonitoredTrainingSession`` (in one process or on a cluster), the
Estimator's ``HookedRunner`` and ``SyncReplicasOptimizer``'s hook all use these classes, and the
standard hooks (``tf.train.StopAtStepHook``, ``NanTensorHook``, ``LoggingTensorHook``,
``FinalOpsHook``, ``StepCounterHook``, ``CheckpointSaverHook``, ``SummarySaverHook``, ``FeedFnHook``,
``GlobalStepWaiterHook``) and their ``SecondOrStepTimer`` live here.

A hook may define ``begin()``, ``after_create_session(session, coord)``, ``before_run(run_context)``
(returning ``SessionRunArgs`` of extra fetches and feeds, or None), ``after_run(run_context,
run_values)`` and ``end(session)``. ``run_context.request_stop()`` ends the loop after the current
step. ``MonitoredTrainingSession(hooks=[...])`` runs them; the extra fetches go into the same
``Session.run`` as the step (one step, also on a cluster).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, NamedTuple

import numpy as np

from trainer.checkpoint_format import checkpoint_file
from trainer.checkpoint_index import remove_leftovers
from trainer.errors import DeadlineExceededError

__all__ = [
    "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook",
    "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook", "SecondOrStepTimer", "SessionRunArgs",
    "SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook", "StopAtStepHook", "SummarySaverHook",
]

log = logging.getLogger("trainer.hooks")


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
    from trainer.train import get_or_create_global_step  # trainer.train imports this module

    return get_or_create_global_step()


class StopAtStepHook(SessionRunHook):
    """Stop after ``num_steps`` more steps, or at global step ``last_step`` (on a cluster the
    global step is shared, so every worker stops once together they reached it)."""

    def __init__(self, num_steps: int | None = None, last_step: int | None = None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("StopAtStepHook: give exactly one of num_steps and last_step")
        self._num_steps, self._last_step = num_steps, last_step

    def begin(self):
        self._step = _global_step()

    def after_create_session(self, session, coord):
        step = int(session.run(self._step))
        if self._last_step is None:
            self._last_step = step + self._num_steps
        if step >= self._last_step and coord is not None:
            coord.request_stop()  # a restarted job that already reached its last step takes no step

    def before_run(self, run_context):
        return SessionRunArgs(self._step)

    def after_run(self, run_context, run_values):
        step = int(run_values.results)
        if step + 1 >= self._last_step and run_context.session is not None:
            # A global step on a PS task may be fetched before this step's update: read it again
            # near the end, so the job stops at last_step exactly, not one step past it.
            step = int(run_context.session.run(self._step))
        if step >= self._last_step:
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
        step, now = int(run_values.results), time.monotonic()
        if self._last is None:
            self._last = (step, now)
        elif step - self._last[0] >= self._every:
            self.steps_per_sec = (step - self._last[0]) / max(now - self._last[1], 1e-9)
            log.info("global_step/sec: %.4g", self.steps_per_sec)
            self._last = (step, now)


class CheckpointSaverListener:
    """Called around each save of a ``CheckpointSaverHook``; ``after_save`` returning True stops training."""

    def begin(self):
        pass

    def before_save(self, session, global_step_value):
        pass

    def after_save(self, session, global_step_value):
        pass

    def end(self, session, global_step_value):
        pass


class CheckpointSaverHook(SessionRunHook):
    """Save a checkpoint every ``save_steps`` steps or ``save_secs`` seconds (give exactly one), when
    the session is created and when it ends, as TensorFlow 1.x's hook does.

    Checkpoints are ``<checkpoint_dir>/<checkpoint_basename without .ckpt>-<step>.ckpt`` in the
    folder's ``checkpoint`` index (``trainer/checkpoint_index.py``), so a MonitoredTrainingSession
    or ``tf.train.latest_checkpoint`` given that folder restores them. ``saver`` defaults to a Saver
    of every global variable, made in ``begin``.
    """

    def __init__(self, checkpoint_dir: str, save_secs: float | None = None, save_steps: int | None = None,
                 saver=None, checkpoint_basename: str = "model.ckpt", scaffold=None, listeners=None):
        if (save_secs is None) == (save_steps is None):
            raise ValueError("CheckpointSaverHook: give exactly one of save_secs and save_steps")
        if scaffold is not None and saver is not None:
            raise ValueError("CheckpointSaverHook: give saver= or scaffold=, not both")
        for name, value in (("save_secs", save_secs), ("save_steps", save_steps)):
            if value is not None and value <= 0:
                raise ValueError(f"CheckpointSaverHook: {name} must be positive, got {value}")
        base = checkpoint_basename[:-len(".ckpt")] if checkpoint_basename.endswith(".ckpt") else checkpoint_basename
        self._prefix = os.path.join(checkpoint_dir, base)
        self._secs, self._steps = save_secs, save_steps
        self._saver, self._scaffold, self._listeners = saver, scaffold, list(listeners or ())
        self._last_step: int | None = None
        self._last_time = 0.0

    def begin(self):
        self._step = _global_step()
        if self._saver is None and self._scaffold is None:  # a scaffold's saver exists once it is finalized
            from trainer.saver import Saver  # trainer.saver needs the graph modules; hooks are imported early

            self._saver = Saver()
        for listener in self._listeners:
            listener.begin()

    def after_create_session(self, session, coord):
        if self._saver is None:
            self._saver = self._scaffold.saver
        remove_leftovers(os.path.dirname(self._prefix) or ".")  # temporary files of a save killed mid-write
        step = int(session.run(self._step))
        if not os.path.isfile(checkpoint_file(f"{self._prefix}-{step}")):  # the state at creation, unless restored
            self._save(session, step)
        self._last_step, self._last_time = step, time.monotonic()

    def before_run(self, run_context):
        return SessionRunArgs(self._step)

    def _due(self, step: int) -> bool:
        if self._steps is not None:
            return step - self._last_step >= self._steps
        return time.monotonic() - self._last_time >= self._secs

    def after_run(self, run_context, run_values):
        if not self._due(int(run_values.results)):
            return
        step = int(run_context.session.run(self._step))  # the fetched step may predate this step's update on a PS
        if self._due(step) and self._save(run_context.session, step):
            run_context.request_stop()

    def end(self, session):
        step = int(session.run(self._step))
        if step != self._last_step:
            self._save(session, step)
        for listener in self._listeners:
            listener.end(session, step)

    def _save(self, session, step: int) -> bool:
        """Save at ``step``; True when a listener asks to stop."""
        for listener in self._listeners:
            listener.before_save(session, step)
        self._saver.save(session, self._prefix, global_step=step)
        self._last_step, self._last_time = step, time.monotonic()
        stops = [bool(listener.after_save(session, step)) for listener in self._listeners]  # every listener hears
        return any(stops)


class SecondOrStepTimer:
    """Triggers every ``every_secs`` seconds or every ``every_steps`` steps (give exactly one), as
    TensorFlow's timer for periodic hooks: always on the first step asked about."""

    def __init__(self, every_secs: float | None = None, every_steps: int | None = None):
        if every_secs is None and every_steps is None:
            raise ValueError("Either every_secs or every_steps should be provided.")
        if every_secs is not None and every_steps is not None:
            raise ValueError("Can not provide both every_secs and every_steps.")
        self._every_secs, self._every_steps = every_secs, every_steps
        self.reset()

    def reset(self) -> None:
        self._last_triggered_step: int | None = None
        self._last_triggered_time: float | None = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_triggered_step is None:
            return True
        if self._last_triggered_step == step:
            return False
        if self._every_secs is not None:
            return time.time() >= self._last_triggered_time + self._every_secs
        return step >= self._last_triggered_step + self._every_steps

    def update_last_triggered_step(self, step: int) -> tuple[float | None, int | None]:
        """Mark ``step`` as triggered; (seconds, steps) since the previous trigger (None, None the first time)."""
        now = time.time()
        elapsed = (None, None) if self._last_triggered_time is None else \
            (now - self._last_triggered_time, step - self._last_triggered_step)
        self._last_triggered_time, self._last_triggered_step = now, step
        return elapsed

    def last_triggered_step(self) -> int | None:
        return self._last_triggered_step


class SummarySaverHook(SessionRunHook):
    """Writes ``summary_op`` (or the scaffold's; give exactly one) every ``save_steps`` steps or
    ``save_secs`` seconds, to ``summary_writer`` or a FileWriter of ``output_dir``, at the global
    step the training step reached, fetched in the same run as the step."""

    def __init__(self, save_steps: int | None = None, save_secs: float | None = None, output_dir: str | None = None,
                 summary_writer=None, scaffold=None, summary_op=None):
        if (scaffold is None) == (summary_op is None):
            raise ValueError("Exactly one of scaffold or summary_op must be provided.")
        self._summary_op, self._scaffold = summary_op, scaffold
        self._writer, self._output_dir = summary_writer, output_dir
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

    def begin(self):
        if self._writer is None and self._output_dir:
            from trainer.summary import FileWriterCache  # trainer.summary needs the graph modules

            self._writer = FileWriterCache.get(self._output_dir)
        self._next_step: int | None = None
        self._step = _global_step()

    def _summaries(self) -> list:
        op = self._summary_op if self._summary_op is not None else self._scaffold.summary_op
        return [] if op is None else (list(op) if isinstance(op, (list, tuple)) else [op])

    def before_run(self, run_context):
        self._request = self._next_step is None or self._timer.should_trigger_for_step(self._next_step)
        requests = {"global_step": self._step}
        if self._request and self._summaries():
            requests["summary"] = self._summaries()
        return SessionRunArgs(requests)

    def after_run(self, run_context, run_values):
        if not self._writer:
            return
        step = int(run_values.results["global_step"]) + 1
        if self._next_step is None or self._request:
            step = int(run_context.session.run(self._step))
        if self._request:
            self._timer.update_last_triggered_step(step)
            for summary in run_values.results.get("summary", ()):
                self._writer.add_summary(summary, step)
        self._next_step = step + 1

    def end(self, session):
        if self._writer:
            self._writer.flush()


class FeedFnHook(SessionRunHook):
    """Feeds ``feed_fn()`` (a feed dict) into every step."""

    def __init__(self, feed_fn):
        self.feed_fn = feed_fn

    def before_run(self, run_context):
        return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class GlobalStepWaiterHook(SessionRunHook):
    """Holds this worker's first step until the global step reaches ``wait_until_step`` (so that
    later workers join a model the chief has started training), polling every ``poll_secs``.
    ``timeout_secs`` (None: wait as long as TensorFlow does, for ever) bounds the wait with a
    DeadlineExceededError."""

    def __init__(self, wait_until_step: int, poll_secs: float = 0.5, timeout_secs: float | None = None):
        self._wait_until_step = wait_until_step
        self._poll_secs, self._timeout_secs = poll_secs, timeout_secs

    def begin(self):
        self._started = False
        self._step = _global_step()

    def before_run(self, run_context):
        if self._started:
            return None
        if self._wait_until_step > 0:
            log.info("Waiting for global step %d before starting training.", self._wait_until_step)
            deadline = None if self._timeout_secs is None else time.monotonic() + self._timeout_secs
            while int(run_context.session.run(self._step)) < self._wait_until_step:
                if deadline is not None and time.monotonic() >= deadline:
                    raise DeadlineExceededError(f"GlobalStepWaiterHook: the global step did not reach "
                                                f"{self._wait_until_step} within {self._timeout_secs} s")
                time.sleep(self._poll_secs)
        self._started = True
        return None
