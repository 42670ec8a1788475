"""A training session with fault tolerance on by default.

``MonitoredTrainingSession`` restores the newest checkpoint in ``checkpoint_dir`` when it starts
(or initializes the variables when there is none), saves every ``save_steps`` steps or
``save_secs`` seconds while training, and once more when closed. A crashed job restarted with
the same directory resumes from its last complete checkpoint.
"""

from __future__ import annotations

import time

from trainer.graph import GraphKeys, get_default_graph
from trainer.saver import Saver, latest_checkpoint
from trainer.session import Session
from trainer.summary import FileWriter
from trainer.variables import global_variables_initializer

__all__ = ["MonitoredTrainingSession"]


class MonitoredTrainingSession:
    """``with MonitoredTrainingSession(checkpoint_dir=d) as sess: while not sess.should_stop(): sess.run(train_op)``."""

    def __init__(self, checkpoint_dir: str | None = None, *, graph=None, save_steps: int | None = None,
                 save_secs: float | None = 600.0, max_steps: int | None = None, max_to_keep: int = 5,
                 summary_op=None, save_summaries_steps: int = 100, saver: Saver | None = None, **session_kwargs):
        self.graph = graph or get_default_graph()
        self.checkpoint_dir = checkpoint_dir
        self.save_steps, self.save_secs, self.max_steps = save_steps, save_secs, max_steps
        steps = self.graph.get_collection(GraphKeys.GLOBAL_STEP)
        if not steps:
            from trainer.train import get_or_create_global_step

            steps = [get_or_create_global_step(self.graph)]
        self.global_step = steps[0]
        with self.graph.as_default():
            self.saver = saver or (Saver(max_to_keep=max_to_keep, graph=self.graph) if checkpoint_dir else None)
            init = global_variables_initializer()
        self.session = Session(self.graph, **session_kwargs)
        self.restored_from = latest_checkpoint(checkpoint_dir) if checkpoint_dir else None
        self.session.run(init)
        if self.restored_from:
            self.saver.restore(self.session, self.restored_from)
        self.summary_op = summary_op
        self.save_summaries_steps = save_summaries_steps
        self.writer = FileWriter(checkpoint_dir) if (checkpoint_dir and summary_op is not None) else None
        self._last_save_time = time.time()
        self._last_save_step = self.step
        self._stop = False

    @property
    def step(self) -> int:
        return int(self.session.state.variables[self.global_step.name])

    def run(self, fetches, feed_dict=None):
        out = self.session.run(fetches, feed_dict)
        step = self.step
        if self.writer is not None and step % self.save_summaries_steps == 0:
            self.writer.add_summary(self.session.run(self.summary_op, feed_dict), step)
        if self.saver is not None:
            due_steps = self.save_steps is not None and step - self._last_save_step >= self.save_steps
            due_secs = self.save_secs is not None and time.time() - self._last_save_time >= self.save_secs
            if due_steps or due_secs:
                self.save()
        if self.max_steps is not None and step >= self.max_steps:
            self._stop = True
        return out

    def save(self) -> str:
        path = self.saver.save(self.session, f"{self.checkpoint_dir}/model", global_step=self.step)
        self._last_save_time = time.time()
        self._last_save_step = self.step
        return path

    def should_stop(self) -> bool:
        return self._stop

    def close(self) -> None:
        if self.saver is not None and self.step != self._last_save_step:
            self.save()
        if self.writer is not None:
            self.writer.close()
        self.session.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
