"""TensorFlow 1.x's lower-level monitored sessions: ``Scaffold``, ``ChiefSessionCreator``,
``MonitoredSession`` and ``SingularMonitoredSession``.

As in TensorFlow, these restore but do not save: a ``ChiefSessionCreator`` given
``checkpoint_dir`` restores the newest checkpoint there (``checkpoint_filename_with_path``: that
one), or else runs the scaffold's ``init_op`` and ``init_fn``; checkpoints are written by a
``CheckpointSaverHook`` among the hooks. (``MonitoredTrainingSession``, ``trainer/monitored.py``,
is the all-in-one session that also saves, summarizes and runs on a cluster.)
"""

from __future__ import annotations

import abc

from trainer.checkpoint_index import latest_checkpoint
from trainer.errors import OutOfRangeError
from trainer.graph import Graph, get_default_graph
from trainer.initialization_checks import report_uninitialized_variables
from trainer.hooks import SessionRunArgs, SessionRunContext, SessionRunValues
from trainer.queues import Coordinator, start_queue_runners
from trainer.saver import Saver
from trainer.session import Session
from trainer.variables import (global_variables, global_variables_initializer, local_variables_initializer,
                               variables_initializer)

__all__ = ["ChiefSessionCreator", "check_ready", "MonitoredSession", "Scaffold", "SessionCreator", "SingularMonitoredSession"]


class Scaffold:
    """What a monitored session needs to make a model ready: init and local-init ops, a saver,
    and the ready checks. Anything left None gets TensorFlow's default in ``finalize`` (the ready
    checks: ``report_uninitialized_variables()`` of all variables, and of the global ones before
    the local init). A chief's restore is followed by initializing the variables the saver does
    not hold, so a restored model is ready."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None,
                 copy_from_scaffold=None):
        if copy_from_scaffold is not None:
            if not isinstance(copy_from_scaffold, Scaffold):
                raise TypeError(f"Scaffold: copy_from_scaffold must be a Scaffold, got {type(copy_from_scaffold).__name__}")
            init_op = init_op or copy_from_scaffold.init_op
            init_feed_dict = init_feed_dict or copy_from_scaffold.init_feed_dict
            init_fn = init_fn or copy_from_scaffold.init_fn
            ready_op = ready_op or copy_from_scaffold.ready_op
            ready_for_local_init_op = ready_for_local_init_op or copy_from_scaffold.ready_for_local_init_op
            local_init_op = local_init_op or copy_from_scaffold.local_init_op
            summary_op = summary_op or copy_from_scaffold.summary_op
            saver = saver or copy_from_scaffold.saver
        self.init_op, self.init_feed_dict, self.init_fn = init_op, init_feed_dict, init_fn
        self.ready_op, self.ready_for_local_init_op = ready_op, ready_for_local_init_op
        self.local_init_op, self.summary_op, self.saver = local_init_op, summary_op, saver
        self.graph: Graph | None = None

    def finalize(self) -> "Scaffold":
        """Fill in the defaults in the default graph (once) and finalize it, as TensorFlow does."""
        if self.graph is not None:
            return self
        self.graph = get_default_graph()
        with self.graph.as_default():
            if self.init_op is None:
                self.init_op = global_variables_initializer()
            if self.local_init_op is None:
                self.local_init_op = local_variables_initializer()
            if self.ready_op is None:
                self.ready_op = report_uninitialized_variables()
            if self.ready_for_local_init_op is None:
                self.ready_for_local_init_op = report_uninitialized_variables(global_variables(self.graph))
            if self.saver is None and global_variables(self.graph):
                self.saver = Saver(graph=self.graph)
            saved = set() if self.saver is None else {id(v) for v in self.saver.var_list}
            # what a restore leaves uninitialized: the variables the saver does not hold
            self.init_unsaved = variables_initializer(
                [v for v in global_variables(self.graph) if id(v) not in saved], name="init_unsaved")
        self.graph.finalize()
        return self


class SessionCreator(abc.ABC):
    """Makes the session a MonitoredSession runs."""

    @abc.abstractmethod
    def create_session(self) -> Session:
        """A session whose model is ready to run."""


class ChiefSessionCreator(SessionCreator):
    """Restores the newest checkpoint of ``checkpoint_dir`` (or ``checkpoint_filename_with_path``),
    or initializes with the scaffold's ``init_op`` / ``init_fn`` when there is none."""

    def __init__(self, scaffold: Scaffold | None = None, master: str = "", config=None,
                 checkpoint_dir: str | None = None, checkpoint_filename_with_path: str | None = None):
        self.scaffold = scaffold or Scaffold()
        self.master, self.config = master, config
        self.checkpoint_dir, self.checkpoint_filename_with_path = checkpoint_dir, checkpoint_filename_with_path
        self.restored_from: str | None = None

    def _checkpoint(self) -> str | None:
        if self.checkpoint_filename_with_path:
            return self.checkpoint_filename_with_path
        return latest_checkpoint(self.checkpoint_dir) if self.checkpoint_dir else None

    def create_session(self) -> Session:
        scaffold = self.scaffold.finalize()
        kwargs = {} if self.config is None else {"config": self.config}
        session = Session(scaffold.graph, target=self.master or None, **kwargs)
        self.restored_from = self._checkpoint() if scaffold.saver is not None else None
        if self.restored_from:
            scaffold.saver.restore(session, self.restored_from)
            session.run(scaffold.init_unsaved)
        else:
            session.run(scaffold.init_op, scaffold.init_feed_dict)
            if scaffold.init_fn is not None:
                scaffold.init_fn(scaffold, session)
        check_ready(scaffold, session)
        return session


