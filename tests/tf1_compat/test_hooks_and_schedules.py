"""tf.train.SummarySaverHook, FeedFnHook, GlobalStepWaiterHook, SecondOrStepTimer and the
cosine_decay_restarts / linear_cosine_decay schedules, as TF 1.15 training scripts use them."""

from __future__ import annotations

import glob
import threading
import time

import numpy as np
import pytest

import trainer as tf


class RecordingWriter:
    def __init__(self):
        self.summaries, self.flushed = [], 0

    def add_summary(self, summary, global_step=None):
        self.summaries.append((global_step, summary))

    def flush(self):
        self.flushed += 1


def _model():
    x = tf.placeholder(tf.float32, [])
    w = tf.Variable(0.0)
    step = tf.train.get_or_create_global_step()
    train = tf.group(tf.assign_add(w, x), tf.assign_add(step, 1))
    return x, w, train


def test_second_or_step_timer():
    timer = tf.train.SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(0) and timer.update_last_triggered_step(0) == (None, None)
    assert [timer.should_trigger_for_step(s) for s in (0, 1, 2, 3, 4)] == [False, False, False, True, True]
    elapsed_secs, elapsed_steps = timer.update_last_triggered_step(4)
    assert elapsed_steps == 4 and elapsed_secs >= 0 and timer.last_triggered_step() == 4
    timer.reset()
    assert timer.last_triggered_step() is None and timer.should_trigger_for_step(4)
    by_time = tf.estimator.SecondOrStepTimer(every_secs=3600)
    by_time.update_last_triggered_step(1)
    assert not by_time.should_trigger_for_step(1000)
    with pytest.raises(ValueError, match="Either every_secs or every_steps should be provided"):
        tf.train.SecondOrStepTimer()
    with pytest.raises(ValueError, match="Can not provide both every_secs and every_steps"):
        tf.train.SecondOrStepTimer(every_secs=1, every_steps=1)


def test_feed_fn_hook_feeds_every_step():
    x, w, train = _model()
    values = iter([1.0, 2.0, 4.0, 0.0])
    hook = tf.train.FeedFnHook(lambda: {x: next(values)})
    with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        for _ in range(3):
            sess.run(train)
        assert sess.run(w) == 7.0  # this run is hooked too: it takes the last feed


def test_summary_saver_hook_writes_every_n_steps_at_the_step_reached():
    x, w, train = _model()
    summary = tf.summary.scalar("x", x)
    writer = RecordingWriter()
    hook = tf.train.SummarySaverHook(save_steps=2, summary_writer=writer, summary_op=summary)
    with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        for i in range(5):
            sess.run(train, {x: 10.0 * i})
    assert [step for step, _ in writer.summaries] == [1, 3, 5] and writer.flushed >= 1
    from tensorboard.compat.proto.summary_pb2 import Summary

    values = [Summary.FromString(np.asarray(s, dtype=object)[()]).value[0].simple_value for _, s in writer.summaries]
    assert values == [0.0, 20.0, 40.0]  # fetched in the step's own run, with its feeds


def test_summary_saver_hook_with_a_scaffold_writes_event_files(tmp_path):
    from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader

    x, w, train = _model()
    tf.summary.scalar("x", x)
    scaffold = tf.train.Scaffold(summary_op=tf.summary.merge_all())
    hook = tf.estimator.SummarySaverHook(save_steps=1, output_dir=str(tmp_path), scaffold=scaffold)
    with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
        for i in range(3):
            sess.run(train, {x: 2.0 * i})
    tf.summary.FileWriterCache.clear()  # closes the hook's writer
    (events,) = glob.glob(str(tmp_path / "events.out.tfevents*"))
    scalars = [(e.step, v.simple_value) for e in LegacyEventFileLoader(events).Load() for v in e.summary.value]
    assert scalars == [(1, 0.0), (2, 2.0), (3, 4.0)]


def test_summary_saver_hook_argument_errors():
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op must be provided"):
        tf.train.SummarySaverHook(save_steps=1)
    with pytest.raises(ValueError, match="Either every_secs or every_steps"):
        tf.train.SummarySaverHook(summary_op=tf.constant(b""))


def test_global_step_waiter_hook_holds_the_first_step_until_the_chief_moves():
    step = tf.train.get_or_create_global_step()
    chief_step = tf.assign_add(step, 5)
    waiter = tf.train.GlobalStepWaiterHook(wait_until_step=5, poll_secs=0.01, timeout_secs=30)
    waiter.begin()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        context = tf.train.SessionRunContext(tf.train.SessionRunArgs(None), sess)
        chief = threading.Timer(0.2, sess.run, args=[chief_step])  # the chief trains meanwhile
        chief.start()
        started = time.monotonic()
        assert waiter.before_run(context) is None
        chief.join(5)
        assert time.monotonic() - started >= 0.15 and sess.run(step) == 5
        sess.run(tf.assign(step, 0))
        assert waiter.before_run(context) is None  # waits before the first step only
    x, w, train = _model()
    with tf.train.MonitoredTrainingSession(hooks=[tf.train.GlobalStepWaiterHook(0)]) as sess:
        sess.run(train, {x: 1.0})


