"""``tf.train.Supervisor``, as older TF1 scripts train with it: a managed session that restores
or initializes, saves checkpoints and summaries in the background, and resumes after a restart."""

from __future__ import annotations

import os

import numpy as np
import pytest

import trainer as tf


def build():
    x = tf.placeholder(tf.float32, [None, 1])
    w = tf.Variable(0.0, name="w")
    step = tf.train.get_or_create_global_step()
    loss = tf.reduce_mean(tf.square(x * w - 2.0 * x))
    tf.summary.scalar("loss", loss)
    train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=step)
    return x, w, step, train


def test_a_managed_session_trains_saves_and_resumes(tmp_path):
    logdir = str(tmp_path / "run")
    xs = np.ones((4, 1), np.float32)
    x, w, step, train = build()
    sv = tf.train.Supervisor(logdir=logdir, save_model_secs=0.2, save_summaries_secs=0.2)
    with sv.managed_session() as sess:
        for _ in range(30):
            if sv.should_stop():
                break
            sess.run(train, {x: xs})
        trained = sess.run(w)
    assert sv.should_stop() and abs(trained - 2.0) < 0.1
    assert tf.train.latest_checkpoint(logdir).endswith("model.ckpt-30")  # the last save, on leaving
    assert any(name.startswith("events.out.tfevents") for name in os.listdir(logdir))

    tf.reset_default_graph()
    x, w, step, train = build()
    sv = tf.train.Supervisor(logdir=logdir)
    with sv.managed_session() as sess:  # restored, not initialized
        assert sess.run(step) == 30 and sess.run(w) == pytest.approx(trained)


def test_an_error_inside_stops_and_is_raised_and_the_end_of_input_is_not(tmp_path):
    build()
    sv = tf.train.Supervisor(logdir=str(tmp_path / "a"), save_model_secs=0)
    with pytest.raises(ValueError, match="boom"), sv.managed_session():
        raise ValueError("boom")
    assert sv.should_stop()
    sv = tf.train.Supervisor(logdir=str(tmp_path / "b"), save_model_secs=0)
    with sv.managed_session():
        raise tf.errors.OutOfRangeError(None, None, "input exhausted")
    assert sv.should_stop()
