"""The Estimator's hook runner; the hooks themselves are ``trainer.hooks``' (one protocol for all loops).

``HookedRunner`` skips any method a hook lacks, so duck-typed hooks that do not subclass
``SessionRunHook`` work too.
"""

from __future__ import annotations

from trainer.hooks import (CheckpointSaverHook, CheckpointSaverListener, FeedFnHook, FinalOpsHook,
                           GlobalStepWaiterHook, LoggingTensorHook, NanLossDuringTrainingError, NanTensorHook,
                           SecondOrStepTimer, SessionRunArgs, SessionRunContext, SessionRunHook, SessionRunValues,
                           StepCounterHook, StopAtStepHook, SummarySaverHook)
from trainer.queues import Coordinator

__all__ = [
    "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook",
    "HookedRunner", "LoggingTensorHook", "NanLossDuringTrainingError", "NanTensorHook", "SecondOrStepTimer", "SessionRunArgs",
    "SessionRunContext", "SessionRunHook", "SessionRunValues", "StepCounterHook", "StopAtStepHook", "SummarySaverHook",
]


class HookedRunner:
    """Runs ``fetches`` with every hook's extra fetches and feeds merged in, one Session.run per step."""

    def __init__(self, hooks):
        self.hooks = list(hooks)
        self.stop_requested = False
        self.session = None

    def _each(self, method: str, *args):
        for hook in self.hooks:
            fn = getattr(hook, method, None)
            if fn is not None:
                fn(*args)

    def begin(self):
        self._each("begin")

    def after_create_session(self, session):
        self.session = session  # hooks read it from their run context (CheckpointSaverHook saves with it)
        coord = Coordinator()  # a hook may stop the loop before its first step, as in TensorFlow
        self._each("after_create_session", session, coord)
        self.stop_requested = coord.should_stop()

    def end(self, session):
        self._each("end", session)

    def run(self, run, fetches, feed_dict=None):
        """``run(fetches, feed_dict)`` (a session's run) with the hooks around it; returns the fetched ``fetches``."""
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self.session)
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
