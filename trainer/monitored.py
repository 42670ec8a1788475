"""A training session with fault tolerance on by default, in one process or on a cluster.

``MonitoredTrainingSession`` restores the newest checkpoint in ``checkpoint_dir`` when it starts
(or initializes the variables when there is none), saves every ``save_steps`` steps or
``save_secs`` seconds while training, and once more when closed. A crashed job restarted with
the same directory resumes from its last complete checkpoint.

On a cluster (``master=server.target``) only the chief initializes, restores and saves; the other
workers wait, bounded by ``ready_timeout``, until the chief has initialized every variable. All of
them stop when the shared global step reaches ``max_steps`` (or a ``StopAtStepHook`` says so), and
closing tells every PS task this worker is done, so a PS's ``Server.join()`` returns once all are.

Failures on a cluster need no user code either: when a step fails because another task died, hung
or restarted (``trainer.distributed.recovery``), leaving the ``with`` block exits the process with
``exit_codes.PEER_UNAVAILABLE`` (nothing is saved: the variables may be half gone); the launcher or
the Kubeflow operator restarts the task and the chief restores the last checkpoint. Each step's time
goes to the task's metrics (Prometheus ``/metrics``), and every ``report_steps`` steps the chief
logs a straggler report and writes its step-time scalars to TensorBoard in ``checkpoint_dir``.
"""

from __future__ import annotations

import logging
import time

from trainer.checkpoint_index import remove_leftovers
from trainer.errors import OutOfRangeError
from trainer.graph import GraphKeys, get_default_graph
from trainer.hooks import SessionRunArgs, SessionRunContext, SessionRunValues
from trainer.queues import Coordinator, start_queue_runners
from trainer.saver import Saver, latest_checkpoint
from trainer.session import Session
from trainer.summary import FileWriter
from trainer.variables import (global_variables, global_variables_initializer, local_variables_initializer,
                               variables_initializer)

__all__ = ["MonitoredTrainingSession"]

log = logging.getLogger("trainer.monitored")


