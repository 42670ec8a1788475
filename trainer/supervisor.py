"""``tf.train.Supervisor``: TF 1.x's older training wrapper, still in many scripts.

    sv = tf.train.Supervisor(logdir="run")
    with sv.managed_session() as sess:
        while not sv.should_stop():
            sess.run(train_op)

The managed session restores the newest checkpoint in ``logdir`` (else runs ``init_op``, by default
every global variable's initializer, then ``local_init_op``); background services save a checkpoint
every ``save_model_secs`` and write ``summary_op`` (by default every merged summary) every
``save_summaries_secs``, and the queue runners start. Leaving the block stops the services, saves
a last checkpoint (the chief only) and closes the session; an exception inside it stops the
coordinator and is raised again, except OutOfRangeError, the end of the input.
"""

from __future__ import annotations

import contextlib
import os
import threading

from trainer.graph import GraphKeys, get_default_graph

__all__ = ["Supervisor"]

USE_DEFAULT = 0


class Supervisor:
    USE_DEFAULT = USE_DEFAULT

    def __init__(self, graph=None, ready_op=USE_DEFAULT, ready_for_local_init_op=USE_DEFAULT, is_chief: bool = True,
                 init_op=USE_DEFAULT, init_feed_dict=None, local_init_op=USE_DEFAULT, logdir=None,
                 summary_op=USE_DEFAULT, saver=USE_DEFAULT, global_step=USE_DEFAULT, save_summaries_secs: float = 120,
                 save_model_secs: float = 600, recovery_wait_secs: float = 30, stop_grace_secs: float = 120,
                 checkpoint_basename: str = "model.ckpt", session_manager=None, summary_writer=USE_DEFAULT,
                 init_fn=None, local_init_run_options=None):
        from trainer.queues import Coordinator
        from trainer.saver import Saver
        from trainer.summary import merge_all
        from trainer.variables import global_variables, global_variables_initializer, local_variables_initializer

        self._graph = graph or get_default_graph()
        self._is_chief, self._logdir, self._init_fn, self._init_feed_dict = is_chief, logdir, init_fn, init_feed_dict
        self._save_model_secs, self._save_summaries_secs = save_model_secs, save_summaries_secs
        self._stop_grace_secs = stop_grace_secs
        with self._graph.as_default():
            self._init_op = global_variables_initializer() if init_op is USE_DEFAULT else init_op
            self._local_init_op = local_variables_initializer() if local_init_op is USE_DEFAULT else local_init_op
            has_variables = bool(global_variables(self._graph))
            self._saver = (Saver() if has_variables else None) if saver is USE_DEFAULT else saver
            self._summary_op = merge_all() if summary_op is USE_DEFAULT else summary_op
            steps = self._graph.get_collection(GraphKeys.GLOBAL_STEP)
            self._global_step = (steps[0] if steps else None) if global_step is USE_DEFAULT else global_step
        if summary_writer is USE_DEFAULT:
            summary_writer = None
            if logdir and is_chief and self._summary_op is not None:
                from trainer.summary import FileWriter

                summary_writer = FileWriter(logdir, graph=self._graph)
        self._summary_writer = summary_writer
        self._save_path = os.path.join(logdir, checkpoint_basename) if logdir else None
        self._coord = Coordinator()
        self._session = None

    # -- TF's properties ------------------------------------------------------------------------------
    @property
    def coord(self):
        return self._coord

    @property
    def saver(self):
        return self._saver

    @property
    def summary_writer(self):
        return self._summary_writer

    @property
    def summary_op(self):
        return self._summary_op

    @property
    def global_step(self):
        return self._global_step

    @property
    def is_chief(self) -> bool:
        return self._is_chief

    @property
    def save_path(self):
        return self._save_path

    @property
    def init_op(self):
        return self._init_op

    # -- sessions ---------------------------------------------------------------------------------------
    def prepare_or_wait_for_session(self, master: str = "", config=None, wait_for_checkpoint: bool = False,
                                    max_wait_secs: float = 7200, start_standard_services: bool = True):
        """A session restored from ``logdir``'s newest checkpoint, or initialized; services started."""
        from trainer.checkpoint_index import latest_checkpoint
        from trainer.session import Session

        sess = Session(self._graph, target=master or None, config=config)
        checkpoint = latest_checkpoint(self._logdir) if self._logdir and os.path.isdir(self._logdir) else None
        if checkpoint is not None and self._saver is not None:
            self._saver.restore(sess, checkpoint)
        else:
            if self._init_op is not None:
                sess.run(self._init_op, self._init_feed_dict)
            if self._init_fn is not None:
                self._init_fn(sess)
        if self._local_init_op is not None:
            sess.run(self._local_init_op)
        self._session = sess
        if start_standard_services:
            self.start_standard_services(sess)
        return sess

    @contextlib.contextmanager
    def managed_session(self, master: str = "", config=None, start_standard_services: bool = True,
                        close_summary_writer: bool = True):
        sess = self.prepare_or_wait_for_session(master, config, start_standard_services=start_standard_services)
        try:
            yield sess
        except Exception as e:  # noqa: BLE001 - recorded, so stop() raises it again (OutOfRange ends training)
            self._coord.request_stop(e)
        finally:
            try:
                self.stop(close_summary_writer=close_summary_writer)
            finally:
                sess.close()

    def start_standard_services(self, sess) -> list[threading.Thread]:
        """The checkpoint and summary services (the chief's, where there is a logdir) and the queue runners."""
        threads = []
        if self._is_chief and self._save_path and self._saver is not None and self._save_model_secs:
            threads.append(self.loop(self._save_model_secs, self._save_checkpoint, (sess,)))
        if self._is_chief and self._summary_writer is not None and self._summary_op is not None \
                and self._save_summaries_secs:
            threads.append(self.loop(self._save_summaries_secs, self._write_summaries, (sess,)))
        threads.extend(self.start_queue_runners(sess))
        return threads

    def start_queue_runners(self, sess, queue_runners=None) -> list[threading.Thread]:
        threads = []
        for qr in queue_runners if queue_runners is not None else self._graph.get_collection(GraphKeys.QUEUE_RUNNERS):
            threads.extend(qr.create_threads(sess, self._coord))
        return threads

    def loop(self, timer_interval_secs: float, target, args=None, kwargs=None) -> threading.Thread:
        """Run ``target(*args, **kwargs)`` every ``timer_interval_secs`` until the coordinator stops."""
        def run():
            while not self._coord.wait_for_stop(timer_interval_secs):
                try:
                    target(*(args or ()), **(kwargs or {}))
                except Exception as e:  # noqa: BLE001 - a failing service stops the training, as TF's does
                    self._coord.request_stop(e)
                    return

        thread = threading.Thread(target=run, daemon=True, name=f"supervisor-{getattr(target, '__name__', 'loop')}")
        thread.start()
        self._coord.register_thread(thread)
        return thread

    def should_stop(self) -> bool:
        return self._coord.should_stop()

    def request_stop(self, ex=None) -> None:
        self._coord.request_stop(ex)

    def stop(self, threads=None, close_summary_writer: bool = True, ignore_live_threads: bool = False) -> None:
        """Stop the services and the queue runners (raising the first error one reported), save a last
        checkpoint (the chief's), close the summary writer."""
        try:
            self._coord.join(threads, stop_grace_period_secs=self._stop_grace_secs)
            if self._session is not None and self._is_chief and self._save_path and self._saver is not None:
                self._save_checkpoint(self._session)
        finally:
            if close_summary_writer and self._summary_writer is not None:
                self._summary_writer.close()

    def summary_computed(self, sess, summary, global_step=None) -> None:
        if self._summary_writer is None:
            raise RuntimeError("summary_computed: this Supervisor has no summary writer (give it a logdir)")
        step = global_step if global_step is not None else self._step(sess)
        self._summary_writer.add_summary(summary, step)

    # -- plumbing ---------------------------------------------------------------------------------------
    def _step(self, sess):
        return None if self._global_step is None else int(sess.run(self._global_step))

    def _save_checkpoint(self, sess) -> None:
        self._saver.save(sess, self._save_path, global_step=self._global_step)

    def _write_summaries(self, sess) -> None:
        self._summary_writer.add_summary(sess.run(self._summary_op), self._step(sess))