def test_global_step_waiter_hook_times_out():
    x, w, train = _model()
    waiter = tf.train.GlobalStepWaiterHook(wait_until_step=100, poll_secs=0.01, timeout_secs=0.1)
    with pytest.raises(tf.errors.DeadlineExceededError, match="did not reach 100 within 0.1 s"):
        with tf.train.MonitoredTrainingSession(hooks=[waiter]) as sess:
            sess.run(train, {x: 1.0})


def _restarts_reference(step, first, t_mul, m_mul, alpha):
    fraction = step / first
    if t_mul == 1.0:
        i = np.floor(fraction)
        fraction -= i
    else:
        i = np.floor(np.log(1.0 - fraction * (1.0 - t_mul)) / np.log(t_mul))
        fraction = (fraction - (1.0 - t_mul ** i) / (1.0 - t_mul)) / t_mul ** i
    return 0.1 * ((1 - alpha) * 0.5 * m_mul ** i * (1 + np.cos(np.pi * fraction)) + alpha)


@pytest.mark.parametrize("t_mul, m_mul, alpha", [(2.0, 0.5, 0.1), (1.0, 1.0, 0.0), (1.5, 0.9, 0.0)])
def test_cosine_decay_restarts_follows_tf_formula(t_mul, m_mul, alpha):
    step = tf.placeholder(tf.int64, [])
    lr = tf.train.cosine_decay_restarts(0.1, step, 10, t_mul=t_mul, m_mul=m_mul, alpha=alpha)
    with tf.Session() as sess:
        for s in (0, 5, 9, 10, 15, 29, 30, 75):
            np.testing.assert_allclose(sess.run(lr, {step: s}), _restarts_reference(s, 10, t_mul, m_mul, alpha),
                                       rtol=1e-5)
    assert _restarts_reference(10, 10, 2.0, 0.5, 0.0) == pytest.approx(0.05)  # the restart's lower peak


def test_linear_cosine_decay_follows_tf_formula():
    step = tf.placeholder(tf.int64, [])
    lr = tf.train.linear_cosine_decay(0.1, step, 100, num_periods=2.0, alpha=0.1, beta=0.001)
    with tf.Session() as sess:
        for s in (0, 10, 50, 75, 100, 150):
            p = min(s, 100) / 100
            expected = 0.1 * ((0.1 + 1 - p) * 0.5 * (1 + np.cos(2 * np.pi * 2.0 * p)) + 0.001)
            np.testing.assert_allclose(sess.run(lr, {step: s}), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="global_step is required for linear_cosine_decay"):
        tf.train.linear_cosine_decay(0.1, None, 10)


SCHEDULES = {  # each schedule at step 30 from a rate of 0.2, by TF 1.15's formula
    "exponential_decay": (lambda lr, s: tf.train.exponential_decay(lr, s, 10, 0.5), 0.2 * 0.5 ** 3),
    "inverse_time_decay": (lambda lr, s: tf.train.inverse_time_decay(lr, s, 10, 0.5), 0.2 / (1 + 0.5 * 3)),
    "natural_exp_decay": (lambda lr, s: tf.train.natural_exp_decay(lr, s, 10, 0.5), 0.2 * np.exp(-1.5)),
    "polynomial_decay": (lambda lr, s: tf.train.polynomial_decay(lr, s, 60, 0.02), (0.2 - 0.02) * 0.5 + 0.02),
    "cosine_decay": (lambda lr, s: tf.train.cosine_decay(lr, s, 60), 0.2 * 0.5 * (1 + np.cos(np.pi * 0.5))),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("rate", ["float", "variable", "float64 tensor"])
def test_schedules_start_from_a_number_a_variable_or_a_tensor(name, rate):
    """optimize_loss hands its schedule a learning-rate variable; TF's schedules take any of these."""
    make, expected = SCHEDULES[name]
    lr = {"float": lambda: 0.2, "variable": lambda: tf.Variable(0.2, trainable=False),
          "float64 tensor": lambda: tf.constant(0.2, dtype=tf.float64)}[rate]()
    step = tf.placeholder(tf.int64, [])
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        np.testing.assert_allclose(sess.run(make(lr, step), {step: 30}), expected, rtol=1e-5)
