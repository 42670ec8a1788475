"""``tf.train.SessionManager`` and ``tf.train.WorkerSessionCreator``: TensorFlow 1.15's way of
getting a session whose model is ready, by restoring, initializing, or waiting for a chief.

``prepare_session`` restores the newest checkpoint (or runs ``init_op`` / ``init_fn``),
``recover_session`` only restores, ``wait_for_session`` polls until another task (the chief) has
made the model ready. "Ready" is TF's: ``ready_op`` (usually ``report_uninitialized_variables()``)
evaluates to an empty list of names; ``local_init_op`` runs once ``ready_for_local_init_op`` is
empty. ``master`` is a ``tf.train.Server``'s target (``server.target``) or "" for a local session.
"""

from __future__ import annotations

import logging
import time

import numpy as np

from trainer.checkpoint_index import latest_checkpoint
from trainer.errors import DeadlineExceededError, FailedPreconditionError
from trainer.graph import get_default_graph
from trainer.monitored_session import Scaffold, SessionCreator
from trainer.session import Session

__all__ = ["SessionManager", "WorkerSessionCreator"]

log = logging.getLogger("tensorflow")


def _op_name(op) -> str | None:
    return None if op is None else getattr(op, "name", str(op))


def _ready(op, sess, message: str) -> tuple[bool, str | None]:
    """TF's readiness check: ``op`` yields the names of what is not ready (empty: ready)."""
    if op is None:
        return True, None
    try:
        value = sess.run(op)
    except FailedPreconditionError as e:
        if "uninitialized" not in str(e):
            raise
        return False, str(e)
    value = np.asarray(value)
    if value.dtype != object or value.size == 0:
        return True, None
    names = ", ".join(v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in value.reshape(-1))
    return False, f"{message}: Variables not initialized: {names}"


