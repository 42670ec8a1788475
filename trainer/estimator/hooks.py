"""Session run hooks, TensorFlow 1.x's protocol for code that rides along an Estimator's loop.

A hook may define ``begin()``, ``after_create_session(session, coord)``, ``before_run(run_context)``
(returning ``SessionRunArgs`` of extra fetches and feeds, or None), ``after_run(run_context,
run_values)`` and ``end(session)``; any it lacks are skipped. ``run_context.request_stop()`` ends
the loop after the current step.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["SessionRunArgs", "SessionRunContext", "SessionRunHook", "SessionRunValues"]


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
