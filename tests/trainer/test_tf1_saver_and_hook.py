"""TensorFlow 1.x checkpoint code runs unchanged (issue 21): ``tf.train.Saver`` with a dict or a list,
and ``tf.train.CheckpointSaverHook`` under MonitoredTrainingSession and the Estimator."""

from __future__ import annotations

import numpy as np
import pytest

import trainer as tf
from tests.trainer.counting_model import counting_model
from trainer.partitioned_variables import fixed_size_partitioner, partitioned_variable
from trainer.saver import load_checkpoint


def _graph(w_value=1.0, b_value=2.0):
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(np.full((2, 3), w_value, np.float32), name="weights")
        b = tf.Variable(np.full((3,), b_value, np.float32), name="biases")
        init = tf.global_variables_initializer()
    return g, w, b, init


def test_saver_with_a_dict_saves_under_the_given_names_and_restores_into_others(tmp_path):
    g, w, b, init = _graph()
    with g.as_default():
        saver = tf.train.Saver({"layer/w": w, "layer/b": b})
    with tf.Session(graph=g) as sess:
        sess.run(init)
        path = saver.save(sess, str(tmp_path / "model"), global_step=3)
    _, values = load_checkpoint(path)
    assert sorted(values) == ["layer/b", "layer/w"]

    g2 = tf.Graph()
    with g2.as_default():
        other = tf.Variable(np.zeros((2, 3), np.float32), name="renamed")
        restorer = tf.train.Saver({"layer/w": other})
    with tf.Session(graph=g2) as sess:
        restorer.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        np.testing.assert_array_equal(sess.run(other), np.ones((2, 3), np.float32))


def test_saver_with_a_list_saves_only_those_variables(tmp_path):
    g, w, b, init = _graph()
    with g.as_default():
        saver = tf.train.Saver([w])
    with tf.Session(graph=g) as sess:
        sess.run(init)
        path = saver.save(sess, str(tmp_path / "model"))
    assert sorted(load_checkpoint(path)[1]) == ["weights"]

    g2, w2, b2, init2 = _graph(w_value=5.0, b_value=7.0)
    with g2.as_default():
        restorer = tf.train.Saver([w2])
    with tf.Session(graph=g2) as sess:
        sess.run(init2)
        restorer.restore(sess, path)
        np.testing.assert_array_equal(sess.run(w2), np.ones((2, 3), np.float32))
        np.testing.assert_array_equal(sess.run(b2), np.full((3,), 7.0, np.float32))  # not in the list: kept


def test_saver_dict_takes_a_partitioned_variable_whole(tmp_path):
    g = tf.Graph()
    with g.as_default():
        table = partitioned_variable("emb", (5, 2), initializer=np.arange(10, dtype=np.float32).reshape(5, 2),
                                     partitioner=fixed_size_partitioner(2))
        saver = tf.train.Saver({"embedding": table})
        init = tf.global_variables_initializer()
    with tf.Session(graph=g) as sess:
        sess.run(init)
        path = saver.save(sess, str(tmp_path / "m"))
    meta, values = load_checkpoint(path)
    np.testing.assert_array_equal(values["embedding"], np.arange(10, dtype=np.float32).reshape(5, 2))
    assert {info["full_name"] for info in meta["slices"].values()} == {"embedding"}

    g2 = tf.Graph()
    with g2.as_default():
        plain = tf.Variable(np.zeros((5, 2), np.float32), name="plain")
        restorer = tf.train.Saver({"embedding": plain})
    with tf.Session(graph=g2) as sess:
        restorer.restore(sess, path)
        np.testing.assert_array_equal(sess.run(plain), np.arange(10, dtype=np.float32).reshape(5, 2))


def test_saver_var_list_errors_name_the_entry():
    g, w, b, _ = _graph()
    with g.as_default():
        with pytest.raises(TypeError, match=r"var_list\['w'\] is a Tensor"):
            tf.train.Saver({"w": w * 2.0})
        with pytest.raises(ValueError, match=r"var_list\['both'\] holds 2 variables"):
            tf.train.Saver({"both": [w, b]})
        with pytest.raises(TypeError, match=r"var_list\[1\] is a str"):
            tf.train.Saver([w, "biases"])
        with pytest.raises(ValueError, match="no variables to save"):
            tf.train.Saver({})