class MonitoredTrainingSession:
    """``with MonitoredTrainingSession(checkpoint_dir=d) as sess: while not sess.should_stop(): sess.run(train_op)``."""

    def __init__(self, checkpoint_dir: str | None = None, *, master: str | None = None, is_chief: bool = True,
                 hooks=(), graph=None, save_steps: int | None = None, save_secs: float | None = 600.0,
                 max_steps: int | None = None, max_to_keep: int = 5, summary_op=None,
                 save_summaries_steps: int = 100, saver: Saver | None = None, ready_timeout: float = 300.0,
                 report_steps: int = 100, save_checkpoint_steps: int | None = None,
                 save_checkpoint_secs: float | None = None, **session_kwargs):
        if save_checkpoint_steps is not None or save_checkpoint_secs is not None:  # TF 1.x's names for them
            save_steps, save_secs = save_checkpoint_steps, save_checkpoint_secs
        self.graph = graph or get_default_graph()
        self.checkpoint_dir = checkpoint_dir
        self.is_chief = is_chief
        self.save_steps, self.save_secs, self.max_steps = save_steps, save_secs, max_steps
        self.hooks = list(hooks or ())
        steps = self.graph.get_collection(GraphKeys.GLOBAL_STEP)
        if not steps:
            from trainer.train import get_or_create_global_step

            steps = [get_or_create_global_step(self.graph)]
        self.global_step = steps[0]
        with self.graph.as_default():
            for hook in self.hooks:
                hook.begin()
        writes = bool(checkpoint_dir) and is_chief  # only the chief writes checkpoints and summaries
        with self.graph.as_default():
            self.saver = saver or (Saver(max_to_keep=max_to_keep, graph=self.graph) if writes else None)
            init = global_variables_initializer()
            local_init = local_variables_initializer()
            if self.saver is not None:  # what a restore leaves uninitialized: the variables the saver skips
                saved = {id(v) for v in self.saver.var_list}
                self._init_unsaved = variables_initializer(
                    [v for v in global_variables(self.graph) if id(v) not in saved], name="init_unsaved")
        if not is_chief:
            self.saver = None
        self.session = Session(self.graph, target=master or None, **session_kwargs)
        if writes:
            remove_leftovers(checkpoint_dir)  # temporary files of a chief killed mid-save
        runtime = self.session.runtime
        self.server = None if runtime is None else runtime.server
        self.summary_op = summary_op
        self.save_summaries_steps = save_summaries_steps
        self.report_steps = report_steps
        self.restored_from = latest_checkpoint(checkpoint_dir) if writes else None
        try:
            self._prepare(init, local_init, ready_timeout)
        except Exception as e:
            from trainer.distributed.recovery import is_peer_failure, leave_for_restart

            if self.server is not None and is_peer_failure(e):
                leave_for_restart(self.server.task, e)  # e.g. the PS restarted while this task started
            raise
        self.writer = FileWriter(checkpoint_dir) if (writes and (summary_op is not None or self.server)) else None

    def _prepare(self, init, local_init, ready_timeout: float) -> None:
        """Restore or initialize (the chief) or wait for the chief to have done so (the others)."""
        if self.is_chief:
            # Restore before initializing anything: workers start stepping once every variable is
            # initialized, so initial values must never be visible between an init and a restore.
            if self.restored_from:
                self.saver.restore(self.session, self.restored_from)
                self.session.run(self._init_unsaved)
            else:
                self.session.run(init)
        else:
            self._wait_until_initialized(ready_timeout)
        self.session.run(local_init)  # each worker's own metrics and counters
        self._step = int(self.session.run(self.global_step))
        self._last_save_time = time.time()
        self._last_save_step = self._step
        self._stop = self.max_steps is not None and self._step >= self.max_steps
        # A hook may ask to stop before any step (a restarted job already at its StopAtStepHook's
        # last step): through the coordinator, as in TensorFlow.
        self.coord = Coordinator()
        self._queue_threads = start_queue_runners(self.session, self.coord)  # the graph's input pipelines
        for hook in self.hooks:
            hook.after_create_session(self.session, self.coord)

    def _wait_until_initialized(self, timeout: float) -> None:
        runtime = self.session.runtime
        if runtime is None:
            raise ValueError("is_chief=False needs master= (the target of this worker's trainer.train.Server)")
        deadline = time.monotonic() + timeout
        variables = global_variables(self.graph)
        while True:
            missing = runtime.uninitialized_variables(variables)
            if not missing:
                return
            if time.monotonic() >= deadline:
                from trainer.distributed.errors import DeadlineExceededError

                raise DeadlineExceededError(
                    f"{len(missing)} variable(s) still uninitialized after {timeout:.3g} s, e.g. {missing[:3]}: "
                    "is the chief (is_chief=True) running and initializing them?")
            time.sleep(0.1)

    @property
    def step(self) -> int:
        """The global step after the last ``run``."""
        return self._step

    def run(self, fetches, feed_dict=None):
        """``Session.run`` plus the hooks' extra fetches and the global step, in one step."""
        context = SessionRunContext(SessionRunArgs(fetches, feed_dict), self.session)
        requests = [hook.before_run(context) for hook in self.hooks]
        feeds = dict(feed_dict or {})
        for request in requests:
            if request is not None and request.feed_dict:
                feeds.update(request.feed_dict)
        extra = [None if r is None else r.fetches for r in requests]
        # A due summary is fetched in the same run as the step (a second run would take another
        # batch from an input pipeline); it is due when the step about to be taken is a multiple.
        summary_due = (self.writer is not None and self.summary_op is not None
                       and (self._step + 1) % self.save_summaries_steps == 0)
        if summary_due:
            extra.append(self.summary_op)
        started = time.perf_counter()
        out, step, extra_values = _run_flat(self.session, fetches, self.global_step, extra, feeds or None)
        if self.server is not None:
            self.server.metrics.observe_step(time.perf_counter() - started)
        previous, self._step = self._step, step
        if summary_due:
            self.writer.add_summary(extra_values.pop(), step)
        for hook, values in zip(self.hooks, extra_values):
            hook.after_run(context, SessionRunValues(values))
        if context.stop_requested or (self.max_steps is not None and step + 1 >= self.max_steps):
            self._step = self._read_step()  # at the end, the exact step: whether to stop, what to save
        if (self.server is not None and self.is_chief and self.report_steps
                and self._step // self.report_steps > previous // self.report_steps):
            self._report(self._step)
        if self.saver is not None:
            due_steps = self.save_steps is not None and self._step - self._last_save_step >= self.save_steps
            due_secs = self.save_secs is not None and time.time() - self._last_save_time >= self.save_secs
            if due_steps or due_secs:
                self.save()
        if self.max_steps is not None and self._step >= self.max_steps:
            self._stop = True
        self._stop = self._stop or context.stop_requested
        return out

    def _read_step(self) -> int:
        """The global step now. The one fetched with a step's fetches may predate that step's
        update when the global step lives on a PS task (it is read while the update runs there)."""
        return int(self.session.run(self.global_step))

    def _report(self, step: int) -> None:
        from trainer.distributed.stragglers import straggler_report

        line, scalars = straggler_report(self.server, step)
        log.info(line)
        if self.writer is not None:
            for tag, value in scalars.items():
                self.writer.add_scalar(tag, value, step)

    def save(self) -> str:
        self._step = self._read_step()  # the checkpoint's name must be the step its values hold
        path = self.saver.save(self.session, f"{self.checkpoint_dir}/model", global_step=self._step)
        self._last_save_time = time.time()
        self._last_save_step = self._step
        return path

    def should_stop(self) -> bool:
        return self._stop or self.coord.should_stop()

    def close(self, peer_failed: bool = False) -> None:
        """Save a last checkpoint, end the hooks, tell the PS tasks this worker is done. After a
        peer failure (``peer_failed``) nothing is saved or said: this task is about to restart."""
        try:
            if self.saver is not None and self._step != self._last_save_step and not peer_failed:
                self.save()
            for hook in self.hooks:
                hook.end(self.session)
            if self.writer is not None:
                self.writer.close()
        finally:
            try:
                self.coord.request_stop()
                self.coord.join(self._queue_threads)  # re-raises a queue runner's error (a bad record)
            finally:
                self.session.close()
                if self.server is not None and not peer_failed:
                    self.server.done()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        from trainer.distributed.recovery import is_peer_failure, leave_for_restart

        if self.server is None or not is_peer_failure(exc):
            self.close()
            return exc_type is OutOfRangeError  # the input pipeline ran out: a normal end, as in TensorFlow
        try:
            self.close(peer_failed=True)
        except Exception:  # noqa: BLE001 - the peer failure is what this task reports
            pass
        leave_for_restart(self.server.task, exc)


def _run_flat(session: Session, fetches, global_step, extra: list, feed_dict):
    """(``fetches``' values, the global step, each hook's extra values) from one ``Session.run``.

    Everything is fetched as one flat list, which the session's plan cache can hash (a nested
    structure would be compiled, and on a cluster registered, anew every step).
    """
    leaves: list = []
    rebuild = _flatten([fetches, global_step, extra], leaves)
    out, step, extra_values = rebuild(session.run(leaves, feed_dict))
    return out, int(step), extra_values


def _flatten(structure, leaves: list):
    """Append ``structure``'s leaves to ``leaves``; a function rebuilding it from their values."""
    if structure is None:
        return lambda values: None
    if isinstance(structure, (list, tuple)) and not hasattr(structure, "_fields"):
        parts = [_flatten(s, leaves) for s in structure]
        if isinstance(structure, tuple):
            return lambda values: tuple(p(values) for p in parts)
        return lambda values: [p(values) for p in parts]
    if isinstance(structure, dict):
        parts = {k: _flatten(v, leaves) for k, v in structure.items()}
        return lambda values: {k: p(values) for k, p in parts.items()}
    i = len(leaves)
    leaves.append(structure)
    return lambda values: values[i]