class SessionManager:
    """Creates sessions restored from a checkpoint, initialized, or ready after waiting."""

    def __init__(self, local_init_op=None, ready_op=None, ready_for_local_init_op=None, graph=None,
                 recovery_wait_secs: float = 30, local_init_run_options=None, local_init_feed_dict=None):
        self._graph = graph or get_default_graph()
        self._local_init_op = local_init_op
        self._ready_op = ready_op
        self._ready_for_local_init_op = ready_for_local_init_op
        if ready_for_local_init_op is not None and local_init_op is None:
            raise ValueError("If you pass a ready_for_local_init_op you must also pass a local_init_op, "
                             f"ready_for_local_init_op [{ready_for_local_init_op}]")
        if recovery_wait_secs < 0:
            raise ValueError(f"SessionManager: recovery_wait_secs must be >= 0, got {recovery_wait_secs}")
        self._recovery_wait_secs = recovery_wait_secs
        self._local_init_feed_dict = local_init_feed_dict

    def _session(self, master: str, config):
        kwargs = {} if config is None else {"config": config}
        return Session(self._graph, target=master or None, **kwargs)

    def _restore_checkpoint(self, master, saver, checkpoint_dir, checkpoint_filename_with_path,
                            wait_for_checkpoint, max_wait_secs, config):
        if checkpoint_dir and checkpoint_filename_with_path:
            raise ValueError("Can not provide both checkpoint_dir and checkpoint_filename_with_path.")
        sess = self._session(master, config)
        if not saver or not (checkpoint_dir or checkpoint_filename_with_path):
            return sess, False
        if checkpoint_filename_with_path:
            saver.restore(sess, checkpoint_filename_with_path)
            return sess, True
        waited = 0.0
        path = latest_checkpoint(checkpoint_dir)
        while not path:
            if not wait_for_checkpoint or waited >= max_wait_secs:
                return sess, False
            log.info("Waiting for checkpoint to be available.")
            pause = max(min(self._recovery_wait_secs, max_wait_secs - waited), 0.0)
            time.sleep(pause)
            waited += pause if pause > 0 else max_wait_secs  # a zero wait still ends the loop
            path = latest_checkpoint(checkpoint_dir)
        saver.restore(sess, path)
        return sess, True

    def _try_run_local_init_op(self, sess) -> tuple[bool, str | None]:
        if self._local_init_op is None:
            return True, None
        ok, message = _ready(self._ready_for_local_init_op, sess, "Model not ready for local init")
        if not ok:
            return False, message
        sess.run(self._local_init_op, self._local_init_feed_dict)
        return True, None

    def _model_ready(self, sess) -> tuple[bool, str | None]:
        return _ready(self._ready_op, sess, "Model not ready")

    def prepare_session(self, master: str, init_op=None, saver=None, checkpoint_dir=None,
                        checkpoint_filename_with_path=None, wait_for_checkpoint: bool = False,
                        max_wait_secs: float = 7200, config=None, init_feed_dict=None, init_fn=None):
        """A session restored from the checkpoint, or initialized by ``init_op`` and ``init_fn(sess)``;
        a RuntimeError where that leaves the model not ready."""
        sess, restored = self._restore_checkpoint(master, saver, checkpoint_dir, checkpoint_filename_with_path,
                                                  wait_for_checkpoint, max_wait_secs, config)
        if not restored:
            if init_op is None and not init_fn and self._local_init_op is None:
                raise RuntimeError("Model is not initialized and no init_op or init_fn or local_init_op was given")
            if init_op is not None:
                sess.run(init_op, init_feed_dict)
            if init_fn:
                init_fn(sess)
        self.make_ready(sess, init_op, init_fn)
        return sess

    def make_ready(self, sess, init_op=None, init_fn=None) -> None:
        """Run the local init op and check the model is ready after ``init_op`` / ``init_fn`` ran
        (or a restore): a RuntimeError naming them where it is not."""
        ok, message = self._try_run_local_init_op(sess)
        if not ok:
            raise RuntimeError(f"Init operations did not make model ready for local_init.  Init op: "
                               f"{_op_name(init_op)}, init fn: {init_fn}, error: {message}")
        ready, message = self._model_ready(sess)
        if not ready:
            raise RuntimeError(f"Init operations did not make model ready.  Init op: {_op_name(init_op)}, "
                               f"init fn: {init_fn}, local_init_op: {_op_name(self._local_init_op)}, "
                               f"error: {message}")

    def recover_session(self, master: str, saver=None, checkpoint_dir=None, checkpoint_filename_with_path=None,
                        wait_for_checkpoint: bool = False, max_wait_secs: float = 7200, config=None):
        """``(sess, True)`` when a checkpoint restored a ready model, else ``(sess, False)`` (the
        session then still needs initializing)."""
        sess, restored = self._restore_checkpoint(master, saver, checkpoint_dir, checkpoint_filename_with_path,
                                                  wait_for_checkpoint, max_wait_secs, config)
        ok, message = self._try_run_local_init_op(sess)
        if not restored:
            return sess, False
        source = checkpoint_dir or checkpoint_filename_with_path
        if not ok:
            log.info("Restoring model from %s did not make model ready for local init: %s", source, message)
            return sess, False
        ready, message = self._model_ready(sess)
        if not ready:
            log.info("Restoring model from %s did not make model ready: %s", source, message)
            return sess, False
        log.info("Restored model from %s", source)
        return sess, True

    def wait_for_session(self, master: str, config=None, max_wait_secs: float = float("inf")):
        """A session once the model is ready (another task initialized it), polling every
        ``recovery_wait_secs``; DeadlineExceededError when ``max_wait_secs`` runs out first."""
        if max_wait_secs is None:
            max_wait_secs = float("inf")
        deadline = time.monotonic() + max_wait_secs
        while True:
            sess = self._session(master, config)
            ready_message = None
            ok, local_message = self._try_run_local_init_op(sess)
            if ok:
                ready, ready_message = self._model_ready(sess)
                if ready:
                    return sess
            sess.close()
            if deadline - time.monotonic() - self._recovery_wait_secs < 0:
                raise DeadlineExceededError(f"Session was not ready after waiting {max_wait_secs:g} secs. "
                                            f"Ready_for_local_init_op: {local_message}, ready: {ready_message}")
            log.info("Waiting for model to be ready.  Ready_for_local_init_op:  %s, ready: %s",
                     local_message, ready_message)
            time.sleep(self._recovery_wait_secs)


class WorkerSessionCreator(SessionCreator):
    """A non-chief worker's session: waits (``max_wait_secs``, 30 min by default) until the chief
    has initialized the model, then runs the scaffold's ``local_init_op``."""

    def __init__(self, scaffold: Scaffold | None = None, master: str = "", config=None,
                 max_wait_secs: float = 30 * 60):
        self.scaffold = scaffold or Scaffold()
        self.master, self.config, self.max_wait_secs = master, config, max_wait_secs

    def create_session(self):
        scaffold = self.scaffold.finalize()
        manager = SessionManager(local_init_op=scaffold.local_init_op, ready_op=scaffold.ready_op,
                                 ready_for_local_init_op=scaffold.ready_for_local_init_op, graph=scaffold.graph,
                                 recovery_wait_secs=min(30.0, max(self.max_wait_secs / 20.0, 0.01)))
        return manager.wait_for_session(self.master, config=self.config, max_wait_secs=self.max_wait_secs)