def _train_with(g, train, hooks):
    with tf.train.MonitoredTrainingSession(graph=g, hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train)
        return sess.step


def test_checkpoint_saver_hook_saves_every_n_steps_at_creation_and_at_the_end(tmp_path):
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / ".tmp-my-3.ckpt-abcd1234").write_bytes(b"torn")  # a save killed mid-write, earlier
    g, v, train = counting_model(3)
    with g.as_default():
        hooks = [tf.train.StopAtStepHook(last_step=10),
                 tf.train.CheckpointSaverHook(str(tmp_path), save_steps=3, checkpoint_basename="my.ckpt")]
    assert _train_with(g, train, hooks) == 10
    assert not list(tmp_path.glob(".tmp-*"))
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == sorted(f"my-{s}.ckpt" for s in (0, 3, 6, 9, 10))
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "my-10")

    g, v, train = counting_model(3)  # a MonitoredTrainingSession on the folder resumes from the hook's checkpoint
    with tf.train.MonitoredTrainingSession(str(tmp_path), graph=g, save_secs=None) as sess:
        assert sess.step == 10 and list(sess.session.run(v)) == [10, 10, 10]


def test_checkpoint_saver_hook_by_seconds_and_its_saver(tmp_path):
    g, v, train = counting_model(3)
    with g.as_default():
        saver = tf.train.Saver([v], max_to_keep=1)
        hooks = [tf.train.StopAtStepHook(last_step=4),
                 tf.train.CheckpointSaverHook(str(tmp_path), save_secs=3600, saver=saver)]
    assert _train_with(g, train, hooks) == 4
    assert [p.name for p in tmp_path.glob("*.ckpt")] == ["model-4.ckpt"]  # creation's model-0 rotated out
    assert sorted(load_checkpoint(str(tmp_path / "model-4.ckpt"))[1]) == ["v"]


def test_a_checkpoint_saver_listener_sees_each_save_and_can_stop_training(tmp_path):
    class StopAtSix(tf.train.CheckpointSaverListener):
        def __init__(self):
            self.calls = []

        def before_save(self, session, global_step_value):
            self.calls.append(("before", global_step_value))

        def after_save(self, session, global_step_value):
            self.calls.append(("after", global_step_value))
            return global_step_value >= 6

        def end(self, session, global_step_value):
            self.calls.append(("end", global_step_value))

    listener = StopAtSix()
    g, v, train = counting_model(3)
    with g.as_default():
        hook = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=2, listeners=[listener])
    assert _train_with(g, train, [hook]) == 6
    assert listener.calls == [(w, s) for s in (0, 2, 4, 6) for w in ("before", "after")] + [("end", 6)]


def test_checkpoint_saver_hook_refuses_unclear_schedules(tmp_path):
    for kwargs in ({}, {"save_secs": 10, "save_steps": 10}):
        with pytest.raises(ValueError, match="exactly one of save_secs and save_steps"):
            tf.train.CheckpointSaverHook(str(tmp_path), **kwargs)
    with pytest.raises(ValueError, match="save_steps must be positive"):
        tf.train.CheckpointSaverHook(str(tmp_path), save_steps=0)


def test_checkpoint_saver_hook_under_the_estimator(tmp_path):
    def model_fn(features, labels, mode):
        w = tf.Variable(np.zeros((1,), np.float32), name="w")
        loss = tf.reduce_sum(tf.square(w - 1.0))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=tf.train.get_or_create_global_step())
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train)

    def input_fn():
        return {"x": tf.constant(np.zeros((1, 1), np.float32))}, tf.constant(np.zeros((1, 1), np.float32))

    extra = tmp_path / "extra"
    est = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path / "model"))
    est.train(input_fn, hooks=[tf.estimator.CheckpointSaverHook(str(extra), save_steps=2)], steps=5)
    assert sorted(p.name for p in extra.glob("*.ckpt")) == sorted(f"model-{s}.ckpt" for s in (0, 2, 4, 5))