def check_ready(scaffold: Scaffold, session: Session) -> None:
    """Run the local init once the global variables are ready, then check the whole model is (TF's
    ``SessionManager.prepare_session`` errors where not)."""
    from trainer.session_manager import SessionManager

    manager = SessionManager(local_init_op=scaffold.local_init_op, ready_op=scaffold.ready_op,
                             ready_for_local_init_op=scaffold.ready_for_local_init_op, graph=scaffold.graph)
    manager.make_ready(session, scaffold.init_op, scaffold.init_fn)


class MonitoredSession:
    """A session that runs ``hooks`` around every ``run`` and stops when one asks to.

    ``with MonitoredSession(session_creator=ChiefSessionCreator(...), hooks=[...]) as sess:
    while not sess.should_stop(): sess.run(train_op)``; leaving the ``with`` block on
    ``OutOfRangeError`` (an input pipeline ran out) ends the session normally, as in TensorFlow.
    """

    def __init__(self, session_creator: SessionCreator | None = None, hooks=None, stop_grace_period_secs: float = 120):
        self.hooks = list(hooks or ())
        self.session_creator = session_creator or ChiefSessionCreator()
        for hook in self.hooks:
            hook.begin()
        self._session = self.session_creator.create_session()
        self.graph = self._session.graph
        self.coord = Coordinator()
        self._queue_threads = start_queue_runners(self._session, self.coord)  # the graph's input pipelines
        self._stop = False
        self._closed = False
        self.stop_grace_period_secs = stop_grace_period_secs
        for hook in self.hooks:
            hook.after_create_session(self._session, self.coord)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """``Session.run`` of ``fetches`` together with the hooks' requests, in one step."""
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict, options), self._session)
        requests = [hook.before_run(context) for hook in self.hooks]
        feeds = dict(feed_dict or {})
        for request in requests:
            if request is not None and request.feed_dict:
                feeds.update(request.feed_dict)
        extra = [[] if r is None or r.fetches is None else [r.fetches] for r in requests]
        out, extra_values = self._session.run([fetches, extra], feeds or None, options, run_metadata)
        for hook, values in zip(self.hooks, extra_values):
            hook.after_run(context, SessionRunValues(values[0] if values else None, options, run_metadata))
        self._stop = self._stop or context.stop_requested
        return out

    def should_stop(self) -> bool:
        return self._stop or self.coord.should_stop()

    def raw_session(self) -> Session:
        return self._session

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            for hook in self.hooks:
                hook.end(self._session)
        finally:
            self._stop_queue_runners()

    def _stop_queue_runners(self) -> None:
        """Stop and join the input pipelines' threads (re-raising one's error), then close the session."""
        try:
            self.coord.request_stop()
            self.coord.join(self._queue_threads, stop_grace_period_secs=self.stop_grace_period_secs)
        finally:
            self._session.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type in (OutOfRangeError, StopIteration):
            exc_type = None  # the input ran out: a normal end, hooks' end() runs
        if exc_type is None:
            self.close()
        else:
            self._closed = True
            self._stop_queue_runners()
        return exc_type is None


class SingularMonitoredSession(MonitoredSession):
    """A MonitoredSession on a ``ChiefSessionCreator`` made from the same arguments."""

    def __init__(self, hooks=None, scaffold: Scaffold | None = None, master: str = "", config=None,
                 checkpoint_dir: str | None = None, stop_grace_period_secs: float = 120,
                 checkpoint_filename_with_path: str | None = None):
        creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir, checkpoint_filename_with_path)
        super().__init__(creator, hooks, stop_grace_period_secs)
